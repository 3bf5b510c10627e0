// Package decide is the processor's decisions as pure functions: the
// dedup decision table (DESIGN §6) and the plan and settle around a
// record's calls. Admit says whether an arriving record is processed or
// skipped given its key's state; MakePlan says, per route, what to do with
// a processed record (call, write, hold, park, dead-letter, retry); Settle
// turns the plan and what became of each route (a Result: called with its
// answer, or not called and why) into the key's next state, the entity's
// holds and the records to write (changelog, retry tier, DLQ, lane,
// outcome, route topic), by Step's table per route.
// Encode and Decode are the changelog value's JSON form
// (schemas/state.schema.json).
//
// Nothing here does I/O or reads a clock: the caller passes the time in
// Arrival.Now, so every cell of the table is a unit test.
package decide

import (
	"slices"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/retry"
)

// Status is the dedup status of an idempotency key.
type Status string

// Statuses of a key. They are also the outcome record's status for a
// processed record (a skipped one is outcome.StatusDuplicate): the words
// are pkg/outcome's, spelled there once.
const (
	StatusDone     Status = outcome.StatusDone
	StatusRetrying Status = outcome.StatusRetrying
	StatusDead     Status = outcome.StatusDead
	// StatusParked: the key's record waits in its destination's lane topic
	// (the destination had no room, its breaker was open, or it is paused);
	// NextAttempt is that record's attempt.
	StatusParked Status = outcome.StatusParked
	// StatusUnrouted is an outcome's status only, never a key's: the
	// event matched none of its provider's routes (StepRoutes).
	StatusUnrouted Status = outcome.StatusUnrouted
	// StatusHeld is an outcome's status only: the record of an ordered
	// provider's entity waits behind the entity's head on the route
	// (holds.go); the key is retrying or parked with its attempt unused.
	StatusHeld Status = outcome.StatusHeld
)

// MaxReplayIDs bounds State.ReplayIDs: the oldest ids are dropped beyond it.
const MaxReplayIDs = 32

// DefaultTTL is the dedup TTL when a provider sets none (DESIGN §6).
const DefaultTTL = 7 * 24 * time.Hour

// State is what the processor remembers about one idempotency key. Step
// returns states with times in UTC truncated to the millisecond, so they
// survive Encode and Decode unchanged. Treat a State as a value: its
// ReplayIDs slice may be shared with the state it was derived from.
type State struct {
	Status Status
	// NextAttempt is, while retrying, the attempt expected next; 0 otherwise.
	NextAttempt int
	Provider    string
	// FirstSeenAt is when ingest first accepted this key (hookline.received-at
	// of attempt 1).
	FirstSeenAt time.Time
	UpdatedAt   time.Time
	// ExpiresAt is UpdatedAt + the provider's dedup TTL (longer while a retry
	// is parked, see Step). From then on the state is as good as none. A zero
	// ExpiresAt never expires.
	ExpiresAt time.Time
	// ReplayIDs are the replay ids already processed for this key, oldest
	// first, at most MaxReplayIDs.
	ReplayIDs []string
	// Routes are the key's routes' states when it has any route but the
	// route default (routes.go); nil: Status, NextAttempt, ExpiresAt and
	// ReplayIDs are the route default's.
	Routes []RouteState
}

// Expired reports whether the state is as good as none at now.
func (s State) Expired(now time.Time) bool {
	return !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt)
}

