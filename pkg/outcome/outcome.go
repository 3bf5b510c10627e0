// Package outcome is the record the processor writes on webhooks.outcomes
// for every record it ends (schemas/outcome.schema.json is the contract):
// its type, its statuses, its encoding (AppendJSON, json.Marshal's bytes
// without reflection) and its decoding (Decode), for the processor that
// writes it and for dlq and the test kits that read it.
package outcome

import "encoding/json"

// Outcome is the value of a record on webhooks.outcomes; its key is the
// idempotency key. Field names and JSON names are the schema's.
type Outcome struct {
	Key        string `json:"key"`
	Provider   string `json:"provider"`
	EventType  string `json:"event_type"`
	Status     string `json:"status"`
	Attempt    int    `json:"attempt"`
	Origin     string `json:"origin"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Time       string `json:"time"`
	Tier       string `json:"tier,omitempty"`
	DeadReason string `json:"dead_reason,omitempty"`
	ReplayID   string `json:"replay_id,omitempty"`
	Lane       string `json:"lane,omitempty"`
	// Route is the route (providers file) the outcome is for; absent on a
	// duplicate (decided for the key, not a route) and on outcomes
	// written before routes.
	Route string `json:"route,omitempty"`
	// ReplayOf is, on a suppressed outcome, the key of the delivery whose
	// signed bytes the suppressed one repeated.
	ReplayOf string `json:"replay_of,omitempty"`
	// Transform and TransformSHA256 name the route's transform (the
	// script's file as the providers file names it, and the hex SHA-256
	// of its content) on every outcome of a route that has one.
	Transform       string `json:"transform,omitempty"`
	TransformSHA256 string `json:"transform_sha256,omitempty"`
	// TransformSkipped says, on a done outcome, that the route's
	// transform skipped the event: nothing was called or written.
	TransformSkipped bool `json:"transform_skipped,omitempty"`
	// Partition and Offset are where the record was read (the schema
	// allows a record without them; Decode gives -1 then).
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Statuses (the schema's enum), spelled here once: decide's key statuses
// and dlq's trace states are these constants.
const (
	// StatusDone: handled.
	StatusDone = "done"
	// StatusDuplicate: skipped by the dedup table.
	StatusDuplicate = "duplicate"
	// StatusRetrying: waits in the retry tier named by Tier.
	StatusRetrying = "retrying"
	// StatusParked: waits in its destination's lane named by Lane.
	StatusParked = "parked"
	// StatusDead: sent to webhooks.dlq, for DeadReason.
	StatusDead = "dead"
	// StatusUnrouted: the event matched none of its provider's routes
	// (and the provider has no otherwise route); nothing was delivered,
	// and nothing is wrong.
	StatusUnrouted = "unrouted"
	// StatusHeld: an ordered provider's record waits behind its entity's
	// head on the route (Tier names the tier it waits in, Lane the lane;
	// Error names the head), with no attempt used.
	StatusHeld = "held"
	// StatusSuppressed: ingest took the delivery for a replay of the one
	// named by ReplayOf (the same signed bytes under another key, within
	// the provider's replay_window) and produced nothing for it; ingest,
	// not the processor, writes it (Suppressed).
	StatusSuppressed = "suppressed"
)

// Suppressed is the outcome ingest writes, as JSON, for a delivery it
// suppressed as a replay of the delivery keyed replayOf: status
// suppressed, origin ingest, attempt 1, no call made, and no partition
// or offset (there is no record of it on webhooks.raw). Cost: one
// json.Marshal.
func Suppressed(key, provider, eventType, replayOf, time string) []byte {
	b, _ := json.Marshal(struct { // strings and ints always marshal
		Key        string `json:"key"`
		Provider   string `json:"provider"`
		EventType  string `json:"event_type"`
		Status     string `json:"status"`
		Attempt    int    `json:"attempt"`
		Origin     string `json:"origin"`
		DurationMS int64  `json:"duration_ms"`
		Time       string `json:"time"`
		ReplayOf   string `json:"replay_of"`
	}{key, provider, eventType, StatusSuppressed, 1, "ingest", 0, time, replayOf})
	return b
}

// Decode reads an outcome record's value. Fields it lacks are empty, except
// Partition and Offset, which are -1 when absent, so that a reader matching
// positions never takes a record without them for one at offset 0. It does
// not validate against the schema (schemas.Validate does). Cost: one
// json.Unmarshal.
func Decode(b []byte) (Outcome, error) {
	o := Outcome{Partition: -1, Offset: -1}
	if err := json.Unmarshal(b, &o); err != nil {
		return Outcome{}, err
	}
	return o, nil
}
