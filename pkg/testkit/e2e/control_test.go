package e2e_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// callLog records when the destination was called, per provider (the key's
// namespace).
type callLog struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (c *callLog) called(key string, at time.Time) {
	prov, _, _ := strings.Cut(key, ":")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[prov] = append(c.at[prov], at)
}

// between counts a provider's calls in [from, to).
func (c *callLog) between(prov string, from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.at[prov] {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// since returns a provider's call times from from on.
func (c *callLog) since(prov string, from time.Time) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.at[prov] {
		if !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}

// TestPauseResumeDrainUnderFlow: an operator pauses github for 60 s while
// github and stripe deliveries flow: github's destination gets no call
// meanwhile (its records wait, parked in its lane), stripe's keeps flowing;
// after the resume every delivery ends done. Then github is paused again,
// 300 deliveries wait, and a drain at 20/s calls them within 10 % of that
// rate. The settings go through the control topic, as `dlq provider` writes
// them.
func TestPauseResumeDrainUnderFlow(t *testing.T) {
	skipShort(t)
	// Mostly waiting at 10-20 deliveries/s: it runs beside the other
	// quiet scenario only, after the loaded ones (quietParallel).
	quietParallel(t)
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	calls := &callLog{at: map[string][]time.Time{}}
	sys.Dest.OnCall(calls.called)
	sys.StartIngest()
	sys.StartRetrier(nil)
	sys.StartProcessor("p1", nil)
	cl := kafkatest.Client(t, sys.Brokers)
	set := func(s control.Setting) {
		t.Helper()
		s.By, s.At = "e2e", time.Now()
		if err := control.Write(context.Background(), cl, sys.Names.Control, s); err != nil {
			t.Fatal(err)
		}
	}
	both := []string{"stripe", "github"}
	sys.StartFlow(e2e.FlowOptions{Deliveries: 40, Rate: 40, Providers: both, ID: "warm"}).Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	set(control.Setting{Provider: "github", Paused: true})
	// The processor follows the control topic within a fetch (≤ 0.5 s);
	// calls already in flight then may still end.
	quietFrom := time.Now().Add(time.Second)
	sys.StartFlow(e2e.FlowOptions{Deliveries: 1200, Rate: 20, Providers: both, ID: "paused"}).Wait()
	resumedAt := time.Now()
	paused, others := calls.between("github", quietFrom, resumedAt), calls.between("stripe", quietFrom, resumedAt)
	t.Logf("paused %.0fs under flow: github %d calls, stripe %d calls", resumedAt.Sub(quietFrom).Seconds(), paused, others)
	if paused != 0 || others < 500 {
		t.Errorf("while github was paused: %d github calls (want 0), %d stripe calls (want its ~600)", paused, others)
	}
	set(control.Setting{Provider: "github"})
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})
	t.Logf("resumed: every delivery done %.1fs after the resume", time.Since(resumedAt).Seconds())

	// Drain: 300 github deliveries wait, then 20/s.
	set(control.Setting{Provider: "github", Paused: true})
	time.Sleep(time.Second)
	sys.StartFlow(e2e.FlowOptions{Deliveries: 300, Rate: 100, Providers: []string{"github"}, ID: "drain"}).Wait()
	time.Sleep(2 * time.Second) // every one parked
	drainAt := time.Now()
	set(control.Setting{Provider: "github", Rate: 20})
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})
	got := calls.since("github", drainAt)
	if len(got) < 300 {
		t.Fatalf("%d github calls after the drain started, want 300", len(got))
	}
	rate := float64(len(got)-1) / got[len(got)-1].Sub(got[0]).Seconds()
	t.Logf("drain asked 20/s: %d calls at %.2f/s", len(got), rate)
	if rate < 18 || rate > 22 {
		t.Errorf("drain rate %.2f/s, want 20/s within 10%%", rate)
	}
	set(control.Setting{Provider: "github"})
}
