package main

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// TestServeMetrics: `dlq serve` answers /metrics without the token, with the
// entries, unresolved entries and the oldest unresolved entry's age that
// `dlq stats` reports, and follows new dead letters and resolutions.
func TestServeMetrics(t *testing.T) {
	skipShort(t)
	sys, recs := withEntries(t,
		dead{"stripe", "evt_m_a", headers.DeadPermanent, 3 * time.Hour},
		dead{"stripe", "evt_m_b", headers.DeadExhausted, 2 * time.Hour},
		dead{"github", "evt_m_c", headers.DeadPermanent, time.Hour},
	)
	svc := sys.StartDLQServe(adminToken, map[string]string{"HOOKLINE_DLQ_METRICS_INTERVAL": "500ms"})
	url := "http://" + svc.Addr + "/metrics"

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics without a token: %s %s, want 200 text", resp.Status, resp.Header.Get("Content-Type"))
	}
	metric := func(name string) float64 {
		t.Helper()
		v, err := loadtest.CounterSum(t.Context(), url, name)
		if err != nil {
			t.Fatalf("scrape %s: %v", name, err)
		}
		return v
	}
	// until waits up to 30 s for the DLQ gauges to read entries, unresolved.
	until := func(entries, unresolved float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			e, u := metric("hookline_dlq_entries"), metric("hookline_dlq_unresolved_entries")
			if e == entries && u == unresolved && metric("hookline_dlq_tally_timestamp_seconds") > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("hookline_dlq_entries %v, hookline_dlq_unresolved_entries %v; want %v, %v", e, u, entries, unresolved)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	until(3, 3)
	stats := sys.DLQ(nil, "stats", "--json").Want(t, 0).JSONLines(t)[0]
	if stats["total"] != 3.0 || stats["unresolved"] != 3.0 {
		t.Fatalf("dlq stats %v disagrees with the metrics (3, 3)", stats)
	}
	wantAge := time.Since(recs[0].Timestamp).Seconds()
	if age := metric("hookline_dlq_oldest_unresolved_age_seconds"); math.Abs(age-wantAge) > 5 {
		t.Fatalf("oldest unresolved age %.1fs, want about %.1fs (entry %s)", age, wantAge, refOf(recs[0]))
	}
	if tally := metric("hookline_dlq_tally_timestamp_seconds"); math.Abs(tally-float64(time.Now().Unix())) > 10 {
		t.Fatalf("tally time %v is not recent", tally)
	}

	// Resolve the oldest; two more dead letters arrive.
	sys.DLQ(asTester, "resolve", refOf(recs[0]), "--resolution", "ignored", "--note", "metrics test").Want(t, 0)
	now := time.Now()
	produceDead(t, sys, []*kgo.Record{
		deadRecord(sys.Names.DLQ, "stripe", "evt_m_d", headers.DeadPermanent, now),
		deadRecord(sys.Names.DLQ, "stripe", "evt_m_e", headers.DeadPermanent, now),
	})
	until(5, 4)
	wantAge = time.Since(recs[1].Timestamp).Seconds()
	if age := metric("hookline_dlq_oldest_unresolved_age_seconds"); math.Abs(age-wantAge) > 5 {
		t.Fatalf("after resolving %s: oldest unresolved age %.1fs, want about %.1fs (%s)", refOf(recs[0]), age, wantAge, refOf(recs[1]))
	}

	// The rest of the API still needs the token.
	code, _, _ := call(t, "GET", "http://"+svc.Addr+"/dlq/stats", "", nil)
	if code != http.StatusUnauthorized {
		t.Fatalf("GET /dlq/stats without a token: %d, want 401", code)
	}
}
