// Package headers is the record-header contract of DESIGN §3: every header
// name hookline writes or reads, spelled once, with typed getters and setters
// over franz-go records.
//
// Values travel as UTF-8 text so any Kafka tool (kcat, the console consumer)
// can read them. Getters scan the header slice linearly: records carry about a
// dozen headers, so a map would cost more than it saves.
package headers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names (DESIGN §3, contract).
const (
	Provider       = "hookline.provider"
	EventType      = "hookline.event-type"
	IdempotencyKey = "hookline.idempotency-key"
	ReceivedAt     = "hookline.received-at"
	RequestID      = "hookline.request-id"
	ContentType    = "hookline.content-type"
	Origin         = "hookline.origin"
	Attempt        = "hookline.attempt"
	Errors         = "hookline.errors"
	FirstSeenAt    = "hookline.first-seen-at"
	ReplayID       = "hookline.replay-id"
	DueAt          = "hookline.due-at"
	// RetryAfter is, on a retry-tier record, the date the destination's
	// Retry-After named (429 or 503; capped by HOOKLINE_RETRY_AFTER_MAX),
	// in the hookline.due-at format: hookline.due-at is not earlier
	// unless the route's retry tiers are all shorter. Absent when the
	// last failure asked for no wait.
	RetryAfter      = "hookline.retry-after"
	DeadReason      = "hookline.dead-reason"
	SourceTopic     = "hookline.source.topic"
	SourcePartition = "hookline.source.partition"
	SourceOffset    = "hookline.source.offset"
	// Route names the route (providers file) a retry-tier, DLQ or lane
	// record is for; absent on raw records (every matching route) and on
	// records written before routes, which mean the route "default".
	Route = "hookline.route"
	// Entity is the entity an ordered provider's record belongs to
	// (providers file ordering:): the records of one entity are placed in
	// one partition (topics.Partitioner) and called in order on each
	// route. Absent: the record is its own entity, placed by its key.
	Entity = "hookline.entity"
	// Held marks a retry-tier or lane copy of an ordered entity's record
	// sent behind the entity's head on its route (no attempt used): it is
	// delivered once the head has ended and the copies before it have.
	Held = "hookline.held"
	// Backfill is a backfill's mode on its records (origin backfill):
	// BackfillMissing or BackfillAgain.
	Backfill = "hookline.backfill"
	// InvalidPayload marks a record whose body failed its provider's
	// schema (providers file schema:, on_invalid: dlq): the processor
	// checks it, dead-letters it as DeadInvalidPayload without a call and
	// sets this on the DLQ copy. A fresh record may carry it from an
	// ingest of an earlier version, which checked such bodies itself; the
	// processor keeps that verdict. Its value is a short reason (at most
	// MaxInvalidPayloadBytes): the schema file and the first violations.
	// Absent on a valid record.
	InvalidPayload = "hookline.invalid-payload"
	// Traceparent and Tracestate are the W3C Trace Context of the span
	// that wrote the record (package tracing), present only when tracing
	// is on: ingest's request span on a raw record, the processor's span
	// of the attempt on a retry-tier, lane or DLQ copy, the retrier's on
	// a record it moved. The next reader continues that trace.
	Traceparent = "traceparent"
	Tracestate  = "tracestate"

	// DefaultRoute is the route a record without hookline.route is for,
	// and the one route of a provider with a provider-level destination.
	DefaultRoute = "default"

	// HTTPPrefix is put before the lower-case name of every provider header
	// that is copied from the request (signature, delivery id, timestamp).
	HTTPPrefix = "http."
)

// Values of the hookline.origin header.
const (
	OriginIngest = "ingest"
	OriginRetry  = "retry"
	OriginReplay = "replay"
	// OriginBackfill is a record of webhooks.raw sent again to one route by
	// dlq backfill; its hookline.replay-id is backfill:<id>.
	OriginBackfill = "backfill"
)

// Values of the hookline.backfill header.
const (
	// BackfillMissing delivers to routes that have no live state for the
	// key (the route was added since, or the state expired).
	BackfillMissing = "missing"
	// BackfillAgain also delivers to routes that are done with the key,
	// once per backfill id.
	BackfillAgain = "again"
)

