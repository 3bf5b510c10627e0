package decide

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
)

// planFor is the plan input of a step row: the record for one HTTP route,
// the route default (a provider-level destination's), with what the row's
// result says became of it put where the plan takes it: a closed
// destination (park), an invalid body, a route gone, a provider not
// known. It returns the input and the result execution brings back for a
// call.
func planFor(row stepRow) (Input, Result) {
	pol := Policy{Schedule: stepSchedule, TTL: row.ttl}
	a := row.a
	if a.Origin != headers.OriginIngest {
		a.Route = headers.DefaultRoute
	}
	in := Input{Key: "stripe:evt_1", State: row.st, Arrival: a, Known: true, Filed: true, KeyPolicy: pol, Tiers: stepSchedule.Len()}
	rt := Route{Name: headers.DefaultRoute, Policy: pol, Call: true}
	exec := row.result
	switch row.result.Kind {
	case ResultParked:
		if !a.FromLane { // the plan parks it; a lane copy is parked by admission at the call
			rt.Closed, exec = row.result.Err, Result{}
		}
	case ResultInvalid:
		in.Invalid, exec = row.result.Err.(*InvalidPayloadError), Result{}
	case ResultTransformFailed:
		rt.Transform.Err, exec = row.result.Err, Result{}
	case ResultSkipped:
		rt.Transform.Skip, exec = true, Result{}
	case ResultRefused:
		// A record of a provider not known is for the route default
		// (the processor's arrival); a route gone is not in the file.
		in.Arrival.Route = headers.DefaultRoute
		in.Known = !retry.Classify(row.result.Err).Retryable
		rt, exec = Route{}, Result{}
		if in.Known {
			in.Arrival.Route = "billing"
		}
	}
	if rt.Name != "" {
		in.Routes = []Route{rt}
	}
	return in, exec
}

// TestSettleStepRows takes every row of Step's table through a plan, its
// execution and its settle: the same state and effects, for the route
// the plan named.
func TestSettleStepRows(t *testing.T) {
	for _, tt := range stepRows() {
		t.Run(tt.name, func(t *testing.T) {
			in, exec := planFor(tt)
			pl := MakePlan(in)
			if len(pl.Steps) != 1 {
				t.Fatalf("plan %+v: want one step", pl.Steps)
			}
			results := []Result{pl.Steps[0].Result}
			if pl.Steps[0].Action == ActCall {
				results[0] = exec
			}
			got := Settle(pl, results)
			want := tt.want
			if in.Arrival.Route == "billing" { // a route gone: its own state beside the route default's
				want = tt.st.withRoute("billing", tt.want)
			}
			if !reflect.DeepEqual(got.State, want) {
				t.Errorf("state\n got %+v\nwant %+v", got.State, want)
			}
			var effects []Effect
			for _, e := range got.Effects {
				e.Route = ""
				effects = append(effects, e)
			}
			if !reflect.DeepEqual(effects, tt.effects) {
				t.Errorf("effects\n got %+v\nwant %+v", effects, tt.effects)
			}
			if got.HoldsChanged || got.Holds != nil {
				t.Errorf("holds %+v (changed %v) for a record without an entity", got.Holds, got.HoldsChanged)
			}
		})
	}
}

