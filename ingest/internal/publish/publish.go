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

// Meta is what ingest knows about the request besides the events.
type Meta struct {
	Provider    string
	ReceivedAt  time.Time
	RequestID   string
	ContentType string
	// HTTP are the provider's allowlisted request headers.
	HTTP []providers.Header
}

// Records builds one record per event for topic: key = idempotency key,
// value = the event's exact bytes, and the header contract of DESIGN §3 for
// origin=ingest, attempt 1.
func Records(topic string, m Meta, events []providers.Event) []*kgo.Record {
	recs := make([]*kgo.Record, len(events))
	receivedAt := []byte(headers.FormatTime(m.ReceivedAt))
	for i, e := range events {
		hs := make([]kgo.RecordHeader, 0, 8+len(m.HTTP))
		hs = append(hs,
			kgo.RecordHeader{Key: headers.Provider, Value: []byte(m.Provider)},
			kgo.RecordHeader{Key: headers.EventType, Value: []byte(e.Type)},
			kgo.RecordHeader{Key: headers.IdempotencyKey, Value: []byte(e.Key)},
			kgo.RecordHeader{Key: headers.ReceivedAt, Value: receivedAt},
			kgo.RecordHeader{Key: headers.RequestID, Value: []byte(m.RequestID)},
			kgo.RecordHeader{Key: headers.ContentType, Value: []byte(m.ContentType)},
			kgo.RecordHeader{Key: headers.Origin, Value: []byte(headers.OriginIngest)},
			kgo.RecordHeader{Key: headers.Attempt, Value: []byte("1")},
		)
		for _, h := range m.HTTP {
			hs = append(hs, kgo.RecordHeader{Key: headers.HTTPName(h.Name), Value: []byte(h.Value)})
		}
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(e.Key), Value: e.Body, Headers: hs}
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
// flight: it stops waiting, it does not stop the produce. Costs one buffered
// channel per call; promises never block.
func (p *Publisher) Publish(ctx context.Context, recs []*kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, p.deadline)
	defer cancel()

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
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%w: %w", ErrDeadline, err)
			}
			return err
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ErrDeadline
			}
			return ctx.Err()
		}
	}
	return nil
}
