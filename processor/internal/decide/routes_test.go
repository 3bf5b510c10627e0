package decide

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/schemas"
)

// routed is the arrival of a retry or replay of one route.
func routed(a Arrival, route string) Arrival {
	a.Route = route
	return a
}

// kinds lists effects as "kind/route/status" for short comparisons.
func kinds(es []Effect) []string {
	names := map[EffectKind]string{ToChangelog: "changelog", ToTier: "tier", ToDLQ: "dlq", ToLane: "lane", ToOutcomes: "outcome", ToTopic: "topic"}
	var out []string
	for _, e := range es {
		s := names[e.Kind]
		if e.Route != "" {
			s += "/" + e.Route
		}
		if e.Status != "" {
			s += "/" + string(e.Status)
		}
		out = append(out, s)
	}
	return out
}

// roundTrip checks st survives the changelog's JSON and the stored form.
func roundTrip(t *testing.T, st State) {
	t.Helper()
	j, err := Encode(st)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", st, err)
	}
	if err := schemas.Validate(schemas.State, j); err != nil {
		t.Fatalf("%s\n%v", j, err)
	}
	back, err := Decode(j)
	if err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("Decode(Encode) = %+v, %v\nwant %+v\njson %s", back, err, st, j)
	}
	b, err := EncodeStored(st)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := DecodeStored(b); err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("DecodeStored(EncodeStored) = %+v, %v\nwant %+v", back, err, st)
	}
	fromJSON, exp, err := StoredFromChangelog(j)
	if err != nil || string(fromJSON) != string(b) || !exp.Equal(st.ExpiresAt) {
		t.Fatalf("StoredFromChangelog = %x, %v, %v; want %x, %v", fromJSON, exp, err, b, st.ExpiresAt)
	}
}

// TestRouteFailsWhileSiblingDone: billing fails and retries alone while crm
// is done once; billing's retry is processed and crm's state is left as
// it was; a retry or a replay aimed at crm never calls it again, and the
// key stays a duplicate for ingest throughout.
func TestRouteFailsWhileSiblingDone(t *testing.T) {
	pol := Policy{Schedule: mustSchedule(t, "1m,5m")}
	st, effects := StepRoutes(nil, ingest, []RouteResult{
		{Route: "billing", Result: Answered(errors.New("HTTP 503"), 0), Policy: pol},
		{Route: "crm", Result: Answered(nil, 0), Policy: pol},
	}, pol)
	if want := []string{"changelog", "tier/billing", "outcome/billing/retrying", "outcome/crm/done"}; !reflect.DeepEqual(kinds(effects), want) {
		t.Fatalf("effects %v, want %v", kinds(effects), want)
	}
	if st.Status != StatusRetrying || len(st.Routes) != 2 {
		t.Fatalf("state %+v: want retrying (summary) with two routes", st)
	}
	if b, _ := st.Route("billing"); b.Status != StatusRetrying || b.NextAttempt != 2 {
		t.Errorf("billing %+v: want retrying, attempt 2", b)
	}
	if c, _ := st.Route("crm"); c.Status != StatusDone {
		t.Errorf("crm %+v: want done", c)
	}
	roundTrip(t, st)

	for _, tc := range []struct {
		a       Arrival
		process bool
		why     string
	}{
		{ingest, false, WhyDuplicate},
		{routed(retryAt(2), "billing"), true, WhyNextAttempt},
		{routed(retryAt(3), "billing"), false, WhyStaleAttempt},
		{routed(retryAt(2), "crm"), false, WhyAlreadyDone},
		{routed(replayOf("dlq:3:17"), "crm"), false, WhyAlreadyDone},
		{routed(replayOf("dlq:3:17"), "billing"), false, WhyRetryPending},
		{retryAt(2), true, WhyNew}, // the route default: the key has no state for it
	} {
		if p, why := Admit(&st, tc.a); p != tc.process || why != tc.why {
			t.Errorf("Admit(%s %s attempt %d) = %v %s, want %v %s", tc.a.Origin, tc.a.Route, tc.a.Attempt, p, why, tc.process, tc.why)
		}
	}

	// billing's retry succeeds: both done, crm untouched.
	st2, effects := Step(&st, routed(retryAt(2), "billing"), Answered(nil, 0), pol)
	if want := []string{"changelog", "outcome/billing/done"}; !reflect.DeepEqual(kinds(effects), want) {
		t.Errorf("retry effects %v, want %v", kinds(effects), want)
	}
	c1, _ := st.Route("crm")
	c2, _ := st2.Route("crm")
	if st2.Status != StatusDone || !reflect.DeepEqual(c1, c2) {
		t.Errorf("after billing's retry: %+v; want done, crm unchanged", st2)
	}
	roundTrip(t, st2)
}

