// Package publish turns an accepted webhook delivery into Kafka records and
// produces them, answering only once Kafka acknowledged every one of them
// (acks=all, idempotent producer) or the deadline passed.
package publish

import (
	"context"
	"errors"
	"fmt"
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
	p        Producer
	deadline time.Duration
}

// New returns a Publisher that waits at most deadline for Kafka.
func New(p Producer, deadline time.Duration) *Publisher {
	return &Publisher{p: p, deadline: deadline}
}

// Publish produces every record and returns nil only when Kafka acknowledged
// all of them. It returns within the deadline even when a request is stuck in
// flight: it stops waiting, it does not stop the produce. The records carry
// ctx (the request's: a caller gone before they were sent drops them); the
// deadline is a timer of the call, not a context derived from ctx, which
// cost a child registered in the request context's children and removed
// again on every call (2.6 % of ingest's CPU under load). Costs one buffered
// channel and one timer per call; promises never block.
func (p *Publisher) Publish(ctx context.Context, recs []*kgo.Record) error {
	deadline := time.NewTimer(p.deadline)
	defer deadline.Stop()

	results := make(chan error, len(recs))
	for _, r := range recs {
		p.p.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				err = fmt.Errorf("produce %s: %w", r.Topic, err)
			}
			results <- err
		})
	}
	for range recs {
		select {
		case err := <-results:
			if err == nil {
				continue
			}
			// The client's RecordDeliveryTimeout is the same deadline.
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrRecordTimeout) {
				return fmt.Errorf("%w: %w", ErrDeadline, err)
			}
			return err
		case <-deadline.C:
			return ErrDeadline
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ErrDeadline
			}
			return ctx.Err()
		}
	}
	return nil
}
