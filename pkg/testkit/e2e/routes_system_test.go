package e2e_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
)

// TestRoutesUnderChaos is issue 22's system test: one provider (stripe)
// with three routes, billing (invoice.* and payment_intent.succeeded over
// HTTP, critical, tiers 1s and 2s, a tenth of its keys failing their first
// call with a 503 so the retrier has work), audit (every event over HTTP)
// and ledger (every event to a topic, in the processor's transaction),
// under about 200 deliveries/s of five event types, a tenth re-sent, while
// the processor and the retrier are each killed with SIGKILL three times
// at random moments. For every (key, route): lost 0, doubled 0, every key
// done, calls within what the kills allow; the ledger topic, read
// read_committed, holds every accepted key exactly once, as sent.
func TestRoutesUnderChaos(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	deliveries, rate, kills := e2e.EnvCount(t, "HOOKLINE_E2E_ROUTE_DELIVERIES", 4000, 1), 200.0, e2e.EnvCount(t, "HOOKLINE_E2E_ROUTE_KILLS", 3, 1)
	const batch = 64
	routes := []e2e.Route{
		{Name: "billing", Events: []string{"invoice.*", "payment_intent.succeeded"}, Priority: "critical", Tiers: []string{"1s", "2s"}},
		{Name: "audit", Events: []string{"*"}},
		{Name: "ledger", Topic: "billing.ledger"},
	}
	// billing matches three of the five types.
	types := []string{"invoice.paid", "customer.created", "payment_intent.succeeded", "charge.refunded", "invoice.finalized"}
	// A processor kill repeats the calls in flight (up to batch per route:
	// each HTTP route has its own slots) and at most batch finished calls
	// not yet committed.
	perKill := (2 + 1) * batch
	sys := e2e.New(t, e2e.Options{Partitions: 6, Routes: map[string][]e2e.Route{"stripe": routes}})
	sys.Dest.BehaveRoute(func(route, key string, call int) int {
		if route == "billing" && call == 1 && e2e.KeyFraction(key) < 0.1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	svcs := map[string]*e2e.Service{
		"ingest":    sys.StartIngest(),
		"processor": sys.StartProcessor("p1", map[string]string{"HOOKLINE_MAX_INFLIGHT": fmt.Sprint(batch), "HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch)}),
		"retrier":   sys.StartRetrier(nil),
	}
	// As in TestSIGKILLEveryService, the flow runs until the last kill's
	// service is back (the cap is four times the planned flow).
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 4 * deliveries, Rate: rate, Duplicates: 0.1, Providers: []string{"stripe"}, EventTypes: types})
	var order []string
	for i := 0; i < kills; i++ {
		order = append(order, "processor", "retrier")
	}
	planned := time.Duration(float64(deliveries) / rate * float64(time.Second))
	time.Sleep(killUnderFlow(t, sys, flow, svcs, order, planned))
	flow.Stop()
	flow.Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: kills * perKill})

	// Each route got its share: billing three types in five, the others
	// every key; billing's failed first calls went through the retrier.
	got := map[string]e2e.Tally{}
	for _, r := range tally.Routes {
		got[r.Route] = r
	}
	billing, audit, ledger := got["billing"], got["audit"], got["ledger"]
	if len(got) != len(routes) || audit.Accepted != tally.Accepted || ledger.Accepted != tally.Accepted {
		t.Errorf("routes %v: want billing, audit and ledger, the last two with all %d keys", tally.Routes, tally.Accepted)
	}
	if share := float64(billing.Accepted) / float64(tally.Accepted); share < 0.5 || share > 0.7 {
		t.Errorf("billing has %d of %d keys (%.2f): want about 3/5", billing.Accepted, tally.Accepted, share)
	}
	if billing.Calls <= billing.Done || ledger.Records < ledger.Accepted {
		t.Errorf("billing: %d calls for %d keys done, want more (a tenth fail once); ledger: %d records for %d keys",
			billing.Calls, billing.Done, ledger.Records, ledger.Accepted)
	}
	if tally.Duplicates == 0 {
		t.Error("no duplicate outcome: the re-sent stripe events (signed afresh) must reach the processor's dedup")
	}
}