// TestReplayOfOneRoute: a replay of billing's DLQ entry is processed once
// per replay id and changes billing only; the same replay id on crm's
// entry is crm's own.
func TestReplayOfOneRoute(t *testing.T) {
	pol := Policy{Schedule: mustSchedule(t, "1m")}
	perm := errors.New("HTTP 500")
	st, _ := StepRoutes(nil, ingest, []RouteResult{
		{Route: "billing", Result: Answered(perm, 0), Policy: Policy{}}, // no tier: dead at once
		{Route: "crm", Result: Answered(perm, 0), Policy: Policy{}},
	}, pol)
	if st.Status != StatusDead {
		t.Fatalf("state %+v: want dead", st)
	}
	replay := routed(replayOf("dlq:3:17"), "billing")
	if p, why := Admit(&st, replay); !p || why != WhyReplay {
		t.Fatalf("Admit(replay of billing) = %v %s, want process", p, why)
	}
	st2, effects := Step(&st, replay, Answered(nil, 0), pol)
	if want := []string{"changelog", "outcome/billing/done"}; !reflect.DeepEqual(kinds(effects), want) {
		t.Errorf("effects %v, want %v", kinds(effects), want)
	}
	b, _ := st2.Route("billing")
	c, _ := st2.Route("crm")
	if b.Status != StatusDone || len(b.ReplayIDs) != 1 || c.Status != StatusDead || len(c.ReplayIDs) != 0 {
		t.Errorf("billing %+v, crm %+v: want billing done with r1, crm dead without", b, c)
	}
	if p, why := Admit(&st2, replay); p || why != WhyAlreadyDone {
		t.Errorf("the replay again = %v %s, want already_done", p, why)
	}
	if p, why := Admit(&st2, routed(replayOf("dlq:3:17"), "crm")); !p || why != WhyReplay {
		t.Errorf("r1 on crm's entry = %v %s, want process (crm's own replay ids)", p, why)
	}
	roundTrip(t, st2)
}

// TestUnrouted: an event no route matches leaves the key done for no route
// with one unrouted outcome; a re-send is a duplicate.
func TestUnrouted(t *testing.T) {
	st, effects := StepRoutes(nil, ingest, nil, Policy{TTL: time.Hour})
	if want := []string{"changelog", "outcome/unrouted"}; !reflect.DeepEqual(kinds(effects), want) {
		t.Fatalf("effects %v, want %v", kinds(effects), want)
	}
	if st.Status != StatusDone || st.Routes == nil || len(st.Routes) != 0 || !st.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("state %+v: want done, routes empty (not nil), expiring in an hour", st)
	}
	if _, ok := st.Route(headers.DefaultRoute); ok {
		t.Error("an unrouted key has a state for the route default")
	}
	if p, why := Admit(&st, ingest); p || why != WhyDuplicate {
		t.Errorf("re-send = %v %s, want duplicate", p, why)
	}
	roundTrip(t, st)
}