// Values of the hookline.dead-reason header.
const (
	DeadExhausted = "exhausted"
	DeadPermanent = "permanent"
	// DeadInvalidPayload: the body failed its provider's schema
	// (hookline.invalid-payload); the destination was never called.
	DeadInvalidPayload = "invalid_payload"
	// DeadTransformFailed: the route's transform (providers file
	// transform:) threw, passed its time or memory bound, or returned
	// what is not a request; the destination was never called. The
	// record's error history has the script's error.
	DeadTransformFailed = "transform_failed"
)

// IsDeadReason reports whether s is a value of hookline.dead-reason
// (permanent, exhausted, invalid_payload or transform_failed), for the
// tools that filter by them.
func IsDeadReason(s string) bool {
	switch s {
	case DeadPermanent, DeadExhausted, DeadInvalidPayload, DeadTransformFailed:
		return true
	}
	return false
}

// MaxInvalidPayloadBytes bounds the value of hookline.invalid-payload.
const MaxInvalidPayloadBytes = 256

// SetInvalidPayload marks r invalid with reason, cut to
// MaxInvalidPayloadBytes on a rune boundary (valid UTF-8; never empty).
func SetInvalidPayload(r *kgo.Record, reason string) {
	reason = truncate(reason, MaxInvalidPayloadBytes)
	if reason == "" {
		reason = "invalid"
	}
	Set(r, InvalidPayload, reason)
}

// TimeLayout is RFC 3339 in UTC with milliseconds, the layout of every time
// header (received-at, first-seen-at, due-at).
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime renders t in TimeLayout, in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime reads a time header written by FormatTime (or any RFC 3339 time).
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// ErrMissing is returned by the typed getters when a header is absent.
var ErrMissing = errors.New("header missing")

// missingError is ErrMissing for one header, "<name>: header missing",
// built without fmt: a record without an optional header is common (every
// ingest record lacks first-seen-at), and fmt.Errorf cost the processor
// about a tenth of its CPU per record.
type missingError string

func (e missingError) Error() string { return string(e) + ": " + ErrMissing.Error() }
func (e missingError) Unwrap() error { return ErrMissing }