// TestPlan: what the plan does per route, for routes × ordering × invalid
// payload × backfill × park, and for the records of a provider the file
// does not know, gone routes and providers delivered nowhere.
func TestPlan(t *testing.T) {
	paused := errors.New("destination paused by an operator")
	http := func(name string) Route { return Route{Name: name, Call: true} }
	topic := Route{Name: "ledger", Policy: Policy{Topic: true}}
	closed := func(r Route) Route { r.Closed = paused; return r }
	held := &Entity{Holds: Holds{{Route: "crm", Head: "k0", Next: 2, Deliver: 1, Tier: 2}}}
	draining := &Entity{Holds: Holds{{Route: "crm", Next: 3, Deliver: 2, Tier: 1}}, Seq: 2}
	fromLane := func(a Arrival) Arrival { a.FromLane = true; return a }
	invalid := &InvalidPayloadError{Reason: "schema order.json: at '/id'"}
	waitingDefault := &State{Status: StatusRetrying, NextAttempt: 3, ExpiresAt: later}
	billingDone := &State{Status: StatusRetrying, ExpiresAt: later, Routes: []RouteState{
		{Name: "billing", Status: StatusDone, ExpiresAt: later}, {Name: headers.DefaultRoute, Status: StatusRetrying, NextAttempt: 3, ExpiresAt: later}}}
	tests := []struct {
		name   string
		a      Arrival
		in     Input
		want   string // route:action, ...
		reason string // a word of the first step's result's error
		skip   string
	}{
		{name: "fresh, one HTTP route", a: ingest, in: Input{Known: true, Filed: true, Routes: []Route{http("billing")}}, want: "billing:call"},
		{name: "fresh, routes: HTTP, topic", a: ingest, in: Input{Known: true, Filed: true, Routes: []Route{http("billing"), topic}}, want: "billing:call ledger:write"},
		{name: "fresh, a closed route parks, its sibling calls", a: ingest, in: Input{Known: true, Filed: true, Routes: []Route{closed(http("billing")), http("crm")}}, want: "billing:park crm:call", reason: "paused"},
		{name: "fresh, no route matched: unrouted", a: ingest, in: Input{Known: true, Filed: true}, want: ""},
		{name: "fresh, delivered nowhere", a: ingest, in: Input{Known: true}, want: ":write"},
		{name: "fresh, invalid, routes matched: each dead", a: ingest, in: Input{Known: true, Filed: true, Invalid: invalid, Routes: []Route{closed(http("billing")), topic}}, want: "billing:dead-letter ledger:dead-letter", reason: "invalid payload"},
		{name: "fresh, invalid, no route matched: dead for the key", a: ingest, in: Input{Known: true, Filed: true, Invalid: invalid}, want: ":dead-letter", reason: "invalid payload"},
		{name: "fresh, invalid, delivered nowhere: dead for the key", a: ingest, in: Input{Known: true, Invalid: invalid}, want: ":dead-letter"},
		{name: "ordered: held on crm, billing called", a: ingest, in: Input{Key: "k5", Known: true, Filed: true, Entity: held, Routes: []Route{http("billing"), http("crm")}}, want: "billing:call crm:hold"},
		{name: "ordered: the head itself is called", a: routed(retryAt(2), "crm"), in: Input{Key: "k0", Known: true, Filed: true, Entity: held, Routes: []Route{http("crm")}}, want: "crm:call"},
		{name: "ordered: held beats closed", a: ingest, in: Input{Key: "k5", Known: true, Filed: true, Entity: held, Routes: []Route{closed(http("crm"))}}, want: "crm:hold", reason: "behind k0"},
		{name: "ordered: invalid beats held", a: ingest, in: Input{Key: "k5", Known: true, Filed: true, Entity: held, Invalid: invalid, Routes: []Route{http("crm")}}, want: "crm:dead-letter"},
		{name: "ordered: a held copy's turn while draining", a: routed(retryAt(1), "crm"), in: Input{Key: "k7", Known: true, Filed: true, Entity: draining, Routes: []Route{http("crm")}}, want: "crm:call"},
		{name: "ordered: a held copy not its turn", a: routed(retryAt(1), "crm"), in: Input{Key: "k7", Known: true, Filed: true, Entity: &Entity{Holds: draining.Holds, Seq: 3}, Routes: []Route{http("crm")}}, want: "crm:hold"},
		{name: "retry of a closed route parks", a: routed(retryAt(2), "billing"), in: Input{Known: true, Filed: true, Routes: []Route{closed(http("billing"))}}, want: "billing:park"},
		{name: "lane copy of a closed route calls (admission parks it again)", a: fromLane(routed(retryAt(2), "billing")), in: Input{Known: true, Filed: true, Routes: []Route{closed(http("billing"))}}, want: "billing:call"},
		{name: "backfill of one route", a: routed(backfillOf("backfill:b1", false), "crm"), in: Input{Known: true, Filed: true, Routes: []Route{http("crm")}}, want: "crm:call"},
		{name: "backfill, ordered and held", a: routed(backfillOf("backfill:b1", true), "crm"), in: Input{Key: "k5", Known: true, Filed: true, Entity: held, Routes: []Route{http("crm")}}, want: "crm:hold"},
		{name: "backfill, invalid", a: routed(backfillOf("backfill:b1", false), "crm"), in: Input{Known: true, Filed: true, Invalid: invalid, Routes: []Route{http("crm")}}, want: "crm:dead-letter"},
		{name: "backfill to a topic route", a: routed(backfillOf("backfill:b1", false), "ledger"), in: Input{Known: true, Filed: true, Routes: []Route{topic}}, want: "ledger:write"},
		{name: "replay, invalid, route gone", a: routed(replayOf("dlq:1:2"), "old"), in: Input{Known: true, Filed: true, Invalid: invalid}, want: "old:dead-letter", reason: "invalid payload"},
		{name: "retry of a route gone", a: routed(retryAt(2), "old"), in: Input{Known: true, Filed: true}, want: "old:dead-letter", reason: "not in this processor's providers file"},
		{name: "retry of a provider not known", a: routed(retryAt(2), headers.DefaultRoute), in: Input{}, want: "default:retry", reason: "provider"},
		{name: "retry of a provider delivered nowhere", a: routed(retryAt(2), headers.DefaultRoute), in: Input{Known: true}, want: "default:write"},
		{name: "retry of another route of a provider delivered nowhere: gone", a: routed(retryAt(2), "crm"), in: Input{Known: true}, want: "crm:dead-letter"},
		{name: "moved: a retry of the route default goes to every route matched", a: routed(retryAt(3), headers.DefaultRoute), in: Input{Known: true, Filed: true, Moved: true, State: waitingDefault, Routes: []Route{http("billing"), topic}}, want: "billing:call ledger:write"},
		{name: "moved: a replay of the route default's DLQ entry too", a: routed(replayOf("dlq:1:2"), headers.DefaultRoute), in: Input{Known: true, Filed: true, Moved: true, Routes: []Route{closed(http("billing"))}}, want: "billing:park", reason: "paused"},
		{name: "moved: a route with a state of the key is not planned again", a: routed(retryAt(3), headers.DefaultRoute), in: Input{Known: true, Filed: true, Moved: true, State: billingDone, Routes: []Route{http("billing"), topic}}, want: "ledger:write"},
		{name: "moved: every route has the key: skipped", a: routed(retryAt(3), headers.DefaultRoute), in: Input{Known: true, Filed: true, Moved: true, State: billingDone, Routes: []Route{http("billing")}}, want: "", skip: WhyMovedTaken},
		{name: "moved: no route matched: unrouted", a: routed(retryAt(3), headers.DefaultRoute), in: Input{Known: true, Filed: true, Moved: true, State: waitingDefault}, want: ""},
		{name: "moved: invalid, each route dead", a: routed(replayOf("dlq:1:2"), headers.DefaultRoute), in: Input{Known: true, Filed: true, Moved: true, Invalid: invalid, Routes: []Route{http("billing")}}, want: "billing:dead-letter"},
		{name: "moved, ordered: a held copy is new to the routes (its number was the route default's)", a: routed(retryAt(1), headers.DefaultRoute), in: Input{Key: "k7", Known: true, Filed: true, Moved: true, Entity: &Entity{Holds: Holds{{Route: headers.DefaultRoute, Next: 3, Deliver: 2, Tier: 1}}, Seq: 2}, Routes: []Route{http("crm")}}, want: "crm:call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Arrival = tt.a
			pl := MakePlan(in)
			var got []string
			for _, st := range pl.Steps {
				got = append(got, st.Route.Name+":"+st.Action.String())
				if st.Action == ActCall && st.Result != (Result{}) {
					t.Errorf("%s: a call with a result of its own: %+v", st.Route.Name, st.Result)
				}
				if st.Action != ActCall && actionOf(st.Result) != st.Action {
					t.Errorf("%s: action %s, result %+v", st.Route.Name, st.Action, st.Result)
				}
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Fatalf("plan %q, want %q", s, tt.want)
			}
			if pl.Skip != tt.skip {
				t.Errorf("skip %q, want %q", pl.Skip, tt.skip)
			}
			if tt.reason != "" && (pl.Steps[0].Result.Err == nil || !strings.Contains(pl.Steps[0].Result.Err.Error(), tt.reason)) {
				t.Errorf("first step's reason %v, want one saying %q", pl.Steps[0].Result.Err, tt.reason)
			}
		})
	}
}

