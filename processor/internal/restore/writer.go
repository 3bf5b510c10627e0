package restore

import (
	"context"
	"errors"
	"log/slog"

	"github.com/hookline/hookline/processor/internal/state"
)

// writer applies batches of one partition in a goroutine of its own, one at
// a time, so that decoding the next batch overlaps Badger writing the
// previous one. Two batch slices circulate: one being filled, one being
// applied.
//
// Incrementally (the partition has a checkpoint) each batch is one
// Store.Apply with its checkpoint. In bulk (the partition is restored from
// scratch) batches go to a state.Loader, with a checkpoint every
// Config.CheckpointBytes and one at the end: after the last batch handed over, also
// when the restore is cancelled or fails, so a later restore resumes from
// there.
type writer struct {
	st  *state.Store
	p   int32
	log *slog.Logger
	// every is the bytes (keys and values) between two bulk checkpoints.
	every int64
	load  *state.Loader // nil: incremental
	todo  chan pending
	free  chan []state.Change
	errc  chan error // the first error
	done  chan struct{}
	to    int64 // the last checkpoint written; read after done
	ok    bool  // whether to was set
}

type pending struct {
	changes []state.Change
	next    int64
}

// startWriter starts the writer of partition p; bulk selects a Loader,
// checkpointed every checkpointBytes.
func startWriter(st *state.Store, p int32, bulk bool, batchCap int, checkpointBytes int64, log *slog.Logger) (*writer, []state.Change) {
	w := &writer{
		st: st, p: p, log: log, every: checkpointBytes,
		todo: make(chan pending),
		free: make(chan []state.Change, 1),
		errc: make(chan error, 1),
		done: make(chan struct{}),
	}
	if bulk {
		w.load = st.NewLoader(p)
	}
	w.free <- make([]state.Change, 0, batchCap)
	go w.run()
	return w, make([]state.Change, 0, batchCap)
}

func (w *writer) run() {
	defer close(w.done)
	var err error
	var since int64 // bulk: bytes added since the last checkpoint
	last, unsaved := int64(0), false
	for pd := range w.todo {
		if err == nil {
			switch {
			case w.load == nil:
				if err = w.st.Apply(pd.changes, map[int32]int64{w.p: pd.next}); err == nil {
					w.to, w.ok = pd.next, true
				}
			default:
				if err = w.load.Add(pd.changes); err != nil {
					break
				}
				last, unsaved = pd.next, true
				for i := range pd.changes {
					since += int64(len(pd.changes[i].Key) + len(pd.changes[i].Value))
				}
				if since >= w.every {
					err = w.checkpoint(last)
					since, unsaved = 0, false
				}
			}
			if err != nil {
				w.errc <- err
			}
		}
		clear(pd.changes) // drop the record values
		w.free <- pd.changes[:0]
	}
	if w.load == nil {
		return
	}
	if err == nil && unsaved {
		err = w.checkpoint(last)
		if err != nil {
			w.errc <- err
		}
	}
	if cerr := w.load.Close(); cerr != nil {
		select {
		case w.errc <- cerr:
		default: // an earlier error is reported
		}
	}
}

func (w *writer) checkpoint(next int64) error {
	if err := w.load.Checkpoint(next); err != nil {
		return err
	}
	w.to, w.ok = next, true
	w.log.Debug("restore: bulk checkpoint", "offset", next)
	return nil
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

// close waits for the batch in flight (in bulk: for the last checkpoint
// too) and returns the checkpoint reached and the first error. Nothing is
// written to the store after it.
func (w *writer) close() (to int64, ok bool, err error) {
	close(w.todo)
	<-w.done
	var errs []error
	for {
		select {
		case e := <-w.errc:
			errs = append(errs, e)
			continue
		default:
		}
		break
	}
	return w.to, w.ok, errors.Join(errs...)
}
