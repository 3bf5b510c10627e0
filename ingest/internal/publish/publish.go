// Package publish turns an accepted webhook delivery into Kafka records and
// produces them, answering only once Kafka acknowledged every one of them
// (acks=all, idempotent producer) or the deadline passed.
package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
)

// Records builds one record per event for topic (headers.IngestRecord),
// with hookline.entity for an event of an ordered provider that has one.
func Records(topic string, m headers.IngestMeta, events []providers.Event) []*kgo.Record {
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = headers.IngestRecord(topic, e.Key, e.Type, e.Body, m)
		if e.Entity != "" {
			headers.Set(recs[i], headers.Entity, e.Entity)
		}
	}
	return recs
}

// Producer is the part of *kgo.Client the publisher uses.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

var _ Producer = (*kgo.Client)(nil)

// ErrDeadline is returned when Kafka did not acknowledge within the deadline.
// The records may still land later; the provider's retry is then absorbed by
// dedup.
var ErrDeadline = errors.New("kafka did not acknowledge in time")

// Publisher produces records and waits for their acknowledgement.
type Publisher struct {
	p         Producer
	deadline  time.Duration
	deadlines deadlines
	waiters   sync.Pool // of *waiter
}

// New returns a Publisher that waits at most deadline for Kafka.
func New(p Producer, deadline time.Duration) *Publisher {
	pub := &Publisher{p: p, deadline: deadline, deadlines: deadlines{step: stepOf(deadline)}}
	pub.waiters.New = func() any { return newWaiter(1) }
	return pub
}

// Publish produces every record and returns nil only when Kafka acknowledged
// all of them. It returns within the deadline even when a request is stuck in
// flight: it stops waiting, it does not stop the produce. The records carry
// ctx (the request's: a caller gone before they were sent drops them).
//
// The deadline is not a timer of the call (a timer per request, and its
// entry in the runtime's timer heap on every wait, was about a microsecond
// of ingest's CPU a request under load) nor a context derived from ctx (a
// child registered in the request context's children on every call, 2.6 %
// of ingest's CPU): the calls share one channel per coarse instant
// (deadlines), closed at the last multiple of deadline/64 before the
// call's own deadline, so a call waits between 63/64 of the deadline and
// the deadline. The channel and the promise a call waits with are reused
// once every promise of the call has answered. Costs nothing a call on
// that path; promises never block.
func (p *Publisher) Publish(ctx context.Context, recs []*kgo.Record) error {
	timeout := p.deadlines.by(time.Now().Add(p.deadline))
	w := p.waiters.Get().(*waiter)
	if cap(w.results) < len(recs) {
		p.waiters.Put(w)
		w = newWaiter(len(recs))
	}
	for _, r := range recs {
		p.p.Produce(ctx, r, w.promise)
	}
	for range recs {
		select {
		case err := <-w.results:
			if err == nil {
				continue
			}
			// Promises may still answer: w is not reused.
			// The client's RecordDeliveryTimeout is the same deadline.
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrRecordTimeout) {
				return fmt.Errorf("%w: %w", ErrDeadline, err)
			}
			return err
		case <-timeout:
			return ErrDeadline
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ErrDeadline
			}
			return ctx.Err()
		}
	}
	// Every promise answered: nothing sends on w again.
	p.waiters.Put(w)
	return nil
}

// waiter is what a call waits with: a channel with room for every
// record's answer, and the promise that answers on it, made once.
type waiter struct {
	results chan error
	promise func(*kgo.Record, error)
}

func newWaiter(n int) *waiter {
	w := &waiter{results: make(chan error, n)}
	w.promise = func(r *kgo.Record, err error) {
		if err != nil {
			err = &produceError{topic: r.Topic, err: err}
		}
		w.results <- err
	}
	return w
}

// produceError is a promise's error, naming its record's topic.
type produceError struct {
	topic string
	err   error
}

func (e *produceError) Error() string { return "produce " + e.topic + ": " + e.err.Error() }

func (e *produceError) Unwrap() error { return e.err }

// stepOf is the coarseness of the deadlines of calls that wait at most d:
// a 64th of it, at least a millisecond.
func stepOf(d time.Duration) time.Duration {
	return max(d/64, time.Millisecond)
}

// deadlines hands out channels closed at coarse instants, the multiples of
// step: every call waiting for the same instant shares its channel and its
// one timer. Nothing runs while nobody waits: an instant's timer is made by
// the first call that needs it, and the instant forgotten once it passed.
type deadlines struct {
	step time.Duration
	mu   sync.Mutex
	at   map[int64]chan struct{} // by instant, in steps since the epoch
}

// by returns a channel that is closed at the last multiple of step at or
// before t: never after t, less than step before it.
func (d *deadlines) by(t time.Time) <-chan struct{} {
	k := t.UnixNano() / int64(d.step)
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch, ok := d.at[k]; ok {
		return ch
	}
	if d.at == nil {
		d.at = map[int64]chan struct{}{}
	}
	ch := make(chan struct{})
	d.at[k] = ch
	// An instant already past (a deadline under a step away) fires now.
	time.AfterFunc(time.Until(time.Unix(0, k*int64(d.step))), func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		close(ch)
		if d.at[k] == ch {
			delete(d.at, k)
		}
	})
	return ch
}