// TestSettleRoutes: routes × ordering × invalid × backfill × park, from a
// plan and its results to the key's state, the entity's holds and the
// effects.
func TestSettleRoutes(t *testing.T) {
	pol := Policy{Schedule: mustSchedule(t, "1m,5m,15m")}
	http := func(name string) Route { return Route{Name: name, Call: true, Policy: pol} }
	holdOnDead := func(r Route) Route { r.HoldOnDead = true; return r }
	closed := func(r Route) Route { r.Closed = errors.New("circuit open"); return r }
	boom := Answered(errors.New("HTTP 503"), time.Millisecond)
	perm := Answered(retry.Permanent(errors.New("HTTP 400")), time.Millisecond)
	ok := Answered(nil, time.Millisecond)
	headK0 := Holds{{Route: "crm", Head: "k0", Next: 1, Deliver: 1, Tier: 1, Since: t0}}
	tests := []struct {
		name     string
		in       Input
		calls    []Result // the results of the plan's calls, in step order
		effects  []string
		status   Status
		holds    Holds
		changed  bool
		noEntity bool
	}{
		{
			name: "fresh, two routes: one fails, one done", noEntity: true,
			in:      Input{Arrival: ingest, Known: true, Filed: true, Routes: []Route{http("billing"), http("crm")}},
			calls:   []Result{boom, ok},
			effects: []string{"changelog", "tier/billing", "outcome/billing/retrying", "outcome/crm/done"}, status: StatusRetrying,
		},
		{
			name: "fresh, one parked by the plan, one done", noEntity: true,
			in:      Input{Arrival: ingest, Known: true, Filed: true, Routes: []Route{closed(http("billing")), http("crm")}},
			calls:   []Result{ok},
			effects: []string{"changelog", "lane/billing", "outcome/billing/parked", "outcome/crm/done"}, status: StatusParked,
		},
		{
			name: "fresh, parked by admission at the call", noEntity: true,
			in:      Input{Arrival: ingest, Known: true, Filed: true, Routes: []Route{http("billing")}},
			calls:   []Result{ParkedFor(errors.New("destination had no room"))},
			effects: []string{"changelog", "lane/billing", "outcome/billing/parked"}, status: StatusParked,
		},
		{
			name: "unrouted", noEntity: true,
			in:      Input{Arrival: ingest, Known: true, Filed: true},
			effects: []string{"changelog", "outcome/unrouted"}, status: StatusDone,
		},
		{
			name: "fresh, invalid: dead on each route, no call", noEntity: true,
			in:      Input{Arrival: ingest, Known: true, Filed: true, Invalid: &InvalidPayloadError{Reason: "x"}, Routes: []Route{http("billing"), {Name: "ledger", Policy: Policy{Topic: true}}}},
			effects: []string{"changelog", "dlq/billing", "outcome/billing/dead", "dlq/ledger", "outcome/ledger/dead"}, status: StatusDead,
		},
		{
			name:    "ordered: the first failure makes the head",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{}, Routes: []Route{http("crm")}},
			calls:   []Result{boom},
			effects: []string{"changelog", "tier/crm", "outcome/crm/retrying"}, status: StatusRetrying,
			holds: Holds{{Route: "crm", Head: "k1", Next: 1, Deliver: 1, Tier: 1, Since: t0}}, changed: true,
		},
		{
			name:    "ordered: done with nothing held leaves no holds",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{}, Routes: []Route{http("crm")}},
			calls:   []Result{ok},
			effects: []string{"changelog", "outcome/crm/done"}, status: StatusDone,
		},
		{
			name:    "ordered: held behind k0 on crm, billing done",
			in:      Input{Key: "k5", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{Holds: headK0}, Routes: []Route{http("billing"), http("crm")}},
			calls:   []Result{ok},
			effects: []string{"changelog", "outcome/billing/done", "tier/crm", "outcome/crm/held"}, status: StatusRetrying,
			holds: Holds{{Route: "crm", Head: "k0", Next: 2, Deliver: 1, Tier: 1, Since: t0}}, changed: true,
		},
		{
			name:    "ordered: parked head (lane) makes held records wait in the first tier",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{}, Routes: []Route{closed(http("crm"))}},
			effects: []string{"changelog", "lane/crm", "outcome/crm/parked"}, status: StatusParked,
			holds: Holds{{Route: "crm", Head: "k1", Next: 1, Deliver: 1, Since: t0}}, changed: true,
		},
		{
			name:    "ordered: dead with on_dead: hold keeps the entity held",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{}, Routes: []Route{holdOnDead(http("crm"))}, Tiers: 3},
			calls:   []Result{perm},
			effects: []string{"changelog", "dlq/crm", "outcome/crm/dead"}, status: StatusDead,
			holds: Holds{{Route: "crm", Head: "k1", Next: 1, Deliver: 1, Tier: 3, Dead: true, Since: t0}}, changed: true,
		},
		{
			name:    "ordered: dead otherwise ends",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{}, Routes: []Route{http("crm")}},
			calls:   []Result{perm},
			effects: []string{"changelog", "dlq/crm", "outcome/crm/dead"}, status: StatusDead,
		},
		{
			name:    "ordered: invalid with on_dead: hold holds",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Filed: true, Entity: &Entity{}, Invalid: &InvalidPayloadError{Reason: "x"}, Routes: []Route{holdOnDead(http("crm"))}, Tiers: 3},
			effects: []string{"changelog", "dlq/crm", "outcome/crm/dead"}, status: StatusDead,
			holds: Holds{{Route: "crm", Head: "k1", Next: 1, Deliver: 1, Tier: 3, Dead: true, Since: t0}}, changed: true,
		},
		{
			name:    "ordered: the head's retry done ends the hold",
			in:      Input{Key: "k0", Arrival: routed(retryAt(2), "crm"), Known: true, Filed: true, Entity: &Entity{Holds: headK0}, Routes: []Route{http("crm")}},
			calls:   []Result{ok},
			effects: []string{"changelog", "outcome/crm/done"}, status: StatusDone, changed: true,
		},
		{
			name:    "ordered: backfill held behind the head",
			in:      Input{Key: "k5", Arrival: routed(backfillOf("backfill:b1", false), "crm"), Known: true, Filed: true, Entity: &Entity{Holds: headK0}, Routes: []Route{http("crm")}},
			effects: []string{"changelog", "tier/crm", "outcome/crm/held"}, status: StatusRetrying,
			holds: Holds{{Route: "crm", Head: "k0", Next: 2, Deliver: 1, Tier: 1, Since: t0}}, changed: true,
		},
		{
			name:    "ordered: a route gone ends (no hold on a route not in the file)",
			in:      Input{Key: "k1", Arrival: routed(retryAt(2), "old"), Known: true, Filed: true, Entity: &Entity{}},
			effects: []string{"changelog", "dlq/old", "outcome/old/dead"}, status: StatusDead,
		},
		{
			name:    "ordered: delivered nowhere (the key's decision) touches no hold",
			in:      Input{Key: "k1", Arrival: ingest, Known: true, Entity: &Entity{Holds: headK0}},
			effects: []string{"changelog", "outcome/done"}, status: StatusDone, holds: headK0,
		},
		{
			name: "backfill again on a done route, topic", noEntity: true,
			in:      Input{Arrival: routed(backfillOf("backfill:b1", true), "ledger"), State: &State{Status: StatusDone, ExpiresAt: later}, Known: true, Filed: true, Routes: []Route{{Name: "ledger", Policy: Policy{Topic: true}}}},
			effects: []string{"changelog", "topic/ledger", "outcome/ledger/done"}, status: StatusDone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := MakePlan(tt.in)
			results := make([]Result, len(pl.Steps))
			calls := tt.calls
			for i, st := range pl.Steps {
				results[i] = st.Result
				if st.Action == ActCall {
					if len(calls) == 0 {
						t.Fatalf("step %d (%s) calls, and the test gives no result for it", i, st.Route.Name)
					}
					results[i], calls = calls[0], calls[1:]
				}
			}
			if len(calls) > 0 {
				t.Fatalf("the plan calls fewer routes than the test has results: %+v", pl.Steps)
			}
			got := Settle(pl, results)
			if k := kinds(got.Effects); !reflect.DeepEqual(k, tt.effects) {
				t.Errorf("effects %v, want %v", k, tt.effects)
			}
			if got.State.Status != tt.status {
				t.Errorf("state %s, want %s", got.State.Status, tt.status)
			}
			roundTrip(t, got.State)
			if tt.noEntity {
				if got.Holds != nil || got.HoldsChanged {
					t.Errorf("holds %+v for a record without an entity", got.Holds)
				}
				return
			}
			if !reflect.DeepEqual(got.Holds, tt.holds) || got.HoldsChanged != tt.changed {
				t.Errorf("holds %+v changed %v, want %+v changed %v", got.Holds, got.HoldsChanged, tt.holds, tt.changed)
			}
		})
	}
}

