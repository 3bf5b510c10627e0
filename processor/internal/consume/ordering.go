package consume

import (
	"context"
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