// Arrival is a record as the decision table sees it, read from its headers.
type Arrival struct {
	// Origin is hookline.origin: headers.OriginIngest, OriginRetry,
	// OriginReplay or OriginBackfill.
	Origin string
	// Attempt is hookline.attempt (1-based). A replay carries 1: attempts
	// start again at 1.
	Attempt int
	// ReplayID is hookline.replay-id, set on replays (dlq:<ref>) and
	// backfills (backfill:<id>) only.
	ReplayID string
	// Again is set on a backfill record in mode again (hookline.backfill):
	// it is delivered to a route done with the key, once per ReplayID.
	Again bool
	// Provider is hookline.provider.
	Provider string
	// FirstSeenAt is hookline.first-seen-at on a retry, hookline.received-at
	// on an ingest record; it seeds State.FirstSeenAt for a key with no live
	// state. Zero means Now.
	FirstSeenAt time.Time
	// Now is the decision time.
	Now time.Time
	// FromLane is set for a record read from a destination's lane topic: the
	// parked copy of a record Admit let through before.
	FromLane bool
	// Route is the route the record is for: hookline.route, the lane's
	// route, "" (headers.DefaultRoute) for a retry or replay written
	// before routes. A fresh ingest record is for every route its event
	// matches: Admit decides it for the key, and Step takes the route of
	// each delivery.
	Route string
}

// Reasons Admit gives, for logs and metric labels.
const (
	// Processed.
	WhyNew         = "new"          // no state for the key
	WhyExpired     = "expired"      // the state outlived its TTL
	WhyNextAttempt = "next_attempt" // retry carrying the attempt the state expects
	WhyReplay      = "replay"       // first replay of this id on a dead key
	WhyUnparked    = "unparked"     // the parked copy of the key's record, read from its lane
	WhyAgain       = "again"        // first backfill of this id, in mode again, on a done key

	// Skipped; the outcome record says "duplicate".
	WhyDuplicate       = "duplicate"         // ingest of a key already known
	WhyStaleAttempt    = "stale_attempt"     // retry whose attempt is not the expected one
	WhyAlreadyDone     = "already_done"      // retry or replay of a done key
	WhyAlreadyDead     = "already_dead"      // retry or backfill of a dead key (a replay of its DLQ entry delivers it)
	WhyRetryPending    = "retry_pending"     // replay or backfill of a key that is still retrying
	WhyReplaySeen      = "replay_seen"       // replay or backfill id already processed for this key
	WhyReplayWithoutID = "replay_without_id" // replay of a dead key with no replay id: it could not be deduplicated
	WhyUnknownOrigin   = "unknown_origin"    // origin is none of ingest, retry, replay, backfill
	WhyParkedPending   = "parked_pending"    // any record of a key whose record waits in a lane, but that parked copy
	WhyUnknownStatus   = "unknown_status"    // the state's status is none of done, retrying, parked, dead
	WhyMovedTaken      = "moved_taken"       // record of a route default moved to routes, each of which has the key already (MakePlan)
)

