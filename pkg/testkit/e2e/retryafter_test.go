package e2e_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestNoCallBeforeRetryAfter: the destination answers each key's first
// call 503 with a Retry-After, as delay-seconds ("2", equal to the 2s
// tier) for every other key and as an HTTP date (3 s ahead, to the second)
// for the others, after taking 300 ms: the key's next call comes no
// earlier than the date the destination named (the tier's delay counts
// from before the call, so without the date's floor a "2" would come back
// a call's time early), and every delivery ends done once.
func TestNoCallBeforeRetryAfter(t *testing.T) {
	skipShort(t)
	quietParallel(t)
	sys := e2e.New(t, e2e.Options{Partitions: 3, Tiers: "1s,2s,4s"})
	var (
		mu    sync.Mutex
		named = map[string]time.Time{} // the date named to each key
		early []string
		first int // first calls answered
	)
	sys.Dest.Delay(300 * time.Millisecond)
	sys.Dest.RetryAfter(func(key string, call int) string {
		if call != 1 {
			return ""
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		first++
		if first%2 == 0 {
			named[key] = now.Add(2 * time.Second)
			return "2"
		}
		date := now.Add(3 * time.Second).Truncate(time.Second)
		named[key] = date
		return date.UTC().Format(http.TimeFormat)
	})
	sys.Dest.Behave(func(key string, call int) int {
		if call == 1 {
			return 503
		}
		return 200
	})
	sys.Dest.OnCall(func(key string, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := named[key]; ok && at.Before(d) {
			early = append(early, key+" called "+d.Sub(at).String()+" before the date named")
		}
	})
	sys.StartIngest()
	sys.StartRetrier(nil)
	// No breaker: every first call fails, and this is about the tiers.
	sys.StartProcessor("p1", map[string]string{"HOOKLINE_BREAKER_FAILURES": "-1"})
	sys.StartFlow(e2e.FlowOptions{Deliveries: 30, Rate: 30, Providers: []string{"stripe"}, ID: "ra"}).Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, Timeout: time.Minute})

	mu.Lock()
	defer mu.Unlock()
	if len(named) == 0 {
		t.Fatal("no call was answered with a Retry-After")
	}
	for _, e := range early {
		t.Error(e)
	}
}
