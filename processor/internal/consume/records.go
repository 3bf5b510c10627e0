package consume

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/decide"
)

// arrival reads the decision-table view of a record from its headers. A
// record hookline cannot deduplicate (no key, unknown origin, bad attempt)
// is an error: it goes to the DLQ as permanent without touching any state.
func arrival(r *kgo.Record, now time.Time) (decide.Arrival, error) {
	if len(r.Key) == 0 {
		return decide.Arrival{}, errors.New("record has no key (the idempotency key)")
	}
	a := decide.Arrival{
		Origin:   headers.Value(r, headers.Origin),
		ReplayID: headers.Value(r, headers.ReplayID),
		Provider: headers.Value(r, headers.Provider),
		Now:      now,
	}
	switch a.Origin {
	case headers.OriginIngest, headers.OriginRetry, headers.OriginReplay:
	case headers.OriginBackfill:
		switch mode := headers.Value(r, headers.Backfill); mode {
		case headers.BackfillMissing, headers.BackfillAgain:
			a.Again = mode == headers.BackfillAgain
		default:
			return decide.Arrival{}, fmt.Errorf("%s is %q, want %s or %s", headers.Backfill, mode, headers.BackfillMissing, headers.BackfillAgain)
		}
		if headers.Value(r, headers.Route) == "" {
			return decide.Arrival{}, fmt.Errorf("a backfill record has no %s: it is for one route", headers.Route)
		}
	default:
		return decide.Arrival{}, fmt.Errorf("%s is %q, want ingest, retry, replay or backfill", headers.Origin, a.Origin)
	}
	n, err := headers.GetAttempt(r)
	if err != nil {
		return decide.Arrival{}, err
	}
	a.Attempt = n
	if a.Provider == "" {
		return decide.Arrival{}, fmt.Errorf("%s is missing", headers.Provider)
	}
	for _, h := range []string{headers.FirstSeenAt, headers.ReceivedAt} {
		if t, err := headers.GetTime(r, h); err == nil {
			a.FirstSeenAt = t
			break
		}
	}
	return a, nil
}

// outcomeOf is what every outcome of one record's settle shares: its key,
// provider, event type, attempt, origin, time, replay id, offset and, when
// ctx's trace is sampled, its trace id. Built once per record: a record
// with three routes has three outcomes, and the key's copy, the event
// type's lookup and the time's formatting were each made three times.
func (p *setup) outcomeOf(ctx context.Context, r *kgo.Record, a decide.Arrival) outcome.Outcome {
	o := outcome.Outcome{
		Key:       string(r.Key),
		Provider:  a.Provider,
		EventType: headers.CutEventType(headers.Value(r, headers.EventType)), // a record from before ingest checked it may hold any
		Attempt:   max(a.Attempt, 1),
		Origin:    a.Origin,
		Time:      headers.FormatTime(a.Now),
		ReplayID:  a.ReplayID,
		Partition: r.Partition,
		Offset:    r.Offset,
	}
	if p.cfg.Tracer.On() {
		o.TraceID = tracing.TraceID(ctx)
	}
	if r.Topic != p.cfg.Names.Raw {
		o.Lane = r.Topic // read from its lane
	}
	return o
}

// outcomeRecord builds the outcome of one effect of a record's settle from
// what its outcomes share (outcomeOf).
func (p *setup) outcomeRecord(shared outcome.Outcome, r *kgo.Record, a decide.Arrival, status string, took time.Duration, err error, e decide.Effect) *kgo.Record {
	o := shared
	o.Status = status
	o.DurationMS = took.Milliseconds()
	o.Route = e.Route
	if err != nil {
		o.Error = headers.CutError(err.Error())
	}
	if t := p.target(a.Provider, e.Route); t != nil && t.transform != nil {
		o.Transform, o.TransformSHA256, o.TransformSkipped = t.transform.Path, t.transform.SHA256, e.Skipped
	}
	switch status {
	case outcome.StatusParked:
		if t := p.target(a.Provider, e.Route); t != nil && t.lane != nil {
			o.Lane = t.lane.topic
		}
	case outcome.StatusRetrying, outcome.StatusHeld:
		o.Tier = retry.TierName(p.cfg.Schedule.Tier(e.Tier))
	case outcome.StatusDead:
		o.DeadReason = e.DeadReason
	}
	v := o.AppendJSON(make([]byte, 0, 256)) // json.Marshal's bytes, without reflection
	return &kgo.Record{Topic: p.cfg.Names.Outcomes, Key: r.Key, Value: v}
}

// setRoute names the route a copy of a record is for (hookline.route).
func setRoute(r *kgo.Record, route string) {
	if route != "" {
		headers.Set(r, headers.Route, route)
	}
}

// routedCopy is the exact record (key, body, headers) for topic, naming
// its route and without a held sequence (setHeld 0): one pass over the
// headers, as setRoute and setHeld would make two more.
func routedCopy(topic string, r *kgo.Record, route string) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: make([]kgo.RecordHeader, 0, len(r.Headers)+1)}
	for _, h := range r.Headers {
		if h.Key != headers.Held && (route == "" || h.Key != headers.Route) {
			out.Headers = append(out.Headers, h)
		}
	}
	if route != "" {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: headers.Route, Value: []byte(route)})
	}
	return out
}

// failedRecord copies r for a retry tier or the DLQ: the exact body, every
// original header, plus the failure headers of DESIGN §3.
func (p *setup) failedRecord(topic string, r *kgo.Record, a decide.Arrival, st decide.State, attempt int, err error, retryable bool) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
	if err != nil { // nil: a record held behind its entity's head, no attempt made
		history, herr := headers.GetErrors(r)
		if herr != nil {
			history = nil // a garbled history is replaced, not propagated
		}
		history = append(history, headers.ErrorEntry{Attempt: max(a.Attempt, 1), At: a.Now, Error: err.Error(), Retryable: retryable})
		headers.SetErrors(out, history)
	}
	headers.SetAttempt(out, attempt)
	if !st.FirstSeenAt.IsZero() {
		headers.SetTime(out, headers.FirstSeenAt, st.FirstSeenAt)
	} else {
		headers.SetTime(out, headers.FirstSeenAt, a.FirstSeenAt)
	}
	headers.Set(out, headers.SourceTopic, r.Topic)
	headers.Set(out, headers.SourcePartition, strconv.Itoa(int(r.Partition)))
	headers.Set(out, headers.SourceOffset, strconv.FormatInt(r.Offset, 10))
	return out
}

// poisonRecord sends a record hookline cannot deduplicate to the DLQ as
// permanent, keeping its bytes for an operator.
func (p *setup) poisonRecord(r *kgo.Record, now time.Time, err error) *kgo.Record {
	a := decide.Arrival{Attempt: 1, Now: now}
	if n, aerr := headers.GetAttempt(r); aerr == nil {
		a.Attempt = n
	}
	out := p.failedRecord(p.cfg.Names.DLQ, r, a, decide.State{FirstSeenAt: now}, a.Attempt, fmt.Errorf("malformed record: %w", err), false)
	headers.Set(out, headers.DeadReason, headers.DeadPermanent)
	return out
}
