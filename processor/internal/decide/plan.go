package decide

import (
	"fmt"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
)

// The per-record path is plan, execute, settle. Admit lets a record
// through; Plan says, per route, what to do with it (call, hold, park,
// dead-letter, retry, write); the processor executes the calls through
// its admission chain and brings back one Result per route; Settle turns
// the plan and the results into the key's next state, the entity's next
// holds and the records to write. Plan and Settle are pure: no Kafka, no
// clock (Arrival.Now), no lock.

// Route is one route of a record's provider as the plan sees it.
type Route struct {
	Name   string
	Policy Policy
	// Call says the route has an HTTP destination, called through
	// admission. Otherwise its delivery is its topic's record in the
	// transaction (Policy.Topic) or nothing (the outcome is the product).
	Call bool
	// HoldOnDead is the route's on_dead: hold (ordered providers): a dead
	// head keeps its entity held.
	HoldOnDead bool
	// Closed is admission's view of the route's destination now: why a
	// record read now is parked at once (paused by an operator, its
	// breaker refusing, its queue long), nil when it may wait for a slot.
	Closed error
	// Transform is what the route's transform gave for the record, run
	// before the plan (the plan runs no script: a script's bounds are
	// time and memory, and the plan reads no clock); zero when the route
	// has none or it was not run (an invalid payload).
	Transform Transformed
}

// Transformed is what a route's transform gave: the request to send
// (zero), skip the route for this event, or an error (the script threw,
// passed its bounds, or returned what is not a request).
type Transformed struct {
	Skip bool
	Err  error
}

// Entity is what the plan knows of an ordered provider's record's entity:
// its holds, and the number of a copy held before (hookline.held; 0: none).
type Entity struct {
	Holds Holds
	Seq   int
}

// Input is what a plan is made of: a record Admit let through, its key's
// state, its entity's holds and its provider's routes.
type Input struct {
	// Key is the record's idempotency key.
	Key     string
	State   *State // nil: none
	Arrival Arrival
	// Entity is the record's entity; nil: not ordered.
	Entity *Entity
	// Known says the provider is in the processor's providers file;
	// Filed that it has routes (else it is delivered nowhere).
	Known, Filed bool
	// Routes are, for a fresh ingest record (Arrival.Route ""), the routes
	// its event matches; for any other, its route when the file has it.
	Routes []Route
	// Invalid says why the body failed its provider's schema; nil: valid.
	Invalid *InvalidPayloadError
	// KeyPolicy is the policy of a decision for the key rather than a
	// route (unrouted, delivered nowhere, a route gone): the provider's
	// dedup TTL.
	KeyPolicy Policy
	// Tiers is the number of retry tiers (the whole schedule's): a dead
	// head held by on_dead: hold waits as if in the last.
	Tiers int
	// Moved says the record is for the route default of a provider whose
	// file now has routes but none named default (its destination: moved
	// to routes:): it waited in a retry tier, or is a replay of a DLQ
	// entry, from before the change. Routes are then the routes its event
	// matches, as for a fresh record.
	Moved bool
}

// Action is what a plan does with one route's delivery.
type Action uint8

// Actions.
const (
	// Call the route's destination, through admission (which may still
	// park the record: no slot within the wait, its class over its
	// share, paused meanwhile).
	ActCall Action = iota + 1
	// Write: nothing to call. A topic route's delivery is its record in
	// the transaction; a provider delivered nowhere has its outcome only.
	ActWrite
	// Hold: held behind the entity's head on the route.
	ActHold
	// Park: parked in the route's lane before any call (Route.Closed).
	ActPark
	// DeadLetter: to the DLQ without a call: an invalid payload, or a
	// route gone from the providers file.
	ActDeadLetter
	// Retry: not called, and retried as a failed call would be: the
	// provider is not in this processor's providers file (ingest's may be
	// newer).
	ActRetry
)

var actionNames = [...]string{ActCall: "call", ActWrite: "write", ActHold: "hold", ActPark: "park", ActDeadLetter: "dead-letter", ActRetry: "retry"}

func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// RouteStep is the plan for one route.
type RouteStep struct {
	Route  Route
	Action Action
	// Result is what became of the route when the plan settles it
	// itself: every action but Call.
	Result Result
}

// Plan is what to do with a record Admit let through, per route.
type Plan struct {
	In Input
	// Steps are one per route; none for a fresh record no route matched
	// (unrouted). A decision for the key rather than a route (a provider
	// delivered nowhere) is one step for the route "".
	Steps []RouteStep
	// Skip is why a record is not processed after all (a Why constant),
	// "" when it is: a moved record whose every route has a state of its
	// own already.
	Skip string
}

// Calls reports how many steps call a destination.
func (p Plan) Calls() int {
	n := 0
	for _, st := range p.Steps {
		if st.Action == ActCall {
			n++
		}
	}
	return n
}