// TestUpgradeReadsOldStateAsDefault: a state written before routes (the
// changelog's version 1) is the route default's: a key done before the
// upgrade is not delivered to it again, by a re-send, a retry or a replay.
func TestUpgradeReadsOldStateAsDefault(t *testing.T) {
	old := `{"v":1,"status":"done","provider":"stripe","first_seen_at":"2026-03-01T11:00:00.000Z","updated_at":"2026-03-01T11:00:00.000Z","expires_at":"2026-03-08T11:00:00.000Z"}`
	st, err := Decode([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if rs, ok := st.Route(headers.DefaultRoute); !ok || rs.Status != StatusDone {
		t.Fatalf("route default of an old state: %+v, %v; want done", rs, ok)
	}
	for _, a := range []Arrival{ingest, retryAt(2), routed(retryAt(2), headers.DefaultRoute), routed(replayOf("dlq:3:99"), headers.DefaultRoute)} {
		if p, why := Admit(&st, a); p {
			t.Errorf("Admit(%s route %q) = process (%s), want a skip", a.Origin, a.Route, why)
		}
	}
	// One route only: the state keeps the old form, byte for byte the
	// changelog value it always was.
	next, _ := Step(nil, routed(ingest, headers.DefaultRoute), Answered(nil, 0), Policy{})
	if next.Routes != nil {
		t.Errorf("route default alone: Routes = %+v, want nil (the old form)", next.Routes)
	}
	if j, _ := Encode(next); string(j[:7]) != `{"v":1,` {
		t.Errorf("route default alone encodes as %s, want version 1", j)
	}
	// A second route joins an old state: the default's state moves into
	// Routes unchanged.
	two, _ := Step(&st, routed(retryAt(1), "audit"), Answered(nil, 0), Policy{})
	d, _ := two.Route(headers.DefaultRoute)
	if len(two.Routes) != 2 || d.Status != StatusDone || !d.ExpiresAt.Equal(st.ExpiresAt) {
		t.Errorf("old state plus audit: %+v; want default done (expiry kept) and audit", two)
	}
	roundTrip(t, two)
}

// TestTopicRoute: a topic destination's success writes the record to the
// topic in the state's transaction.
func TestTopicRoute(t *testing.T) {
	_, effects := StepRoutes(nil, ingest, []RouteResult{{Route: "ledger", Result: Answered(nil, 0), Policy: Policy{Topic: true}}}, Policy{})
	if want := []string{"changelog", "topic/ledger", "outcome/ledger/done"}; !reflect.DeepEqual(kinds(effects), want) {
		t.Errorf("effects %v, want %v", kinds(effects), want)
	}
}

// TestRoutesExpiry: the key lives as long as its longest-lived route (a
// parked route holds a key whose sibling is done with a short TTL).
func TestRoutesExpiry(t *testing.T) {
	short := Policy{TTL: time.Minute}
	st, _ := StepRoutes(nil, ingest, []RouteResult{
		{Route: "a", Result: ParkedFor(errors.New("paused")), Policy: short},
		{Route: "b", Result: Answered(nil, 0), Policy: short},
	}, short)
	a, _ := st.Route("a")
	b, _ := st.Route("b")
	if !st.ExpiresAt.Equal(a.ExpiresAt) || !a.ExpiresAt.After(b.ExpiresAt) || !b.ExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("expiries: key %v, a (parked) %v, b (done) %v; want the key's = a's, after b's = t0+1m", st.ExpiresAt, a.ExpiresAt, b.ExpiresAt)
	}
	if st.Status != StatusParked {
		t.Errorf("summary %s, want parked", st.Status)
	}
	// Once b's state expires it counts as none for a routed arrival.
	late := routed(retryAt(1), "b")
	late.Now = t0.Add(2 * time.Minute)
	if p, why := Admit(&st, late); !p || why != WhyExpired {
		t.Errorf("b after its expiry = %v %s, want process (expired)", p, why)
	}
	roundTrip(t, st)
}

// TestInvalidPayloadRoutes: an invalid record is dead for each route it
// matches, a DLQ entry each (a topic route's included: nothing is
// written to its topic), and the key is dead; a re-send is a duplicate.
func TestInvalidPayloadRoutes(t *testing.T) {
	bad := InvalidPayload("schema order.json: at '/id': got number, want string")
	st, effects := StepRoutes(nil, ingest, []RouteResult{
		{Route: "billing", Result: bad},
		{Route: "ledger", Result: bad, Policy: Policy{Topic: true}},
	}, Policy{})
	if want := []string{"changelog", "dlq/billing", "outcome/billing/dead", "dlq/ledger", "outcome/ledger/dead"}; !reflect.DeepEqual(kinds(effects), want) {
		t.Errorf("effects %v, want %v", kinds(effects), want)
	}
	for _, e := range effects {
		if (e.Kind == ToDLQ || e.Kind == ToOutcomes) && e.DeadReason != headers.DeadInvalidPayload {
			t.Errorf("%v: dead reason %q, want %s", kinds([]Effect{e}), e.DeadReason, headers.DeadInvalidPayload)
		}
	}
	if st.Status != StatusDead {
		t.Errorf("key %s, want dead", st.Status)
	}
	if p, why := Admit(&st, ingest); p || why != WhyDuplicate {
		t.Errorf("a re-send = %v %s, want skipped as a duplicate", p, why)
	}
	roundTrip(t, st)
}
