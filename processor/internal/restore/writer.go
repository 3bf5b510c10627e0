package restore

import (
	"context"

	"github.com/hookline/hookline/processor/internal/state"
)

// writer applies batches of one partition in a goroutine of its own, one at
// a time, so that decoding the next batch overlaps Badger writing the
// previous one. Two batch slices circulate: one being filled, one being
// applied.
type writer struct {
	st   *state.Store
	p    int32
	todo chan pending
	free chan []state.Change
	errc chan error // the first Apply error
	done chan struct{}
	to   int64 // the last checkpoint applied; read after done
	ok   bool  // whether to was set
}

type pending struct {
	changes []state.Change
	next    int64
}

func startWriter(st *state.Store, p int32, batchCap int) (*writer, []state.Change) {
	w := &writer{
		st: st, p: p,
		todo: make(chan pending),
		free: make(chan []state.Change, 1),
		errc: make(chan error, 1),
		done: make(chan struct{}),
	}
	w.free <- make([]state.Change, 0, batchCap)
	go w.run()
	return w, make([]state.Change, 0, batchCap)
}

func (w *writer) run() {
	defer close(w.done)
	failed := false
	for pd := range w.todo {
		if !failed {
			if err := w.st.Apply(pd.changes, map[int32]int64{w.p: pd.next}); err != nil {
				failed = true
				w.errc <- err
			} else {
				w.to, w.ok = pd.next, true
			}
		}
		clear(pd.changes) // drop the record values
		w.free <- pd.changes[:0]
	}
}

// submit hands changes, with the checkpoint next, to the writer and returns
// an empty batch to fill, once the writer has finished the batch before.
// It returns the writer's error, or ctx's.
func (w *writer) submit(ctx context.Context, changes []state.Change, next int64) ([]state.Change, error) {
	if err := ctx.Err(); err != nil {
		return changes, err
	}
	select {
	case err := <-w.errc:
		return changes, err
	case w.todo <- pending{changes, next}:
	case <-ctx.Done():
		return changes, ctx.Err()
	}
	select {
	case err := <-w.errc:
		return nil, err
	case b := <-w.free:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close waits for the batch in flight and returns the checkpoint reached
// and the first Apply error. Nothing is written to the store after it.
func (w *writer) close() (to int64, ok bool, err error) {
	close(w.todo)
	<-w.done
	select {
	case err = <-w.errc:
	default:
	}
	return w.to, w.ok, err
}