// Admit applies the decision table of DESIGN §6 to a record arriving for a
// key whose state is st (nil: none). It returns whether to process the record
// and a short machine-friendly reason (the Why constants).
//
//	state \ origin      ingest      retry (attempt n)          replay                       backfill
//	none or expired     process     process                    process                      process
//	retrying, expects n skip        process if n matches       skip                         skip
//	done                skip        skip                       skip                         mode again: once per id
//	dead                skip        skip                       process once per replay id   skip
//	parked              skip        skip                       skip                         skip
//
// except that the parked copy itself (Arrival.FromLane, read from the
// destination's lane topic) is processed when the key is parked: it is the
// record the state waits for. A fresh ingest record is decided by the key's
// state (its summary over routes: a live key is a duplicate, or
// parked_pending); a retry, a replay, a backfill or a lane copy by the state of its
// route (Arrival.Route), none when the key has no state for that route. A lane record of a key no longer parked (read
// again after a crash, the state already moved on) is skipped like any
// other. A record whose origin is unknown is never processed, whatever the state:
// the consumer should reject malformed headers before it gets here.
func Admit(st *State, a Arrival) (process bool, why string) {
	switch a.Origin {
	case headers.OriginIngest, headers.OriginRetry, headers.OriginReplay, headers.OriginBackfill:
	default:
		return false, WhyUnknownOrigin
	}
	if a.FromLane || a.Origin != headers.OriginIngest {
		st = st.view(a.Route)
	}
	switch {
	case a.FromLane && st != nil && st.Status == StatusParked && !st.Expired(a.Now):
		if attemptOf(a) != st.NextAttempt {
			return false, WhyStaleAttempt
		}
		return true, WhyUnparked
	case a.FromLane:
		return false, WhyParkedPending // the state moved on: this copy was handled before
	case st == nil:
		return true, WhyNew
	case st.Expired(a.Now):
		return true, WhyExpired
	case st.Status == StatusParked:
		return false, WhyParkedPending
	case a.Origin == headers.OriginIngest:
		return false, WhyDuplicate
	}
	switch st.Status {
	case StatusDone:
		switch {
		case a.Origin != headers.OriginBackfill || !a.Again || a.ReplayID == "":
			return false, WhyAlreadyDone
		case slices.Contains(st.ReplayIDs, a.ReplayID):
			return false, WhyReplaySeen
		}
		return true, WhyAgain
	case StatusRetrying:
		if a.Origin == headers.OriginReplay || a.Origin == headers.OriginBackfill {
			return false, WhyRetryPending
		}
		if a.Attempt != st.NextAttempt {
			return false, WhyStaleAttempt
		}
		return true, WhyNextAttempt
	case StatusDead:
		switch {
		case a.Origin == headers.OriginRetry, a.Origin == headers.OriginBackfill:
			return false, WhyAlreadyDead
		case a.ReplayID == "":
			return false, WhyReplayWithoutID
		case slices.Contains(st.ReplayIDs, a.ReplayID):
			return false, WhyReplaySeen
		}
		return true, WhyReplay
	}
	return false, WhyUnknownStatus
}

// Policy is what a destination's configuration says for its decisions.
type Policy struct {
	// Schedule routes retryable failures to tiers (tier numbers are the
	// whole schedule's: retry.Schedule.Only keeps them).
	Schedule retry.Schedule
	// TTL is the dedup TTL; <= 0 means DefaultTTL.
	TTL time.Duration
	// Topic says the route's destination is a Kafka topic: its delivery is
	// a record in the decision's transaction (ToTopic), so it always
	// succeeds.
	Topic bool
}

// ttlOf is pol's dedup TTL.
func ttlOf(pol Policy) time.Duration {
	if pol.TTL <= 0 {
		return DefaultTTL
	}
	return pol.TTL
}

// Result is what became of one route's delivery of a record: its
// destination called, with its answer, or not called, with the reason.
// Not being called is a value, not an error: a hold, a park and an
// invalid body are outcomes of the plan or of admission, not failures.
type Result struct {
	Kind ResultKind
	// Err is a call's answer (nil: success), else why the destination
	// was not called (the outcome's error, the history entry's).
	Err error
	// Held is the hold the record waits behind (ResultHeld).
	Held *HeldError
	// Took is the destination's time; 0 when not called.
	Took time.Duration
}

// ResultKind says whether a route's destination was called, and if not,
// what not calling it means.
type ResultKind uint8

// Result kinds.
const (
	// ResultCalled: the destination took the record (an HTTP call, a
	// topic route's record in the transaction, or nothing to call for a
	// provider delivered nowhere); Err is its answer, nil for success.
	ResultCalled ResultKind = iota
	// ResultParked: not called; the record waits in the route's lane
	// (paused by an operator, its breaker refusing, no slot within the
	// wait, its queue full, or its priority class over its share). No
	// attempt is used and no error joins its history.
	ResultParked
	// ResultHeld: not called; the record of an ordered provider's entity
	// waits behind the entity's head on the route (holds.go).
	ResultHeld
	// ResultInvalid: not called; the body failed its provider's schema
	// (Err is an *InvalidPayloadError): dead as invalid_payload.
	ResultInvalid
	// ResultRefused: not called, and failed as a call would have: Err is
	// classified like a call's (a route gone from the providers file is
	// permanent, a provider this processor does not know is retryable).
	ResultRefused
	// ResultTransformFailed: not called; the route's transform failed
	// (Err is the script's error): dead as transform_failed.
	ResultTransformFailed
	// ResultSkipped: not called; the route's transform skipped the event
	// (returned null): the route is done with the key.
	ResultSkipped
)

