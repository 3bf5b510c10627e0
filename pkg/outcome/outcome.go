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
)

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
