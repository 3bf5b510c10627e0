package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
)

// TestIsolationKilledWithSlowCallsInFlight kills the processor with SIGKILL
// twice while slowcrm's 3 s calls are in flight and fastpay flows, and
// restarts it. The ledger balances (lost 0, doubled 0, every key done),
// and the repeated destination calls stay within, per kill, the calls in
// flight at the kill plus one batch (HOOKLINE_BATCH_MAX_RECORDS) of calls
// completed but not yet committed.
//
// slowcrm's limit is adaptive: each restart starts from the limit the
// killed processor had learned and kept on the control topic (instance id
// p1 again), not from the slow start's few calls doubling once per 3 s
// call, so the second kill comes well inside the 30 s flow.
func TestIsolationKilledWithSlowCallsInFlight(t *testing.T) {
	skipShort(t)
	const (
		batch = 100
		kills = 2
		dur   = 30 * time.Second
	)
	sc := isolation.Default()
	sys := startIsolation(t, sc)
	proc := sys.StartProcessor("p1", map[string]string{"HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch)})
	fast := isolationFlow(sys, nil, "kill", isolation.Fast, sc.FastRate, dur)
	slow := isolationFlow(sys, nil, "kill", isolation.Slow, sc.SlowRate, dur)

	bound, start, killed := 0, time.Now(), time.Time{}
	for i := 1; i <= kills; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * dur / (kills + 1))))
		// Half a second's worth of slowcrm calls under way, made by this
		// incarnation: the calls the last one left at the destination
		// have been answered (to nobody) by then.
		waitFor(t, 30*time.Second, "slowcrm calls in flight", func() bool {
			return time.Since(killed) > sc.SlowCall+time.Second && sys.Dest.Inflight() >= int(sc.SlowRate/2)
		}, func() {})
		if flowDone(slow) {
			t.Fatalf("the flow ended before kill %d", i)
		}
		before := sys.Dest.Inflight()
		proc.Kill(t)
		killed = time.Now()
		// Calls still open once the process is dead were in flight at the
		// kill; so were those counted before it that ended since.
		in := max(before, sys.Dest.Inflight())
		proc = sys.Restart(proc)
		bound += in + batch
		t.Logf("%5.1fs: killed the processor with %d destination calls in flight (%d before the signal) and restarted it (%d accepted)",
			time.Since(start).Seconds(), in, before, sys.Ledger().Accepted())
	}
	fast.Wait()
	slow.Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: bound})
	t.Logf("repeated calls %d, bound %d (calls in flight at each kill + %d per kill)", tally.ExtraCalls, bound, batch)
}