// Answered is the result of a call (or of a route with nothing to call):
// err is the destination's answer, took its time.
func Answered(err error, took time.Duration) Result {
	return Result{Kind: ResultCalled, Err: err, Took: took}
}

// ParkedFor is the result of a record parked before any call, for why.
func ParkedFor(why error) Result { return Result{Kind: ResultParked, Err: why} }

// HeldBehind is the result of a record held behind its entity's head.
func HeldBehind(e *HeldError) Result { return Result{Kind: ResultHeld, Err: e, Held: e} }

// InvalidPayload is the result of a record whose body failed its
// provider's schema, for reason (the schema file and its first violation).
func InvalidPayload(reason string) Result {
	return Result{Kind: ResultInvalid, Err: &InvalidPayloadError{Reason: reason}}
}

// TransformFailed is the result of a record whose route's transform
// failed with err.
func TransformFailed(err error) Result { return Result{Kind: ResultTransformFailed, Err: err} }

// Refused is the result of a record not called that fails as a call
// would have, with err.
func Refused(err error) Result { return Result{Kind: ResultRefused, Err: err} }

// InvalidPayloadError is the reason a record whose body failed its
// provider's schema (providers file schema:) is not called: ingest marked
// it hookline.invalid-payload, or the processor found a replay invalid.
// Reason is the short reason (the schema file and its first violation).
type InvalidPayloadError struct{ Reason string }

// Error says the payload is invalid and why.
func (e *InvalidPayloadError) Error() string { return "invalid payload: " + e.Reason }

// EffectKind is what record a decision writes.
type EffectKind uint8

// Effect kinds.
const (
	// ToChangelog writes the key's next state.
	ToChangelog EffectKind = iota + 1
	// ToTier copies the record, for its next attempt (Effect.Attempt), to
	// retry tier Effect.Tier.
	ToTier
	// ToDLQ copies the record, dead for Effect.DeadReason after attempt
	// Effect.Attempt, to webhooks.dlq.
	ToDLQ
	// ToLane parks the exact record in its destination's lane.
	ToLane
	// ToOutcomes writes the record's outcome, with Effect.Status (and the
	// tier or dead reason the other effects name).
	ToOutcomes
	// ToTopic writes the exact record to its route's topic destination
	// (Policy.Topic): its delivery, in the transaction of its state.
	ToTopic
)

// Effect is one record a decision writes.
type Effect struct {
	Kind EffectKind
	// Route is the route the record is for (every kind but ToChangelog).
	Route  string
	Status Status // ToOutcomes
	// Tier is the retry tier (1-based, see retry.Schedule) of ToTier and
	// of a retrying outcome.
	Tier int
	// DeadReason is headers.DeadExhausted, DeadPermanent or
	// DeadInvalidPayload, of ToDLQ and of a dead outcome.
	DeadReason string
	// Attempt is the hookline.attempt of a ToTier or ToDLQ copy: for a
	// retry the next attempt (the failed one + 1), for the DLQ the attempt
	// just made.
	Attempt int
	// Held is the number of a ToTier copy held behind its entity's head
	// (hookline.held, holds.go); 0: not held.
	Held int
	// Skipped says, of a done outcome, that the route's transform skipped
	// the event: nothing was called or written.
	Skipped bool
	// RetryAfter is, on a ToTier copy, the date the destination's
	// Retry-After named (hookline.retry-after); zero: it named none.
	// NotBefore is the same date when the tier chosen is at least as long
	// as the wait asked for: the copy's hookline.due-at is then not
	// earlier than it, though the call itself took time after Arrival.Now
	// (the tier's delay counts from Now, the date from the answer). Zero
	// when the route's tiers are all shorter: the last tier's delay caps
	// the wait, and a copy due long after the records behind it would
	// hold them back in the tier's partition.
	RetryAfter, NotBefore time.Time
}

