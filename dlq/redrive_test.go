package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// redriveProvider is a generic provider keyed by the body's id, delivering
// to the test destination, with redrive {after: 3s, max: 1}.
func redriveProvider(dest, secretEnv string) string {
	return fmt.Sprintf(`  redrv:
    preset: generic
    secret_env: [%s]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: /id}
    destination: {url: %q, timeout: 5s}
    redrive: {after: 3s, max: 1}
`, secretEnv, dest)
}

// TestAutoRedrive (issue 13, item 4): with tiers 1s and redrive {after: 3s,
// max: 1}, an exhausted entry is re-driven once after 3 s and ends done,
// marked replayed by auto-redrive; one whose re-drive fails again is not
// re-driven a second time; nothing is re-driven while a processor reports
// the destination's breaker open; a permanent entry never is.
func TestAutoRedrive(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1s", Providers: redriveProvider,
		Env: map[string]string{"HOOKLINE_BREAKER_FAILURES": "100"}})
	const (
		heals = "redrv:rd-heals" // fails its first two calls, then 200
		fails = "redrv:rd-fails" // always 503
		perm  = "redrv:rd-perm"  // 400: permanent
		held  = "redrv:rd-held"  // dead while the breaker is reported open
	)
	sys.Dest.Behave(func(key string, call int) int {
		switch {
		case key == heals && call <= 2, key == fails, key == held && call <= 2:
			return 503
		case key == perm:
			return 400
		}
		return 200
	})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	sys.StartRetrier(nil)

	// Another processor, "ghost", reports the destination's breaker open
	// before anything dies.
	cl := kafkatest.Client(t, sys.Brokers)
	report := func(open bool) {
		t.Helper()
		r, err := control.BreakerRecord(sys.Names.Control, control.Breaker{Provider: "redrv", Instance: "ghost", Open: open, At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	report(true)
	svc := sys.StartDLQServe(adminToken, map[string]string{"HOOKLINE_DLQ_METRICS_INTERVAL": "500ms"})
	metric := func(name string) float64 {
		t.Helper()
		v, err := loadtest.CounterSum(t.Context(), "http://"+svc.Addr+"/metrics", name, `provider="redrv"`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	post := func(id string) {
		t.Helper()
		ev := e2e.Event{Provider: "redrv", Body: []byte(fmt.Sprintf(`{"id":%q}`, id)), Header: http.Header{"Content-Type": {"application/json"}}}
		if a, err := sys.Send(ev); err != nil || a.Status != 202 {
			t.Fatalf("post %s: %+v %v", id, a, err)
		}
	}
	post("rd-held")
	post("rd-perm")
	waitTrace(t, sys, remoteEnv(svc), held, "dead", func(_ []map[string]any, tr map[string]any) bool {
		return tr["now"].(map[string]any)["state"] == "dead"
	})
	// after (3 s) plus two passes: held back by the open breaker.
	time.Sleep(5 * time.Second)
	if _, tr := traceOf(t, sys, remoteEnv(svc), held); tr["now"].(map[string]any)["resolution"] != nil || tr["replays"] != 0.0 {
		t.Fatalf("re-driven while a breaker was reported open: %v", tr)
	}
	if metric("hookline_dlq_redrive_held_total") == 0 || metric("hookline_dlq_redrives_total") != 0 {
		t.Fatalf("held %v, redrives %v: want held > 0, no re-drive", metric("hookline_dlq_redrive_held_total"), metric("hookline_dlq_redrives_total"))
	}
	report(false) // the breaker closed: held is re-driven and ends done
	post("rd-heals")
	post("rd-fails")

	// done, and its DLQ entry marked replayed by auto-redrive (the mark is
	// written after the replay, so it may show after the outcome)
	doneAndMarked := func(steps []map[string]any, tr map[string]any) bool {
		if tr["now"].(map[string]any)["state"] != "done" {
			return false
		}
		for _, s := range steps {
			if rs, ok := s["resolution"].(map[string]any); ok && rs["resolution"] == "replayed" && rs["by"] == "auto-redrive" {
				return true
			}
		}
		return false
	}
	for _, key := range []string{held, heals} {
		_, tr := waitTrace(t, sys, remoteEnv(svc), key, "done after a re-drive, marked by auto-redrive", doneAndMarked)
		if tr["replays"] != 1.0 || tr["dead_letters"] != 1.0 {
			t.Fatalf("%s: replays %v, DLQ entries %v; want 1, 1", key, tr["replays"], tr["dead_letters"])
		}
		if n := sys.Dest.Calls(key); n != 3 {
			t.Fatalf("%s: %d destination calls, want 3 (two before the DLQ, one re-driven)", key, n)
		}
	}
	// The one that fails again: re-driven once, dead again, and left there.
	_, tr := waitTrace(t, sys, remoteEnv(svc), fails, "two DLQ entries", func(_ []map[string]any, tr map[string]any) bool {
		return tr["dead_letters"] == 2.0 && tr["now"].(map[string]any)["state"] == "dead"
	})
	time.Sleep(5 * time.Second) // after plus two passes
	steps, tr := traceOf(t, sys, remoteEnv(svc), fails)
	if tr["replays"] != 1.0 || tr["dead_letters"] != 2.0 || tr["now"].(map[string]any)["resolution"] != nil {
		t.Fatalf("%s re-driven more than max (1): %v\n%v", fails, tr, steps)
	}
	if n := sys.Dest.Calls(fails); n != 4 {
		t.Fatalf("%s: %d calls, want 4 (two, then two after one re-drive)", fails, n)
	}
	// Never a permanent entry.
	if _, tr := traceOf(t, sys, remoteEnv(svc), perm); tr["replays"] != 0.0 || tr["now"].(map[string]any)["resolution"] != nil {
		t.Fatalf("permanent entry re-driven: %v", tr)
	}
	if got := metric("hookline_dlq_redrives_total"); got != 3 {
		t.Fatalf("hookline_dlq_redrives_total = %v, want 3", got)
	}
	// The processor reports its own breaker (closed) on the control topic.
	var seen bool
	sys.Read(sys.Names.Control).Until(30*time.Second, "p1's breaker report", func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if b, ok, err := control.DecodeBreaker(r); err == nil && ok && b.Instance == "p1" && b.Provider == "redrv" && !b.Open {
				seen = true
			}
		}
		return seen
	})
	var status []map[string]any
	for _, r := range sys.Read(sys.Names.DLQStatus).Until(10*time.Second, "resolutions", func(rs []*kgo.Record) bool { return len(rs) >= 3 }) {
		var m map[string]any
		_ = json.Unmarshal(r.Value, &m)
		status = append(status, m)
	}
	for _, m := range status {
		if m["by"] != "auto-redrive" || m["resolution"] != "replayed" {
			t.Fatalf("resolution %v, want replayed by auto-redrive", m)
		}
	}
}

// remoteEnv points dlq trace at a running serve (which holds the index).
func remoteEnv(svc *e2e.Service) map[string]string {
	return map[string]string{"HOOKLINE_ADMIN_ADDR": svc.Addr, "HOOKLINE_ADMIN_TOKEN": adminToken}
}
