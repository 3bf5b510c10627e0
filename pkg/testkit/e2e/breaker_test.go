package e2e_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestOpenBreakerParksForTwoMinutes: github's destination answers 503 for
// two minutes while github and stripe deliveries flow, on a 1s,2s tier
// schedule. Once its breaker opens, github's records wait in its lane
// instead of cycling through the tiers: the only github records in a tier
// are those whose call was really made and failed (the calls that opened
// the breaker and one probe per cool-down), each with its error. When the
// destination is back, a probe closes the breaker, the lane drains, and
// every delivery ends done; stripe never notices.
func TestOpenBreakerParksForTwoMinutes(t *testing.T) {
	skipShort(t)
	// Mostly waiting at 10-20 deliveries/s: it runs beside the other
	// quiet scenario only, after the loaded ones (quietParallel).
	quietParallel(t)
	const (
		outage   = 2 * time.Minute
		cooldown = 10 * time.Second
		failures = 5
	)
	sys := e2e.New(t, e2e.Options{Partitions: 6, Tiers: "1s,2s"})
	var (
		mu     sync.Mutex
		until  time.Time
		failed int
	)
	sys.Dest.Behave(func(key string, _ int) int {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(key, "github:") && time.Now().Before(until) {
			failed++
			return 503
		}
		return 200
	})
	sys.StartIngest()
	sys.StartRetrier(nil)
	sys.StartProcessor("p1", map[string]string{"HOOKLINE_BREAKER_FAILURES": "5", "HOOKLINE_BREAKER_COOLDOWN": cooldown.String()})
	both := []string{"stripe", "github"}
	sys.StartFlow(e2e.FlowOptions{Deliveries: 40, Rate: 40, Providers: both, ID: "warm"}).Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	mu.Lock()
	until = time.Now().Add(outage)
	mu.Unlock()
	tiers := sys.Read(sys.Names.Retry...)
	sys.StartFlow(e2e.FlowOptions{Deliveries: 1300, Rate: 10, Providers: both, ID: "outage"}).Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, Timeout: 3 * time.Minute})

	mu.Lock()
	calledAndFailed := failed
	mu.Unlock()
	var inTiers int
	// One tier record per failed call: wait for them, then a little more
	// for any that should not be there.
	tiers.Until(30*time.Second, "a tier record for each failed call", func(rs []*kgo.Record) bool { return len(rs) >= calledAndFailed })
	more := time.Now().Add(3 * time.Second)
	recs := tiers.Until(10*time.Second, "the tier records", func([]*kgo.Record) bool { return time.Now().After(more) })
	for _, r := range recs {
		if !strings.HasPrefix(string(r.Key), "github:") {
			t.Errorf("%s in a retry tier: only github failed", r.Key)
			continue
		}
		inTiers++
		attempt, _ := headers.GetAttempt(r)
		es, _ := headers.GetErrors(r)
		if len(es) != attempt-1 || attempt < 2 {
			t.Errorf("%s in a tier for attempt %d with %d errors: a record reached a tier without a call", r.Key, attempt, len(es))
		}
	}
	maxFailed := failures + int(outage/cooldown) + 2
	t.Logf("github down %s (breaker after %d failures, cool-down %s): %d calls failed, %d records in the retry tiers, %d parked outcomes",
		outage, failures, cooldown, calledAndFailed, inTiers, sys.Ledger().Parked())
	if inTiers != calledAndFailed || calledAndFailed > maxFailed {
		t.Errorf("%d github records in the tiers for %d failed calls (at most %d: the opening failures and one probe per cool-down); want one per failed call",
			inTiers, calledAndFailed, maxFailed)
	}
}
