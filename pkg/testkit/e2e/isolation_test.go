package e2e_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
)

// startIsolation prepares a system with the two providers of the isolation
// scenario (fastpay answered at once, slowcrm after the scenario's slow
// call) and starts ingest and the retrier; the caller starts the processor.
func startIsolation(t *testing.T, sc isolation.Scenario) *e2e.System {
	t.Helper()
	sys := e2e.New(t, e2e.Options{Partitions: 6, Providers: sc.Providers})
	sys.Dest.DelayBy(sc.Delay)
	sys.StartIngest()
	sys.StartRetrier(nil)
	return sys
}

// isolationFlow is one provider's deliveries of one phase: rate per second
// for dur, none re-sent, every 202 entered in tl (when not nil) under phase.
func isolationFlow(sys *e2e.System, tl *isolation.Timeline, phase, provider string, rate float64, dur time.Duration) *e2e.Flow {
	o := e2e.FlowOptions{Deliveries: int(rate * dur.Seconds()), Rate: rate, Providers: []string{provider}, ID: phase}
	if tl != nil {
		o.OnAccept = func(keys []string, at time.Time) { tl.Accepted(phase, at, keys...) }
	}
	return sys.StartFlow(o)
}

// TestIsolationSlowDestination runs two providers on one processor:
// fastpay, whose destination answers at once, and slowcrm, whose
// destination takes 3 s per call (timeout 10s, max_inflight 200, so its
// 40/s × 3 s = 120 calls in flight fit its own budget). fastpay's latency
// from ingest's 202 to its destination call is measured alone (50/s for
// 15 s), then with slowcrm loaded (fastpay 50/s and slowcrm 40/s for 20 s):
// its p99 with slowcrm must stay within 3× its p99 alone, or under 300 ms.
// Every slowcrm delivery ends done, with one call, none through a retry
// tier; the ledger balances.
//
// A processor that commits one transaction per polled batch, after the
// batch's slowest call returned, fails this: every fastpay record polled
// with a slowcrm one waits for it.
func TestIsolationSlowDestination(t *testing.T) {
	skipShort(t)
	runIsolation(t, isolation.Default())
}

// TestPriorityUnderSaturation is the scenario with priority classes
// (isolation.Priority): fastpay is critical; slowcrm is low and asks for
// more records in memory (800/s of 1 s calls) than the processor's budget
// (HOOKLINE_MAX_PENDING 500). fastpay's p99 with slowcrm saturating the
// processor must stay within 3× its p99 alone; slowcrm still moves (each
// of its deliveries done once, with one call), parking what its share of
// the budget cannot hold.
//
// Without classes (both normal) the reader stops at the budget and every
// fastpay record waits in webhooks.raw behind slowcrm's second-long calls.
func TestPriorityUnderSaturation(t *testing.T) {
	skipShort(t)
	sys := runIsolation(t, isolation.Priority())
	if sys.Ledger().Parked() == 0 {
		t.Error("no slowcrm record was parked: the processor was not saturated, so the scenario proved nothing")
	}
}

// runIsolation runs scenario sc: fastpay alone, then fastpay and slowcrm
// together, and checks the verdict and that every slowcrm delivery ended
// done with one call and no retry.
func runIsolation(t *testing.T, sc isolation.Scenario) *e2e.System {
	sys := startIsolation(t, sc)
	tl := isolation.NewTimeline()
	sys.Dest.OnCall(tl.Called)
	sys.StartProcessor("p1", sc.ProcessorEnv())

	// Warm-up: the processor joins its group and takes its partitions, so
	// that wait does not count as fastpay's latency alone.
	isolationFlow(sys, tl, isolation.Warmup, isolation.Fast, sc.FastRate, 2*time.Second).Wait()
	if err := tl.WaitCalled(t.Context(), isolation.Warmup, isolation.Fast, time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	isolationFlow(sys, tl, isolation.Alone, isolation.Fast, sc.FastRate, sc.Alone).Wait()
	fast := isolationFlow(sys, tl, isolation.Together, isolation.Fast, sc.FastRate, sc.Together)
	slow := isolationFlow(sys, tl, isolation.Together, isolation.Slow, sc.SlowRate, sc.Together)
	fast.Wait()
	slow.Wait()
	t.Logf("%.1fs: both phases sent; destination calls in flight at most %d", time.Since(start).Seconds(), sys.Dest.MaxInflight())
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	rep := tl.Report(sc)
	t.Log("\n" + rep.String())
	if err := rep.Isolated(); err != nil {
		t.Error(err)
	}
	// Every slowcrm delivery: done once, one destination call, no retrying
	// outcome (none went to a retry tier, breaker included).
	var bad []string
	keys := tl.Keys(isolation.Together, isolation.Slow)
	sort.Strings(keys)
	for _, k := range keys {
		o := sys.Ledger().Outcomes(k)
		if c := sys.Dest.Calls(k); o.Done != 1 || o.Dead != 0 || o.Retrying != 0 || c != 1 {
			bad = append(bad, fmt.Sprintf("%s (done %d, dead %d, retrying %d, calls %d)", k, o.Done, o.Dead, o.Retrying, c))
		}
	}
	if len(keys) == 0 || len(bad) > 0 {
		t.Errorf("slowcrm: %d of %d keys not done with exactly one call and no retry; want all of them; e.g. %s",
			len(bad), len(keys), strings.Join(bad[:min(len(bad), 5)], ", "))
	}
	return sys
}
