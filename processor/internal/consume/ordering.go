package consume

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/state"
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

// orderedOf returns the record's entity and holds; nil for a record
// without hookline.entity (not ordered, or its own entity). ow is the
// record's partition: an entity its heldKeys do not name has no holds in
// the store, and costs no read.
func (s *session) orderedOf(ow *partition, r *kgo.Record, provider string) (*ordered, error) {
	e, ok := headers.Get(r, headers.Entity)
	if !ok || e == "" {
		return nil, nil
	}
	o := &ordered{key: decide.EntityKey(provider, e), entity: e}
	// A number the processor did not write (a hand-made record) counts as
	// none: the record is held afresh or delivered, never a reason to stop.
	if n, err := strconv.Atoi(headers.Value(r, headers.Held)); err == nil && n > 0 {
		o.seq = n
	}
	s.mu.Lock()
	ov, ok := s.overlay[o.key]
	s.mu.Unlock()
	if ok {
		o.holds = ov.holds
		return o, nil
	}
	if !ow.heldKeys().may(o.key) {
		return o, nil
	}
	v, ok, err := s.p.cfg.Store.Get(r.Partition, o.key)
	if err != nil {
		return nil, fmt.Errorf("read holds of entity %q: %w", e, err)
	}
	if ok {
		if o.holds, err = decide.DecodeHolds(v); err != nil {
			return nil, fmt.Errorf("decode holds of entity %q: %w", e, err)
		}
	}
	return o, nil
}

// holdsChange adds to res the entity's new holds (decide.Settled.Holds,
// when they changed): its changelog record (placed with the raw record,
// by hookline.entity), its store change and its overlay entry.
func (s *session) holdsChange(res *result, o *ordered, hs decide.Holds) (bool, error) {
	val, err := decide.EncodeHolds(hs)
	if err != nil {
		return false, fmt.Errorf("encode holds of entity %q: %w", o.entity, err)
	}
	cr := &kgo.Record{Topic: s.p.cfg.Names.Changelog, Key: []byte(o.key), Value: val,
		Headers: []kgo.RecordHeader{{Key: headers.Entity, Value: []byte(o.entity)}}}
	res.out.Records = append(res.out.Records, cr)
	res.holdChange = &state.Change{Partition: res.r.Partition, Key: o.key, Value: val}
	s.mu.Lock()
	defer s.mu.Unlock()
	if res.ow.gone() {
		return false, nil
	}
	s.seq++
	s.overlay[o.key] = overlaid{part: res.r.Partition, holds: hs, seq: s.seq}
	res.holdSeq = s.seq
	return true, nil
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
