package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/e2e"
)

// skipShort skips the whole-system scenarios under -short: they run the real
// binaries against a broker for minutes.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("whole-system scenario: runs the real binaries against a broker")
	}
}

// envInt reads a scenario's size from the environment (to run it larger or
// smaller by hand), else def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// TestSteadyFlowWithDuplicates sends a steady flow of signed deliveries from
// six providers, 30% of them re-sent, through ingest, processor and retrier:
// every accepted key is done exactly once and every re-send is dropped.
func TestSteadyFlowWithDuplicates(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	sys.StartRetrier(nil)

	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 6000, Rate: 500, Duplicates: 0.3})
	st := flow.Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	// A gocardless delivery carries two events, so count keys per delivery.
	if tally.Duplicates < st.Duplicates {
		t.Errorf("%d re-sent deliveries but only %d duplicate outcomes", st.Duplicates, tally.Duplicates)
	}
	if tally.Done != tally.Accepted || tally.Dead != 0 {
		t.Errorf("%d of %d keys done, %d dead: want all done", tally.Done, tally.Accepted, tally.Dead)
	}
	if tally.Calls != tally.Done {
		t.Errorf("%d destination calls for %d done keys: want one each", tally.Calls, tally.Done)
	}
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
	deliveries, rate, kills := envInt(t, "HOOKLINE_E2E_DELIVERIES", 100000), 1000.0, envInt(t, "HOOKLINE_E2E_KILLS", 10)
	const batch = 64 // a processor kill repeats at most one batch of calls
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	failSome(sys.Dest, 0.1)
	svcs := map[string]*e2e.Service{
		"ingest":    sys.StartIngest(),
		"processor": sys.StartProcessor("p1", map[string]string{"HOOKLINE_MAX_INFLIGHT": fmt.Sprint(batch), "HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch)}),
		"retrier":   sys.StartRetrier(nil),
	}
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: deliveries, Rate: rate, Duplicates: 0.1})

	// 3×kills moments spread over the flow's planned duration, in random
	// order of services.
	var order []string
	for i := 0; i < kills; i++ {
		order = append(order, "processor", "retrier", "ingest")
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	planned := time.Duration(float64(deliveries) / rate * float64(time.Second))
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
	flow.Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{Timeout: 5 * time.Minute, ExtraCalls: kills * batch})
}
