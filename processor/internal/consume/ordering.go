package consume

import (
	"context"
	"log/slog"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/processor/internal/decide"
)

// ordered is what the processor knows of an ordered provider's record's
// entity while it decides the record (issue 24): the entity's holds, one
// per route (decide.Holds), and whether the record is a copy held behind
// a head before. The record's chain is its entity's (EntityChain), so the
// entity's records are decided one at a time and the holds read here are
// the last ones decided.
type ordered struct {
	key    string // decide.EntityKey
	entity string
	holds  decide.Holds
	// seq is the number of a copy held before (hookline.held); 0: none.
	seq int
}

// setHeld numbers a copy held behind its entity's head (hookline.held), or
// clears a number it copied (seq 0): a delivered record is no held copy
// any more.
func setHeld(r *kgo.Record, seq int) {
	if seq > 0 {
		headers.Set(r, headers.Held, strconv.Itoa(seq))
		return
	}
	headers.Delete(r, headers.Held)
}

// settled is closed once a result committed or was dropped.
type settled struct {
	once sync.Once
	ch   chan struct{}
}

// barrier is what an ordered record's chain waits for before its entity's
// next record: its result settled, when the record called a destination
// (it holds its token). A kill repeats the calls not yet committed; were
// the next record called before this one's call committed, the repeat
// would call an earlier event after a later one. So an entity has at most
// one uncommitted call per processor, and the kill repeats that one only.
// nil (no wait) for a record that called nothing: held, parked, a topic
// route's, dead on arrival. It costs an entity's successive calls one
// transaction each, and nothing to other entities.
func barrier(tok *recordToken) *settled {
	if tok == nil {
		return nil
	}
	tok.mu.Lock()
	called := tok.held
	tok.mu.Unlock()
	if !called {
		return nil
	}
	return &settled{ch: make(chan struct{})}
}

func (b *settled) close() {
	if b != nil {
		b.once.Do(func() { close(b.ch) })
	}
}

// wait returns once b is closed, or ctx (the partition's) ended; at once
// for nil.
func (b *settled) wait(ctx context.Context) {
	if b == nil {
		return
	}
	select {
	case <-b.ch:
	case <-ctx.Done():
	}
}

// heldKeys are the entities of one owned partition that have holds in the
// state store, so that the records of every other entity (nearly all,
// when nothing fails) skip the store read for their holds. Registered
// with the partition once it is restored, then filled by a scan of the
// partition's holds (scanHeldKeys), before any of its records is decided;
// kept by Apply, which writes the holds of each committed transaction to
// the store, then here (the partition's current owner's), before
// Committed drops them from the overlay: a reader finds an entity's holds
// in the overlay, or knows here whether the store may have them. The
// store is written for an owned partition by its session's Apply only.
// Registered before the scan, the set cannot miss a hold an Apply writes
// meanwhile; a key it names that the store no longer has costs one read.
type heldKeys struct {
	mu      sync.Mutex
	keys    map[string]struct{}
	unknown bool // the scan failed: every key may have holds
}

// newHeldKeys is an empty set; nil (not known: every record reads the
// store) when no provider is ordered.
func (p *setup) newHeldKeys() *heldKeys {
	if len(p.orderedRoutes()) == 0 {
		return nil
	}
	return &heldKeys{keys: map[string]struct{}{}}
}

// may reports whether key may have holds in the store; true when not
// known (h nil, or the scan failed).
func (h *heldKeys) may(key string) bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.keys[key]
	return ok || h.unknown
}

// set records whether key has holds in the store now (value not nil).
func (h *heldKeys) set(key string, value []byte) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if value == nil {
		delete(h.keys, key)
		return
	}
	h.keys[key] = struct{}{}
}

// scanHeldKeys adds to h the entities with holds in a restored partition;
// when the scan fails (logged) every key may have holds.
func (p *setup) scanHeldKeys(part int32, h *heldKeys, log *slog.Logger) {
	if h == nil {
		return
	}
	err := p.cfg.Store.Scan(part, decide.EntityPrefix, func(key string, _ []byte) error {
		h.mu.Lock()
		h.keys[key] = struct{}{}
		h.mu.Unlock()
		return nil
	})
	if err != nil {
		log.Warn("entities held: scan failed; each ordered record reads its holds from the store", "err", err)
		h.mu.Lock()
		h.unknown = true
		h.mu.Unlock()
	}
}
