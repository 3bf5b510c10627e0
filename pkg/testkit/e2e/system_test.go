package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// skipShort skips the whole-system scenarios under -short: they run the real
// binaries against a broker for minutes.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("whole-system scenario: runs the real binaries against a broker")
	}
}

// TestSteadyFlowWithDuplicates sends a steady flow of signed deliveries from
// six providers, 30% of them re-sent, through ingest, processor and retrier:
// every accepted key is done exactly once and every re-send is dropped.
func TestSteadyFlowWithDuplicates(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	steadyFlow(t, e2e.Options{Partitions: 6})
}

// TestSteadyFlowSecureBroker is the same flow against the local secure
// broker (SASL_SSL, SCRAM-SHA-512, no ACL no access): ingest, processor and
// retrier each as its own user with only the ACLs compose/kafka.sh grants.
func TestSteadyFlowSecureBroker(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	sys := steadyFlow(t, e2e.Options{Partitions: 6, Secure: kafkatest.Secure(t)})
	// The operator's read-only views, as dlq's own user: what waits (the
	// groups' committed offsets) and a key's trace.
	sys.DLQ(nil, "parked", "--json").Want(t, 0)
	keys := sys.Ledger().Keys()
	if len(keys) == 0 {
		t.Fatal("no key accepted")
	}
	if tr := sys.DLQ(nil, "trace", keys[0], "--json").Want(t, 0); !strings.Contains(tr.Stdout, keys[0]) {
		t.Errorf("dlq trace %s: the key is not in its answer:\n%s", keys[0], tr.Stdout)
	}
}

func steadyFlow(t *testing.T, o e2e.Options) *e2e.System {
	sys := e2e.New(t, o)
	svcs := []*e2e.Service{sys.StartIngest(), sys.StartProcessor("p1", nil), sys.StartRetrier(nil)}

	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 6000, Rate: 500, Duplicates: 0.3})
	st := flow.Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	// Every re-send is dropped: by ingest, which recognises a replay of a
	// delivery whose key or event type the signature does not cover
	// (github, shopify, gocardless, calcom: nothing produced), or by the
	// processor's dedup (a duplicate outcome per key; a gocardless
	// delivery carries two events, so count keys per delivery).
	if st.Replays == 0 || tally.Duplicates == 0 {
		t.Errorf("%d re-sends answered duplicate by ingest, %d duplicate outcomes: want both (stripe and standard re-sends are signed afresh, with a new timestamp)", st.Replays, tally.Duplicates)
	}
	if tally.Duplicates+st.Replays < st.Duplicates {
		t.Errorf("%d re-sent deliveries but only %d recognised by ingest and %d duplicate outcomes", st.Duplicates, st.Replays, tally.Duplicates)
	}
	if tally.Done != tally.Accepted || tally.Dead != 0 {
		t.Errorf("%d of %d keys done, %d dead: want all done", tally.Done, tally.Accepted, tally.Dead)
	}
	if tally.Calls != tally.Done {
		t.Errorf("%d destination calls for %d done keys: want one each", tally.Calls, tally.Done)
	}
	// Its own ACLs must be enough for everything a service does, the
	// processor's hanging-transaction check included.
	for _, svc := range svcs {
		for _, refused := range []string{"AUTHORIZATION_FAILED", "not authorized"} {
			if strings.Contains(svc.Output(), refused) {
				t.Errorf("%s was refused something (%q in its log):\n%s", svc.Name, refused, svc.Output())
			}
		}
	}
	return sys
}

