package consume

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// TestRestartStartsFromTheKeptLimit: a processor starting under instance
// id p1 starts slowcrm's adaptive limit from the limit p1 reported on the
// control topic last (50 of max_inflight 64, not its earlier 20 nor the
// slow start's 4);
// another instance's report, and fastpay's too old one, are not used.
func TestRestartStartsFromTheKeptLimit(t *testing.T) {
	f := newFakeKafka(t)
	cl := f.client(t)
	now := time.Now()
	for _, l := range []control.Limit{
		{Provider: "slowcrm", Route: "default", Instance: "p2", Limit: 30, At: now},
		{Provider: "slowcrm", Route: "default", Instance: "p1", Limit: 20, At: now.Add(-2 * time.Minute)},
		{Provider: "slowcrm", Route: "default", Instance: "p1", Limit: 50, At: now.Add(-time.Minute)},
		{Provider: "fastpay", Route: "default", Instance: "p1", Limit: 40, At: now.Add(-2 * control.LimitKeptFor)},
	} {
		r, err := control.LimitRecord(f.names.Control, l)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"slowcrm": &counter{}, "fastpay": &counter{}}, procOptions{metrics: reg, providersYAML: `providers:
  slowcrm: {preset: stripe, secret_env: [S], destination: {url: "http://slowcrm.invalid/", max_inflight: 64}}
  fastpay: {preset: stripe, secret_env: [S], destination: {url: "http://fastpay.invalid/", max_inflight: 64}}
`})
	limitOf := func(provider string) float64 {
		return gaugeOf(t, reg, "hookline_processor_destination_concurrency_limit", provider)
	}
	waitFor(t, "slowcrm's limit at the kept 50", func() bool { return limitOf("slowcrm") == 50 })
	if got := limitOf("fastpay"); got != 4 {
		t.Errorf("fastpay's limit %v, want the slow start's 4: its kept report is older than %s", got, control.LimitKeptFor)
	}
}

// TestLimitDue: a limit is written the first time, when it moved by a
// tenth of the one written last (either way), a smaller move once
// limitRefresh passed, and an unchanged limit once limitKeepAlive passed
// (so that a running instance's report never looks stale).
func TestLimitDue(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		n, sent int
		after   time.Duration
		want    bool
	}{
		{4, 0, 0, true},
		{8, 4, time.Second, true},
		{40, 40, limitKeepAlive - time.Second, false},
		{40, 40, limitKeepAlive, true},
		{43, 40, time.Second, false},
		{44, 40, time.Second, true},
		{36, 40, time.Second, true},
		{43, 40, limitRefresh, true},
		{2, 1, time.Second, true},
	} {
		if got := limitDue(tc.n, tc.sent, t0, t0.Add(tc.after)); got != tc.want {
			t.Errorf("limit %d, %d written %s before: due %v, want %v", tc.n, tc.sent, tc.after, got, tc.want)
		}
	}
}

// TestStaleLimitReportsDeleted: a processor deletes (tombstones) the
// limit reports older than control.LimitKeptFor that it reads on the
// control topic, another instance's and its own of a route no longer in
// the file, and leaves the fresh ones alone.
func TestStaleLimitReportsDeleted(t *testing.T) {
	f := newFakeKafka(t)
	cl := f.client(t)
	now := time.Now()
	stale := []control.Limit{
		{Provider: "slowcrm", Route: "default", Instance: "gone", Limit: 30, At: now.Add(-2 * control.LimitKeptFor)},
		{Provider: "slowcrm", Route: "removed", Instance: "p1", Limit: 12, At: now.Add(-control.LimitKeptFor - time.Minute)},
	}
	fresh := []control.Limit{
		{Provider: "slowcrm", Route: "default", Instance: "p2", Limit: 20, At: now.Add(-time.Minute)},
		// Stale once, then written again by its instance: kept.
		{Provider: "slowcrm", Route: "default", Instance: "p3", Limit: 9, At: now.Add(-2 * control.LimitKeptFor)},
		{Provider: "slowcrm", Route: "default", Instance: "p3", Limit: 10, At: now},
	}
	for _, l := range append(slices.Clone(stale), fresh...) {
		r, err := control.LimitRecord(f.names.Control, l)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"slowcrm": &counter{}}, procOptions{providersYAML: `providers:
  slowcrm: {preset: stripe, secret_env: [S], destination: {url: "http://slowcrm.invalid/", max_inflight: 64}}
`})
	latest := func() map[string][]byte {
		m := map[string][]byte{}
		for _, r := range f.readCommitted(t, f.names.Control) {
			m[string(r.Key)] = r.Value
		}
		return m
	}
	key := func(l control.Limit) string {
		return "limit:" + l.Provider + "/" + l.Route + ":" + l.Instance
	}
	var seen map[string][]byte
	waitFor(t, "tombstones for both stale reports", func() bool {
		seen = latest()
		for _, l := range stale {
			if v, ok := seen[key(l)]; !ok || v != nil {
				return false
			}
		}
		return true
	})
	for _, l := range fresh {
		if seen[key(l)] == nil {
			t.Errorf("%s deleted; it is fresh", key(l))
		}
	}
}