// Get returns the value of the first header named name and whether it was
// present.
func Get(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// Value returns the header's value, or "" when it is absent.
func Value(r *kgo.Record, name string) string {
	v, _ := Get(r, name)
	return v
}

// Set replaces every header named name with one holding value, or appends it.
func Set(r *kgo.Record, name, value string) {
	out := r.Headers[:0]
	for _, h := range r.Headers {
		if h.Key != name {
			out = append(out, h)
		}
	}
	r.Headers = append(out, kgo.RecordHeader{Key: name, Value: []byte(value)})
}

// TraceID is the trace id of r's traceparent header (W3C Trace Context:
// version-traceid-spanid-flags), "" when it has none or it is malformed.
func TraceID(r *kgo.Record) string {
	tp := Value(r, Traceparent)
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	id := tp[3:35]
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	if id == "00000000000000000000000000000000" {
		return ""
	}
	return id
}

// Delete removes every header named name.
func Delete(r *kgo.Record, name string) {
	out := r.Headers[:0]
	for _, h := range r.Headers {
		if h.Key != name {
			out = append(out, h)
		}
	}
	r.Headers = out
}

// GetAttempt returns the 1-based attempt number of the record.
func GetAttempt(r *kgo.Record) (int, error) {
	v, ok := Get(r, Attempt)
	if !ok {
		return 0, missingError(Attempt)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: %q is not a positive integer", Attempt, v)
	}
	return n, nil
}

// SetAttempt sets the attempt header.
func SetAttempt(r *kgo.Record, n int) { Set(r, Attempt, strconv.Itoa(n)) }

// GetTime parses a time header (received-at, first-seen-at, due-at).
func GetTime(r *kgo.Record, name string) (time.Time, error) {
	v, ok := Get(r, name)
	if !ok {
		return time.Time{}, missingError(name)
	}
	t, err := ParseTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// SetTime sets a time header in TimeLayout.
func SetTime(r *kgo.Record, name string, t time.Time) { Set(r, name, FormatTime(t)) }

// HTTPName returns the record-header name for a provider header: "http."
// followed by the lower-case header name.
func HTTPName(name string) string { return HTTPPrefix + strings.ToLower(name) }

// HTTP returns the provider headers copied from the request, with their
// original lower-case names (without the "http." prefix), in record order.
func HTTP(r *kgo.Record) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, h := range r.Headers {
		if name, ok := strings.CutPrefix(h.Key, HTTPPrefix); ok {
			out = append(out, kgo.RecordHeader{Key: name, Value: h.Value})
		}
	}
	return out
}

// IngestMeta is what ingest knows about a request besides its events.
type IngestMeta struct {
	Provider    string
	ReceivedAt  time.Time
	RequestID   string
	ContentType string
	// HTTP are the provider's allowlisted request headers, lower-case names
	// without the "http." prefix.
	HTTP []kgo.RecordHeader
	// Forwarded are more of them, named as on the record already ("http."
	// and the lower-case name, HTTPName), after HTTP's; their values are
	// copied into the record's one buffer. Ingest's request path gives
	// them so (providers.Provider.AppendForwarded): no name made and no
	// value copied on its own a request.
	Forwarded []Forwarded
}

// Forwarded is a request header for the record: Key its record-header
// name (HTTPName), Value its value.
type Forwarded struct {
	Key, Value string
}

// IngestRecord builds the record ingest produces for one event: key = the
// idempotency key, value = the event's exact bytes, and the headers of DESIGN
// §3 for origin=ingest, attempt 1. Load tools and tests use it to write what
// ingest writes.
func IngestRecord(topic, key, eventType string, body []byte, m IngestMeta) *kgo.Record {
	// Built for ingest's request path: the record and its headers are one
	// allocation (ingestHeaders inline, room for the entity header and a few
	// forwarded ones), and the key and every header value share one buffer,
	// each value capped at its length so that no append reaches the next.
	// The same record as one built field by field.
	ir := &ingestRecord{}
	hs := ir.hs[:0]
	if n := ingestHeaders + len(m.HTTP) + len(m.Forwarded); n > len(ir.hs) {
		hs = make([]kgo.RecordHeader, 0, n+1)
	}
	size := len(key) + len(m.Provider) + len(eventType) + len(TimeLayout) + len(m.RequestID) + len(m.ContentType) + len(OriginIngest) + 1
	for _, f := range m.Forwarded {
		size += len(f.Value)
	}
	buf := make([]byte, 0, size)
	take := func(s string) []byte {
		at := len(buf)
		buf = append(buf, s...)
		return buf[at:len(buf):len(buf)]
	}
	k := take(key)
	hs = append(hs,
		kgo.RecordHeader{Key: Provider, Value: take(m.Provider)},
		kgo.RecordHeader{Key: EventType, Value: take(eventType)},
		kgo.RecordHeader{Key: IdempotencyKey, Value: k},
	)
	at := len(buf)
	buf = m.ReceivedAt.UTC().AppendFormat(buf, TimeLayout)
	hs = append(hs,
		kgo.RecordHeader{Key: ReceivedAt, Value: buf[at:len(buf):len(buf)]},
		kgo.RecordHeader{Key: RequestID, Value: take(m.RequestID)},
		kgo.RecordHeader{Key: ContentType, Value: take(m.ContentType)},
		kgo.RecordHeader{Key: Origin, Value: take(OriginIngest)},
		kgo.RecordHeader{Key: Attempt, Value: take("1")},
	)
	for _, h := range m.HTTP {
		hs = append(hs, kgo.RecordHeader{Key: HTTPName(h.Key), Value: h.Value})
	}
	for _, f := range m.Forwarded {
		hs = append(hs, kgo.RecordHeader{Key: f.Key, Value: take(f.Value)})
	}
	ir.r = kgo.Record{Topic: topic, Key: k, Value: body, Headers: hs}
	return &ir.r
}

// ingestHeaders is how many headers IngestRecord sets besides the
// forwarded ones.
const ingestHeaders = 8

// ingestRecord is a record with room for its headers.
type ingestRecord struct {
	r  kgo.Record
	hs [ingestHeaders + 4]kgo.RecordHeader
}