// failSome makes the destination fail the first call of about one key in
// share with a 503, so those keys go through the retry tiers once.
func failSome(d *e2e.Destination, share float64) {
	d.Behave(func(key string, call int) int {
		if call == 1 && e2e.KeyFraction(key) < share {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
}

// TestSIGKILLEveryService kills processor, retrier and ingest, ten times
// each, at random moments while deliveries flow at about 1,000/s, a tenth of them
// failing once so the retrier has work. Nothing accepted is lost, nothing is
// done twice, and the destination sees no more repeats than the kills allow.
func TestSIGKILLEveryService(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	deliveries, rate, kills := e2e.EnvCount(t, "HOOKLINE_E2E_DELIVERIES", 100000, 1), 1000.0, e2e.EnvCount(t, "HOOKLINE_E2E_KILLS", 10, 1)
	// A processor kill repeats the calls in flight (up to batch per
	// destination: every provider has its own slots) and at most batch
	// finished calls not yet committed.
	const batch = 64
	perKill := (len(e2e.MixedProviders) + 1) * batch
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	failSome(sys.Dest, 0.1)
	svcs := map[string]*e2e.Service{
		"ingest":    sys.StartIngest(),
		"processor": sys.StartProcessor("p1", map[string]string{"HOOKLINE_MAX_INFLIGHT": fmt.Sprint(batch), "HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch)}),
		"retrier":   sys.StartRetrier(nil),
	}
	// The flow runs until the last kill's service is back: a restart on
	// a loaded machine can take seconds, and the kills must fall under flow
	// (the cap is four times the planned flow).
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 4 * deliveries, Rate: rate, Duplicates: 0.1})

	// 3×kills moments spread over the flow's planned duration.
	var order []string
	for i := 0; i < kills; i++ {
		order = append(order, "processor", "retrier", "ingest")
	}
	planned := time.Duration(float64(deliveries) / rate * float64(time.Second))
	time.Sleep(killUnderFlow(t, sys, flow, svcs, order, planned)) // the last restart under flow too
	flow.Stop()
	flow.Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{Timeout: 5 * time.Minute, ExtraCalls: kills * perKill})
}

// killUnderFlow kills with SIGKILL and restarts the services of svcs named
// by order, shuffled, one at each of len(order) moments spread evenly (a
// quarter gap either way) over planned from now, while flow runs: it
// fails the test if the flow ends first. It returns the gap between two
// moments.
func killUnderFlow(t *testing.T, sys *e2e.System, flow *e2e.Flow, svcs map[string]*e2e.Service, order []string, planned time.Duration) time.Duration {
	t.Helper()
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	gap := planned / time.Duration(len(order)+1)
	start := time.Now()
	for i, name := range order {
		at := time.Duration(i+1)*gap + time.Duration(rand.Int64N(int64(gap/2))) - gap/4
		select {
		case <-time.After(time.Until(start.Add(at))):
		case <-flow.Done():
			t.Fatalf("the flow ended before kill %d of %d: raise the deliveries", i+1, len(order))
		}
		svcs[name].Kill(t)
		svcs[name] = sys.Restart(svcs[name])
		t.Logf("%5.1fs: killed and restarted %s (%d deliveries started, %d accepted)", time.Since(start).Seconds(), name, flow.Started(), flow.Accepted())
	}
	return gap
}

// TestMembersJoinAndLeaveUnderFlow runs one, two, then three processors
// while deliveries flow, then stops one, kills another and brings both back:
// partitions move at every step, and the ledger still balances.
func TestMembersJoinAndLeaveUnderFlow(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	const batch = 64
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	sys.StartIngest()
	sys.StartRetrier(nil)
	// The last step kills p3 for good: its open transaction holds its
	// partitions until the transaction timeout, 15 s here (the default
	// minute would only make the test wait).
	env := map[string]string{"HOOKLINE_MAX_INFLIGHT": fmt.Sprint(batch), "HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch),
		"HOOKLINE_TRANSACTION_TIMEOUT": "15s"}
	procs := map[string]*e2e.Service{"p1": sys.StartProcessor("p1", env)}
	// The flow stops 10 s after the last step (the cap is four times the
	// planned 40 s): every step falls under flow however long a start takes.
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 4 * e2e.EnvCount(t, "HOOKLINE_E2E_MEMBER_DELIVERIES", 20000, 1), Rate: 500, Duplicates: 0.2})
	steps := []struct {
		what string
		do   func()
	}{
		{"p2 joins", func() { procs["p2"] = sys.StartProcessor("p2", env) }},
		{"p3 joins", func() { procs["p3"] = sys.StartProcessor("p3", env) }},
		{"p1 stops (SIGTERM)", func() { procs["p1"].Stop(t) }},
		{"p2 is killed", func() { procs["p2"].Kill(t) }},
		{"p1 rejoins", func() { procs["p1"] = sys.Restart(procs["p1"]) }},
		{"p2 rejoins", func() { procs["p2"] = sys.Restart(procs["p2"]) }},
		{"p3 is killed", func() { procs["p3"].Kill(t) }},
	}
	start := time.Now()
	for i, st := range steps {
		select {
		case <-time.After(time.Until(start.Add(time.Duration(i+1) * 4 * time.Second))):
		case <-flow.Done():
			t.Fatalf("the flow ended before step %q", st.what)
		}
		st.do()
		t.Logf("%5.1fs: %s (%d accepted)", time.Since(start).Seconds(), st.what, flow.Accepted())
	}
	time.Sleep(10 * time.Second)
	flow.Stop()
	flow.Wait()
	// Every rebalance ends each member's open transaction unfinished (an
	// abort: its records are read again by the partition's next owner), so
	// each step may repeat one batch of calls per member there were.
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: len(steps) * len(procs) * batch})
}

