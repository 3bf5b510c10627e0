// Package replay puts dead letters back on webhooks.raw (DESIGN §8): Record
// builds the replay of one DLQ record (pure), Replayer produces a set of
// them at a bounded rate and marks each one `replayed` on
// webhooks.dlq-status once the broker acknowledged it, and Outcomes waits
// for what the processor decided about them.
//
// A replay is deduplicated by the processor, not here: its state for the key
// remembers the replay ids it processed (DESIGN §6), so sending the same
// replay twice processes it once, and a replay of a key that has been done
// since is a duplicate.
package replay

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/headers"
)

// MaxHistory bounds the hookline.errors history a replay carries: the newest
// entries are kept. Each replay that fails again adds one, so without a bound
// an entry replayed over and over would grow its headers without end (each
// entry is at most headers.MaxErrorBytes).
const MaxHistory = 32

// dropped are the DLQ-only headers a replay does not carry: the DLQ's
// verdict, a stale retry deadline and where the failing record was read.
// The processor writes fresh ones if the replay fails again.
var dropped = []string{
	headers.DeadReason,
	// Ingest's verdict on the body: the processor checks a replay against
	// its own schema, so a replay after the schema was fixed is delivered.
	headers.InvalidPayload,
	headers.DueAt,
	headers.SourceTopic,
	headers.SourcePartition,
	headers.SourceOffset,
}

// Record builds the webhooks.raw record (topic) that replays e, whose body
// must be loaded: the exact key and body; hookline.origin=replay,
// hookline.attempt=1, hookline.replay-id=dlq:<partition>:<offset>; every
// other header of the DLQ record kept in its order, except the DLQ-only ones
// (dead-reason, due-at, source.*) and invalid-payload (the processor checks
// a replay's body itself). The error history and first-seen-at are
// kept: a replay that fails again reaches the DLQ with its whole story, and
// the key keeps the time ingest first accepted it. hookline.route is kept
// too, so the processor delivers the replay to the entry's route only (an
// entry without it, written before routes, replays to the route default,
// which is what a record without it means).
func Record(topic string, e *store.Entry) (*kgo.Record, error) {
	src := e.Record
	if len(src.Key) == 0 {
		return nil, errors.New("the DLQ record has no key (idempotency key), so a replay could not be deduplicated")
	}
	if src.Value == nil && e.BodyBytes > 0 {
		return nil, errors.New("body not loaded")
	}
	out := &kgo.Record{Topic: topic, Key: slices.Clone(src.Key), Value: src.Value}
	for _, h := range src.Headers {
		if !slices.Contains(dropped, h.Key) {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
		}
	}
	if es, err := headers.GetErrors(out); err != nil {
		headers.Delete(out, headers.Errors) // garbled: the processor would replace it anyway
	} else if len(es) > MaxHistory {
		headers.SetErrors(out, es[len(es)-MaxHistory:])
	}
	headers.Set(out, headers.Origin, headers.OriginReplay)
	headers.SetAttempt(out, 1)
	headers.Set(out, headers.ReplayID, e.Ref.ReplayID())
	return out, nil
}