// Step returns the key's next state and the records to write for a
// record Admit let through, given what became of it (result) and its
// destination's policy:
//
//	result                          state                    effects
//	called, nil (success)           done                     changelog, outcome done
//	called, retryable, a tier left  retrying, attempt + 1    changelog, tier, outcome retrying
//	called, retryable, no tier left dead                     changelog, DLQ exhausted, outcome dead
//	called, permanent               dead                     changelog, DLQ permanent, outcome dead
//	refused                         as called with its error
//	parked                          parked, same attempt     changelog, lane, outcome parked
//	held                            retrying, same attempt   changelog, tier (numbered copy), outcome held
//	invalid                         dead                     changelog, DLQ invalid_payload, outcome dead
//	transform failed                dead                     changelog, DLQ transform_failed, outcome dead
//	skipped by its transform        done                     changelog, outcome done (skipped)
//
// retry.Classify tells retryable from permanent, and a Retry-After picks
// the first tier at least as long as the wait it asked for (the last tier
// when none is) and sets the tier copy's RetryAfter and NotBefore. The state expires pol.TTL after a.Now; while retrying,
// not before twice the tier's delay (the longest a retry can be parked
// with full jitter), so a short TTL cannot forget a key whose retry is
// still on its way; while parked, not before 7 days (the lane's
// retention). FirstSeenAt is kept from a live old state, and ReplayIDs
// are carried forward, with a.ReplayID added for a replay or a backfill (a parked
// record's id is added when its lane copy is decided). A replay or a
// backfill is attempt 1 whatever its Attempt says. An expired st counts as none.
// Step writes times in UTC truncated to the millisecond, so states
// survive Encode and Decode unchanged.
func Step(st *State, a Arrival, result Result, pol Policy) (State, []Effect) {
	if st != nil && st.Expired(a.Now) {
		st = nil
	}
	next, effects := stepRoute(st.view(a.Route), a, result, pol)
	next.FirstSeenAt = firstSeen(st, a)
	for i := range effects {
		if effects[i].Kind != ToChangelog {
			effects[i].Route = a.Route
		}
	}
	return st.withRoute(a.Route, next), effects
}