// TestRetriesDeadLettersAndReplay runs retry tiers of seconds against a
// destination that fails a share of keys: some recover on their third
// attempt, some fail through every tier, some are refused for good. Each
// class ends as it must, with exactly its calls; then the destination is
// fixed, the DLQ is replayed, and every key ends done. Replaying again
// calls nobody.
func TestRetriesDeadLettersAndReplay(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s", Partitions: 4})
	// A breaker that trips on the failing share would only slow the test.
	env := map[string]string{"HOOKLINE_BREAKER_COOLDOWN": "1s"}
	class := func(key string) string {
		switch f := e2e.KeyFraction(key); {
		case f < 0.15:
			return "recovers"
		case f < 0.20:
			return "exhausted"
		case f < 0.25:
			return "permanent"
		}
		return "ok"
	}
	sys.Dest.Behave(func(key string, call int) int {
		switch class(key) {
		case "recovers":
			if call <= 2 {
				return http.StatusServiceUnavailable
			}
		case "exhausted":
			return http.StatusBadGateway
		case "permanent":
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	})
	sys.StartIngest()
	sys.StartProcessor("p1", env)
	sys.StartRetrier(nil)
	sys.StartFlow(e2e.FlowOptions{Deliveries: 2000, Rate: 400, Duplicates: 0.1}).Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{})

	// Every class ends as it must, with exactly its calls: 1 for ok, 3 for
	// recovers, 4 (one per tier and the first) for exhausted, 1 for
	// permanent.
	wantCalls := map[string]int{"ok": 1, "recovers": 3, "exhausted": 4, "permanent": 1}
	calls := sys.Dest.AllCalls()
	dead, perClass := 0, map[string]int{}
	for key, n := range calls {
		c := class(key)
		perClass[c]++
		if n != wantCalls[c] {
			t.Errorf("%s (%s): %d calls, want %d", key, c, n, wantCalls[c])
		}
		if c == "exhausted" || c == "permanent" {
			dead++
		}
	}
	t.Logf("keys per class: %v", perClass)
	if tally.Dead != dead || tally.Done != tally.Accepted-dead || perClass["recovers"] == 0 || dead == 0 {
		t.Fatalf("%d dead and %d done of %d keys; want %d dead and the rest done (classes %v)", tally.Dead, tally.Done, tally.Accepted, dead, perClass)
	}
	stats := sys.DLQ(nil, "stats", "--json").Want(t, 0).JSONLines(t)
	t.Logf("dlq stats: %v", stats)

	// The destination is fixed: replay every dead letter and wait for it.
	sys.Dest.Behave(func(string, int) int { return http.StatusOK })
	rep := sys.DLQ(nil, "replay", "--all", "--by", "e2e", "--rate", "500/s", "--wait", "2m", "--json").Want(t, 0)
	if got := len(rep.JSONLines(t)); got != dead {
		t.Fatalf("replay printed %d entries, want %d\n%s", got, dead, rep.Stdout)
	}
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})
	afterReplay := sys.Dest.AllCalls()

	// The same replay again, resolved entries included: every one is a
	// duplicate, and nobody is called.
	sys.DLQ(nil, "replay", "--all", "--by", "e2e", "--include-resolved", "--wait", "2m", "--json").Want(t, 0)
	final := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})
	if final.Duplicates < tally.Duplicates+dead {
		t.Errorf("second replay: %d duplicate outcomes, want at least %d more than the %d before", final.Duplicates, dead, tally.Duplicates)
	}
	for k, n := range sys.Dest.AllCalls() {
		if n != afterReplay[k] {
			t.Errorf("%s called again by the second replay (%d calls, %d before)", k, n, afterReplay[k])
		}
	}
}
