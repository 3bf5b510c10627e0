package consume

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/state"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// The records a session works on, from read to commit: an item read and
// admitted, and the result it leaves for the next transaction. Lower than
// the session, its reader and its ownership, which all pass them around.

// item is a record read from a partition this session owns.
type item struct {
	r     *kgo.Record
	ow    *partition
	class providers.Priority
	// admitted says the record holds one of its class's admissions
	// (admission.Budget.Admit): it waits for a slot or calls its destination.
	admitted bool
	// trial is the lane whose trial call the record is (trial.go): only a
	// successful call of it commits; nil: an ordinary record.
	trial *lane
	// ended is how the trial ended (its call's answer).
	ended trialEnd
}

// result is what one record leaves for the next transaction.
type result struct {
	item
	// out are the records it writes, and what their produces answered
	// (package txnloop).
	out    txnloop.Produced
	change *state.Change // nil: a skip or a poison record
	seq    uint64        // the overlay entry change made
	// holdChange is the record's entity's new holds (ordering.go); nil:
	// unchanged. holdSeq is its overlay entry.
	holdChange *state.Change
	holdSeq    uint64
	tok        *recordToken // its share of session.tokens; nil: none
	stats      []stat       // one per outcome written
	// settled is closed once the result committed or was dropped; nil
	// for a result its chain does not wait for (ordering.go, barrier).
	settled *settled
	// span is the record's process span, ended at its commit; nil when
	// tracing is off (trace.go).
	span trace.Span
}

// stat is one outcome a result wrote, for the outcome metrics.
type stat struct{ provider, route, status, origin, eventType string }