// TestSettleMoved: a record of the route default of a provider moved to
// routes leaves the route default: its state is dropped, each route that
// takes it over starts at attempt 1 with its own schedule, and the route
// default's holds end.
func TestSettleMoved(t *testing.T) {
	pol := Policy{Schedule: mustSchedule(t, "1m,5m,15m")}
	http := func(name string) Route { return Route{Name: name, Call: true, Policy: pol} }
	waiting := &State{Status: StatusRetrying, NextAttempt: 3, Provider: "stripe", FirstSeenAt: t0, ExpiresAt: later}
	in := Input{Key: "k1", Arrival: routed(retryAt(3), headers.DefaultRoute), State: waiting, Known: true, Filed: true, Moved: true,
		Entity: &Entity{Holds: Holds{{Route: headers.DefaultRoute, Head: "k1", Next: 1, Deliver: 1, Tier: 2, Since: t0}}},
		Routes: []Route{http("billing"), http("crm")}}
	pl := MakePlan(in)
	got := Settle(pl, []Result{Answered(errors.New("HTTP 503"), time.Millisecond), Answered(nil, time.Millisecond)})
	if k, want := kinds(got.Effects), []string{"changelog", "tier/billing", "outcome/billing/retrying", "outcome/crm/done"}; !reflect.DeepEqual(k, want) {
		t.Errorf("effects %v, want %v", k, want)
	}
	for _, e := range got.Effects {
		if e.Kind == ToTier && (e.Tier != 1 || e.Attempt != 2) {
			t.Errorf("billing's retry: tier %d attempt %d, want tier 1 attempt 2 (a schedule of its own)", e.Tier, e.Attempt)
		}
	}
	var names []string
	for _, r := range got.State.Routes {
		names = append(names, r.Name+"/"+string(r.Status))
	}
	if s := strings.Join(names, " "); s != "billing/retrying crm/done" || got.State.Status != StatusRetrying {
		t.Errorf("state %s routes %q, want retrying with billing/retrying crm/done and no route default", got.State.Status, s)
	}
	if rs, _ := got.State.Route("billing"); rs.NextAttempt != 2 {
		t.Errorf("billing expects attempt %d, want 2", rs.NextAttempt)
	}
	want := Holds{{Route: "billing", Head: "k1", Next: 1, Deliver: 1, Tier: 1, Since: t0}}
	if !reflect.DeepEqual(got.Holds, want) || !got.HoldsChanged {
		t.Errorf("holds %+v (changed %v), want %+v: the route default's gone, billing's head k1", got.Holds, got.HoldsChanged, want)
	}
	roundTrip(t, got.State)

	// The same record again (a copy read twice): every route has the key.
	again := in
	again.State = &got.State
	if pl := MakePlan(again); pl.Skip != WhyMovedTaken || len(pl.Steps) != 0 {
		t.Errorf("a second copy: plan %+v skip %q, want skipped as %s", pl.Steps, pl.Skip, WhyMovedTaken)
	}
}
