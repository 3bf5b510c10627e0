package e2e_test

import (
	"testing"

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