// stepRoute is Step for the state of one route, shaped as a key's (view):
// the table above.
func stepRoute(st *State, a Arrival, result Result, pol Policy) (State, []Effect) {
	if st != nil && st.Expired(a.Now) {
		st = nil
	}
	ttl := ttlOf(pol)
	now := a.Now.UTC().Truncate(time.Millisecond)
	attempt := attemptOf(a)
	next := State{
		Provider:  a.Provider,
		UpdatedAt: now,
		ExpiresAt: now.Add(ttl),
	}
	switch result.Kind {
	case ResultHeld:
		// Held behind the entity's head, in a retry tier, no attempt used.
		he := result.Held
		next.Status, next.NextAttempt = StatusRetrying, attempt
		if st != nil {
			next.ReplayIDs = slices.Clone(st.ReplayIDs)
		}
		tier := max(he.Tier, 1)
		next.ExpiresAt = now.Add(max(ttl, 2*pol.Schedule.Tier(tier)))
		return next, []Effect{{Kind: ToChangelog}, {Kind: ToTier, Tier: tier, Attempt: attempt, Held: he.Seq}, {Kind: ToOutcomes, Status: StatusHeld, Tier: tier}}
	case ResultInvalid, ResultTransformFailed:
		next.Status, next.ReplayIDs = StatusDead, replayIDs(st, a)
		reason := headers.DeadInvalidPayload
		if result.Kind == ResultTransformFailed {
			reason = headers.DeadTransformFailed
		}
		return next, []Effect{{Kind: ToChangelog}, {Kind: ToDLQ, DeadReason: reason, Attempt: attempt}, {Kind: ToOutcomes, Status: StatusDead, DeadReason: reason}}
	case ResultSkipped:
		next.Status, next.ReplayIDs = StatusDone, replayIDs(st, a)
		return next, []Effect{{Kind: ToChangelog}, {Kind: ToOutcomes, Status: StatusDone, Skipped: true}}
	case ResultParked:
		next.Status, next.NextAttempt = StatusParked, attempt
		next.ExpiresAt = now.Add(max(ttl, 7*24*time.Hour))
		if st != nil {
			next.ReplayIDs = slices.Clone(st.ReplayIDs)
		}
		return next, []Effect{{Kind: ToChangelog}, {Kind: ToLane}, {Kind: ToOutcomes, Status: StatusParked}}
	}
	switch d := retry.Classify(result.Err); {
	case result.Err == nil:
		next.Status, next.ReplayIDs = StatusDone, replayIDs(st, a)
		if pol.Topic {
			return next, []Effect{{Kind: ToChangelog}, {Kind: ToTopic}, {Kind: ToOutcomes, Status: StatusDone}}
		}
		return next, []Effect{{Kind: ToChangelog}, {Kind: ToOutcomes, Status: StatusDone}}
	default:
		next.ReplayIDs = replayIDs(st, a)
		if tier, ok := pol.Schedule.Route(attempt, d); ok {
			next.Status, next.NextAttempt = StatusRetrying, attempt+1
			next.ExpiresAt = now.Add(max(ttl, 2*pol.Schedule.Tier(tier)))
			tc := Effect{Kind: ToTier, Tier: tier, Attempt: attempt + 1, RetryAfter: d.Until}
			if pol.Schedule.Tier(tier) >= d.After {
				tc.NotBefore = d.Until
			}
			return next, []Effect{{Kind: ToChangelog}, tc, {Kind: ToOutcomes, Status: StatusRetrying, Tier: tier}}
		}
		reason := headers.DeadPermanent
		if d.Retryable {
			reason = headers.DeadExhausted
		}
		next.Status = StatusDead
		return next, []Effect{{Kind: ToChangelog}, {Kind: ToDLQ, DeadReason: reason, Attempt: attempt}, {Kind: ToOutcomes, Status: StatusDead, DeadReason: reason}}
	}
}

// attemptOf is the attempt a record is for: its header, at least 1, and 1
// for a replay or a backfill (attempts start again at 1, whatever header a
// hand-made one copied).
func attemptOf(a Arrival) int {
	if a.Origin == headers.OriginReplay || a.Origin == headers.OriginBackfill {
		return 1
	}
	return max(a.Attempt, 1)
}

// firstSeen keeps the old state's FirstSeenAt, else takes the record's, else
// now.
func firstSeen(st *State, a Arrival) time.Time {
	t := a.Now
	switch {
	case st != nil && !st.FirstSeenAt.IsZero():
		t = st.FirstSeenAt
	case !a.FirstSeenAt.IsZero():
		t = a.FirstSeenAt
	}
	return t.UTC().Truncate(time.Millisecond)
}

// replayIDs carries the old ids forward in a new slice, adds a replay's or
// a backfill's id, and keeps the last MaxReplayIDs.
func replayIDs(st *State, a Arrival) []string {
	var ids []string
	if st != nil {
		ids = slices.Clone(st.ReplayIDs)
	}
	if (a.Origin == headers.OriginReplay || a.Origin == headers.OriginBackfill) && a.ReplayID != "" && !slices.Contains(ids, a.ReplayID) {
		ids = append(ids, a.ReplayID)
	}
	if len(ids) == 0 {
		return nil
	}
	return ids[max(len(ids)-MaxReplayIDs, 0):]
}