// MakePlan plans a record Admit let through:
//
//	record                         route                        action
//	fresh, provider without routes -                            write (key), dead-letter if invalid
//	fresh, no route matched        -                            none: unrouted (dead-letter for the key if invalid)
//	any, invalid payload           each route                   dead-letter (invalid_payload)
//	retry/replay/lane, unknown     the route default            retry (provider not in the file)
//	retry/replay, moved            each route matched, no state planned as fresh; unrouted if none; skip if every one has a state
//	retry/replay/lane              route gone                   dead-letter (permanent)
//	retry/replay/lane              none, provider delivered nowhere  write (key)
//	any                            held for the entity          hold
//	any                            its transform failed         dead-letter (transform_failed)
//	any                            its transform skipped it     write (skipped: not called, done)
//	any but a lane copy            destination closed now       park
//	any                            HTTP destination             call
//	any                            topic route                  write
func MakePlan(in Input) Plan {
	pl := Plan{In: in}
	a := in.Arrival
	key := func(r Result) {
		pl.Steps = []RouteStep{{Route: Route{Name: a.Route, Policy: in.KeyPolicy}, Action: actionOf(r), Result: r}}
	}
	if a.Route == "" { // a fresh ingest record: every route its event matches
		switch {
		case !in.Filed || (in.Invalid != nil && len(in.Routes) == 0):
			key(in.invalidOr(Answered(nil, 0)))
			return pl
		case len(in.Routes) == 0:
			return pl // unrouted
		}
		pl.Steps = make([]RouteStep, len(in.Routes))
		for i, rt := range in.Routes {
			pl.Steps[i] = in.route(rt)
		}
		return pl
	}
	switch {
	case in.Invalid != nil && len(in.Routes) == 0:
		key(in.invalidOr(Result{}))
	case !in.Known:
		key(Refused(fmt.Errorf("provider %q is not in this processor's providers file", a.Provider)))
	case in.Moved:
		pl.moved()
	case len(in.Routes) > 0:
		pl.Steps = []RouteStep{in.route(in.Routes[0])}
	case in.Filed || a.Route != headers.DefaultRoute:
		key(Refused(retry.Permanent(fmt.Errorf("route %q of provider %q is not in this processor's providers file", a.Route, a.Provider))))
	default: // a provider delivered nowhere: its outcome only
		key(Answered(nil, 0))
	}
	return pl
}

// moved plans a record of the route default of a provider that moved to
// routes without one named default: like a fresh record, to every route
// its event matches, except a route that has a state for the key already
// (it took the key over before: each route is delivered once), and as a
// record new to each route (an ordered provider's held copy was numbered
// for the route default, not for them).
func (pl *Plan) moved() {
	in := pl.In
	if in.Entity != nil {
		e := *in.Entity
		e.Seq = 0
		in.Entity = &e
	}
	for _, rt := range in.Routes {
		if in.State.live(rt.Name, in.Arrival.Now) {
			continue
		}
		pl.Steps = append(pl.Steps, in.route(rt))
	}
	if len(pl.Steps) == 0 && len(in.Routes) > 0 {
		pl.Skip = WhyMovedTaken
	}
}

// route plans one route the file has.
func (in Input) route(rt Route) RouteStep {
	st := RouteStep{Route: rt}
	var held *HeldError
	if in.Entity != nil {
		held = in.Entity.Holds.Check(rt.Name, in.Key, in.Entity.Seq)
	}
	switch {
	case in.Invalid != nil:
		st.Result = in.invalidOr(Result{})
	case held != nil:
		st.Result = HeldBehind(held)
	case rt.Transform.Err != nil:
		st.Result = TransformFailed(rt.Transform.Err)
	case rt.Transform.Skip:
		st.Result = Result{Kind: ResultSkipped}
	case !rt.Call:
		st.Result = Answered(nil, 0)
	case rt.Closed != nil && !in.Arrival.FromLane: // a lane copy was parked already: it waits
		st.Result = ParkedFor(rt.Closed)
	default:
		st.Action = ActCall
		return st
	}
	st.Action = actionOf(st.Result)
	return st
}

// invalidOr is the invalid payload's result, else r.
func (in Input) invalidOr(r Result) Result {
	if in.Invalid != nil {
		return Result{Kind: ResultInvalid, Err: in.Invalid}
	}
	return r
}

// actionOf is the action of a step the plan settles itself.
func actionOf(r Result) Action {
	switch r.Kind {
	case ResultHeld:
		return ActHold
	case ResultParked:
		return ActPark
	case ResultInvalid, ResultTransformFailed:
		return ActDeadLetter
	case ResultRefused:
		if retry.Classify(r.Err).Retryable {
			return ActRetry
		}
		return ActDeadLetter
	}
	return ActWrite
}