// TestSiblingRoutesIsolation is issue 22's sibling isolation: one provider
// (stripe) with two routes matching every event, fast (its destination
// answers at once) and slow (3 s a call, max_inflight 4), at 30 events/s.
// fast's latency from ingest's 202 to its call is measured with slow idle
// (answering at once: nothing waits on it) for 15 s, then with slow taking
// its 3 s for 20 s, when slow can take 4/3 of the 30 events/s and its
// backlog grows by about 29/s. fast's p99 must stay at most 500 ms and at
// most 3× its p99 with slow idle, that p99 taken as at least 50 ms: on a
// quiet machine it is under a millisecond (the call often arrives before
// the poster has read its 202), and on a machine shared with other work
// tens of milliseconds, where a ratio measures scheduling noise (issue 20:
// no test fails by chance); a call held back by slow costs slow's 3 s. slow never has more than 4
// calls in flight, and once it answers at once again every key ends done
// on both routes, once.
func TestSiblingRoutesIsolation(t *testing.T) {
	skipShort(t)
	const (
		rate     = 30.0
		idle     = 15 * time.Second
		loaded   = 20 * time.Second
		slowCall = 3 * time.Second
		slots    = 4
		maxP99   = 500 * time.Millisecond
		maxRatio = 3.0
		floor    = 50 * time.Millisecond // of the p99 with slow idle, for the ratio
	)
	sys := e2e.New(t, e2e.Options{Partitions: 6, Routes: map[string][]e2e.Route{"stripe": {
		{Name: "fast"},
		{Name: "slow", Timeout: 10 * time.Second, MaxInflight: slots},
	}}})
	var slowOn atomic.Bool
	sys.Dest.DelayRoute(func(route, _ string) time.Duration {
		if route == "slow" && slowOn.Load() {
			return slowCall
		}
		return 0
	})
	tl := isolation.NewTimeline()
	sys.Dest.OnRouteCall(func(route, key string, at time.Time) {
		if route == "fast" {
			tl.Called(key, at)
		}
	})
	sys.StartIngest()
	sys.StartRetrier(nil)
	sys.StartProcessor("p1", nil)

	// Warm-up: the processor joins its group and takes its partitions.
	isolationFlow(sys, tl, isolation.Warmup, "stripe", rate, 2*time.Second).Wait()
	if err := tl.WaitCalled(t.Context(), isolation.Warmup, "stripe", time.Minute); err != nil {
		t.Fatal(err)
	}
	isolationFlow(sys, tl, isolation.Alone, "stripe", rate, idle).Wait()
	slowOn.Store(true)
	isolationFlow(sys, tl, isolation.Together, "stripe", rate, loaded).Wait()
	slowCalled := len(sys.Dest.RouteCalls("slow"))
	// Every fast call of the loaded phase, however late, before the
	// figures are taken.
	if err := tl.WaitCalled(t.Context(), isolation.Together, "stripe", time.Minute); err != nil {
		t.Error(err)
	}
	alone, together := tl.Summary(isolation.Alone, "stripe"), tl.Summary(isolation.Together, "stripe")
	slowMax := sys.Dest.MaxInflightOn("slow")
	// slow answers at once again: its backlog drains, and the ledger
	// settles every (key, route).
	slowOn.Store(false)
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	ratio := float64(together.P99) / float64(max(alone.P99, floor))
	t.Logf("sibling routes: stripe at %.0f/s to fast (at once) and slow (%s a call, max_inflight %d)\n"+
		"  %-30s %6s %7s %10s %10s %10s\n"+
		"  %-30s %6d %7d %10.1f %10.1f %10.1f\n"+
		"  %-30s %6d %7d %10.1f %10.1f %10.1f\n"+
		"  ratio fast p99 with slow loaded / idle (at least %s): %.2f (want ≤ %.0f, and p99 ≤ %s); slow: %d keys called of %d sent when the loaded phase ended, at most %d calls in flight",
		rate, slowCall, slots,
		"fast: 202 -> call", "keys", "called", "p50 ms", "p99 ms", "max ms",
		"with slow idle", alone.Keys, alone.Called, msf(alone.P50), msf(alone.P99), msf(alone.Max),
		"with slow loaded", together.Keys, together.Called, msf(together.P50), msf(together.P99), msf(together.Max),
		floor, ratio, maxRatio, maxP99, slowCalled, sys.Ledger().Accepted(), slowMax)
	if alone.Keys == 0 || together.Keys == 0 || alone.Called < alone.Keys || together.Called < together.Keys {
		t.Errorf("fast: %d of %d keys called with slow idle, %d of %d with slow loaded: want all", alone.Called, alone.Keys, together.Called, together.Keys)
	}
	if together.P99 > maxP99 || ratio > maxRatio {
		t.Errorf("fast's p99 with slow loaded %.1f ms, %.2f× its %.1f ms with slow idle (at least %s): want at most %s and %.0f×",
			msf(together.P99), ratio, msf(alone.P99), floor, maxP99, maxRatio)
	}
	if slowMax > slots {
		t.Errorf("slow had %d calls in flight: want at most its max_inflight %d", slowMax, slots)
	}
	// The loaded phase loaded slow: it could call only a fraction of the
	// keys sent (4 slots of 3 s: 4/3 a second against 30).
	if sent := sys.Ledger().Accepted(); slowCalled > sent-int(rate*loaded.Seconds())/2 {
		t.Errorf("slow had called %d of %d keys when the loaded phase ended: it was not behind, so the scenario proved nothing", slowCalled, sent)
	}
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// TestDestinationMovedToRoutes is issue 31 item 7's second hole: a
// provider's provider-level destination moved to routes: without a route
// named default, under flow. stripe starts with its destination (route
// default), which answers 503 to every call, so its records wait: in the
// retry tiers with its breaker off ("retry tiers"), mostly in its lane
// once its breaker opens ("lane"). The processor is then stopped and
// started again with a providers file giving stripe routes billing
// (invoice.*), audit (every event) and ledger (a topic): what waited for
// the route default goes to the routes its event matches, as a fresh
// record would, while the flow goes on. For every (key, route): lost 0,
// doubled 0, every key done, none dead and no DLQ entry (the route
// default's records were not sent to the DLQ as a route gone, nor left in
// its lane).
func TestDestinationMovedToRoutes(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	for _, tc := range []struct {
		name    string
		breaker string // HOOKLINE_BREAKER_FAILURES before the move
	}{
		{name: "retry tiers", breaker: "-1"},
		{name: "lane", breaker: "5"},
	} {
		t.Run(tc.name, func(t *testing.T) { movedToRoutes(t, tc.breaker) })
	}
}

func movedToRoutes(t *testing.T, breaker string) {
	const deliveries, rate = 900, 40.0
	routes := []e2e.Route{
		{Name: "billing", Events: []string{"invoice.*"}},
		{Name: "audit"},
		{Name: "ledger", Topic: "moved.ledger"},
	}
	// The route default's fourth attempt is 36 s after its first: the
	// move comes before any key of the route default could end dead.
	sys := e2e.New(t, e2e.Options{Tiers: "2s,4s,30s", Routes: map[string][]e2e.Route{"stripe": routes}, Moved: []string{"stripe"}})
	sys.Dest.BehaveRoute(func(route, _ string, _ int) int {
		if route == headers.DefaultRoute {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	sys.StartIngest()
	sys.StartRetrier(nil)
	p1 := sys.StartProcessor("p1", map[string]string{"HOOKLINE_BREAKER_FAILURES": breaker})
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: deliveries, Rate: rate, Duplicates: 0.1, Providers: []string{"stripe"},
		EventTypes: []string{"invoice.paid", "customer.created"}})

	// Wait until a third of the flow is accepted and the route default has
	// refused some of it (with its breaker on, it opens after a few
	// refusals and lets a probe through now and then).
	const accepted, refused = deliveries / 3, 1
	deadline := time.Now().Add(60 * time.Second)
	for flow.Accepted() < accepted || len(sys.Dest.RouteCalls(headers.DefaultRoute)) < refused {
		if time.Now().After(deadline) {
			t.Fatalf("in 60 s: %d deliveries accepted (want %d), the route default called for %d keys (want %d)",
				flow.Accepted(), accepted, len(sys.Dest.RouteCalls(headers.DefaultRoute)), refused)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p1.Stop(t)
	before := sys.Dest.RouteCalls(headers.DefaultRoute)
	t.Logf("processor stopped with %d keys refused by the route default (%d deliveries accepted); started again with stripe's routes",
		len(before), flow.Accepted())
	sys.StartProcessor("p1", map[string]string{"HOOKLINE_PROVIDERS": sys.RoutesFile()})
	flow.Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: 2 * 64})

	if tally.Dead != 0 || tally.DLQ != 0 {
		t.Errorf("dead %d, DLQ entries %d: want none (nothing failed on the routes)", tally.Dead, tally.DLQ)
	}
	if after := sys.Dest.RouteCalls(headers.DefaultRoute); len(after) != len(before) {
		t.Errorf("the route default was called for %d keys after the move (%d before): want none", len(after)-len(before), len(before))
	}
	audit := sys.Dest.RouteCalls("audit")
	for k := range before {
		if audit[k] == 0 {
			t.Errorf("%s, refused by the route default, was not called on audit", k)
		}
	}
	// Where the route default's records waited: parked in its lane, or
	// only ever in its retry tiers. AllDone says each ended done on each
	// of its routes.
	parked, tiered := 0, 0
	for _, k := range sys.Ledger().Keys() {
		switch o := sys.Ledger().RouteOutcomes(k, headers.DefaultRoute); {
		case o.Parked > 0:
			parked++
		case o.Retrying > 0:
			tiered++
		}
	}
	if (breaker == "-1" && tiered == 0) || (breaker != "-1" && parked == 0) {
		t.Errorf("before the move %d keys were parked in the route default's lane and %d only in its retry tiers: want some of the %s",
			parked, tiered, map[bool]string{true: "tiers'", false: "lane's"}[breaker == "-1"])
	}
	t.Logf("moved: %d keys only in the route default's retry tiers and %d parked in its lane went to their routes (audit %d keys, billing %d keys called)",
		tiered, parked, len(audit), len(sys.Dest.RouteCalls("billing")))
}
