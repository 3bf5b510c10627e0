package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// traceOf runs `dlq trace KEY --json` and returns its steps and the final
// trace line.
func traceOf(t *testing.T, sys *e2e.System, extra map[string]string, key string) ([]map[string]any, map[string]any) {
	t.Helper()
	lines := sys.DLQ(extra, "trace", key, "--json").Want(t, 0).JSONLines(t)
	last := lines[len(lines)-1]
	if last["kind"] != "trace" {
		t.Fatalf("last line of dlq trace --json is %v, want the trace", last)
	}
	return lines[:len(lines)-1], last
}

// outcomesOf lists the statuses of a trace's outcome steps, with their
// attempt and error.
func outcomesOf(steps []map[string]any) []string {
	var out []string
	for _, s := range steps {
		if s["kind"] == "outcome" {
			e, _ := s["error"].(string)
			out = append(out, fmt.Sprintf("%v@%v:%v", s["status"], s["attempt"], e != ""))
		}
	}
	return out
}

// waitTrace runs dlq trace until cond holds on its final line (30 s).
func waitTrace(t *testing.T, sys *e2e.System, extra map[string]string, key string, what string, cond func(steps []map[string]any, tr map[string]any) bool) ([]map[string]any, map[string]any) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r := sys.DLQ(extra, "trace", key, "--json"); r.Code == 0 {
			lines := r.JSONLines(t)
			steps, tr := lines[:len(lines)-1], lines[len(lines)-1]
			if cond(steps, tr) {
				return steps, tr
			}
		} else if r.Code != 2 { // 2: not in the topics yet
			t.Fatalf("dlq trace %s: exit %d: %s", key, r.Code, r.Stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace of %s: %s never held", key, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestTraceAndParked (issue 13, items 1 and 2) against the real services:
// a key that fails twice with 503 and then succeeds, a permanent failure
// resolved by an operator, a key that waits in the long tier, a record
// parked in a paused provider's lane, and a key never sent. dlq trace, GET
// /events/{key}, dlq parked, GET /parked and the oldest-age gauge.
func TestTraceAndParked(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,1h", Env: map[string]string{"HOOKLINE_BREAKER_FAILURES": "100"}})
	const (
		flaky = "stripe:evt_tr_flaky"
		perm  = "stripe:evt_tr_perm"
		long  = "stripe:evt_tr_long"
		paus  = "github:tr-paused-1"
	)
	sys.Dest.Behave(func(key string, call int) int {
		switch {
		case key == flaky && call <= 2, key == long:
			return 503
		case key == perm:
			return 400
		}
		return 200
	})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	sys.StartRetrier(nil)
	sys.DLQ(asTester, "provider", "pause", "github").Want(t, 0)

	for _, id := range []string{"evt_tr_flaky", "evt_tr_perm", "evt_tr_long"} {
		if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
			t.Fatalf("post %s: %d %v", id, code, err)
		}
	}
	if a, err := sys.Send(e2e.NewEvent("github", "tr-paused-1")); err != nil || a.Status != 202 {
		t.Fatalf("post github: %+v %v", a, err)
	}

	// 1. failed twice (503), then done.
	steps, tr := waitTrace(t, sys, nil, flaky, "done", func(_ []map[string]any, tr map[string]any) bool {
		return tr["now"].(map[string]any)["state"] == "done"
	})
	if got, want := strings.Join(outcomesOf(steps), " "), "retrying@1:true retrying@2:true done@3:false"; got != want {
		t.Fatalf("outcomes of %s: %s, want %s", flaky, got, want)
	}
	var kinds []string
	for _, s := range steps {
		kinds = append(kinds, s["kind"].(string))
		if s["kind"] == "waiting" && (s["tier"] == "" || s["due_at"] == "") {
			t.Fatalf("waiting step without tier or due time: %v", s)
		}
		if s["kind"] == "accepted" && (s["request_id"] == nil || s["received_at"] == nil || s["origin"] != "ingest") {
			t.Fatalf("accepted step without request id, received-at or origin: %v", s)
		}
	}
	for _, want := range []string{"accepted", "waiting", "retried"} {
		if !strings.Contains(strings.Join(kinds, " "), want) {
			t.Fatalf("steps of %s: %v, want a %s step", flaky, kinds, want)
		}
	}
	if tr["accepted"] != 1.0 || tr["attempts"] != 3.0 {
		t.Fatalf("trace of %s: accepted %v attempts %v, want 1, 3", flaky, tr["accepted"], tr["attempts"])
	}
	// The same delivery again is a duplicate, counted.
	if code, err := sys.Post("stripe", e2e.StripeEvent("evt_tr_flaky")); err != nil || code != 202 {
		t.Fatalf("re-post: %d %v", code, err)
	}
	waitTrace(t, sys, nil, flaky, "one duplicate", func(_ []map[string]any, tr map[string]any) bool {
		return tr["duplicates"] == 1.0 && tr["accepted"] == 2.0
	})

	// The table form says the same.
	table := sys.DLQ(nil, "trace", flaky).Want(t, 0).Stdout
	t.Logf("dlq trace %s:\n%s", flaky, table)
	for _, want := range []string{"done at", "retrying", "to tier 1s", "tier 2s, due", "HTTP 503"} {
		if !strings.Contains(table, want) {
			t.Fatalf("dlq trace %s does not say %q:\n%s", flaky, want, table)
		}
	}

	// 2. A permanent failure shows its DLQ ref; resolved, the resolution and who.
	_, tr = waitTrace(t, sys, nil, perm, "dead", func(_ []map[string]any, tr map[string]any) bool {
		return tr["now"].(map[string]any)["state"] == "dead"
	})
	ref, _ := tr["now"].(map[string]any)["ref"].(string)
	if ref == "" {
		t.Fatalf("dead key without a DLQ ref: %v", tr)
	}
	sys.DLQ(asTester, "resolve", ref, "--resolution", "ignored", "--note", "trace test").Want(t, 0)
	steps, _ = waitTrace(t, sys, nil, perm, "resolved", func(steps []map[string]any, _ map[string]any) bool {
		for _, s := range steps {
			if rs, ok := s["resolution"].(map[string]any); ok && s["ref"] == ref {
				return rs["resolution"] == "ignored" && rs["by"] == "tester"
			}
		}
		return false
	})
	_ = steps

	// 3. Where it waits: the long tier, with its due time.
	_, tr = waitTrace(t, sys, nil, long, "waiting in 1h", func(_ []map[string]any, tr map[string]any) bool {
		now := tr["now"].(map[string]any)
		return now["state"] == "waiting" && now["tier"] == "1h" && now["due_at"] != nil
	})
	due := tr["now"].(map[string]any)["due_at"].(string)
	// ... and the paused provider's record, parked in its lane.
	waitTrace(t, sys, nil, paus, "parked", func(_ []map[string]any, tr map[string]any) bool {
		now := tr["now"].(map[string]any)
		return now["state"] == "parked" && strings.HasSuffix(fmt.Sprint(now["lane"]), "webhooks.lane.github")
	})

	// 4. A key never sent: exit 2 with a clear message.
	r := sys.DLQ(nil, "trace", "stripe:evt_never_sent").Want(t, 2)
	if !strings.Contains(r.Stderr, "no record of this key") {
		t.Fatalf("unknown key: stderr %q", r.Stderr)
	}

	// dlq parked: the long tier's record with its due time, the lane's record.
	lines := sys.DLQ(nil, "parked", "--json").Want(t, 0).JSONLines(t)
	rep := lines[0]
	if rep["total"] != 2.0 {
		t.Fatalf("dlq parked: total %v, want 2 (1h tier and github's lane): %v", rep["total"], lines)
	}
	var sawLong, sawLane bool
	for _, l := range lines[1:] {
		switch {
		case l["key"] == long && l["tier"] == "1h" && l["due_at"] == due:
			sawLong = true
		case l["key"] == paus && l["tier"] == "lane" && l["provider"] == "github":
			sawLane = true
		}
	}
	if !sawLong || !sawLane {
		t.Fatalf("dlq parked lists %v; want %s in 1h due %s and %s in github's lane", lines[1:], long, due, paus)
	}
	only := sys.DLQ(nil, "parked", "--tier", "1h", "--json").Want(t, 0).JSONLines(t)
	if only[0]["total"] != 1.0 || len(only) != 2 || only[1]["key"] != long {
		t.Fatalf("dlq parked --tier 1h: %v", only)
	}
	if page := sys.DLQ(nil, "parked", "--limit", "1", "--offset", "1", "--json").Want(t, 0).JSONLines(t); len(page) != 2 || page[0]["total"] != 2.0 {
		t.Fatalf("dlq parked --limit 1 --offset 1: %v, want the report and one record", page)
	}
	out := sys.DLQ(nil, "parked").Want(t, 0).Stdout
	t.Logf("dlq parked:\n%s", out)
	if !strings.Contains(out, due) || !strings.Contains(out, "when its destination has room") {
		t.Fatalf("dlq parked table lacks the due time %s or the lane's wait:\n%s", due, out)
	}

	// dlq serve: GET /events/{key} (token required), GET /parked, the gauge.
	svc := sys.StartDLQServe(adminToken, map[string]string{"HOOKLINE_DLQ_METRICS_INTERVAL": "500ms"})
	base := "http://" + svc.Addr
	if code, _, _ := call(t, "GET", base+"/events/"+flaky, "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /events without a token: %d, want 401", code)
	}
	if code, _, _ := call(t, "GET", base+"/parked", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /parked without a token: %d, want 401", code)
	}
	var got struct {
		Key string `json:"key"`
		Now struct {
			State string `json:"state"`
		} `json:"now"`
		Attempts int `json:"attempts"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, body := call(t, "GET", base+"/events/"+flaky, "Bearer "+adminToken, nil)
		if code == http.StatusOK {
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Now.State == "done" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /events/%s: %d %s", flaky, code, body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if got.Key != flaky || got.Attempts != 3 {
		t.Fatalf("GET /events/%s: %+v", flaky, got)
	}
	if code, _, body := call(t, "GET", base+"/events/stripe:evt_never_sent", "Bearer "+adminToken, nil); code != http.StatusNotFound {
		t.Fatalf("GET /events of an unknown key: %d %s, want 404", code, body)
	}
	// While serve holds the index, dlq trace asks it.
	remote := map[string]string{"HOOKLINE_ADMIN_ADDR": svc.Addr, "HOOKLINE_ADMIN_TOKEN": adminToken}
	if _, tr := traceOf(t, sys, remote, flaky); tr["now"].(map[string]any)["state"] != "done" {
		t.Fatalf("dlq trace through serve: %v", tr)
	}
	code, _, body := call(t, "GET", base+"/parked?tier=lane", "Bearer "+adminToken, nil)
	var pr struct {
		Total  int `json:"total"`
		Oldest struct {
			Key      string    `json:"key"`
			ParkedAt time.Time `json:"parked_at"`
		} `json:"oldest"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &pr) != nil || pr.Total != 1 || pr.Oldest.Key != paus {
		t.Fatalf("GET /parked?tier=lane: %d %s", code, body)
	}
	code, _, body = call(t, "GET", base+"/parked?tier=1h", "Bearer "+adminToken, nil)
	if code != http.StatusOK || json.Unmarshal(body, &pr) != nil || pr.Total != 1 || pr.Oldest.Key != long {
		t.Fatalf("GET /parked?tier=1h: %d %s", code, body)
	}
	// The gauge for the 1h tier matches the oldest record's age.
	deadline = time.Now().Add(30 * time.Second)
	for {
		age, err := loadtest.CounterSum(t.Context(), base+"/metrics", `hookline_dlq_parked_oldest_age_seconds{tier="1h"}`)
		want := time.Since(pr.Oldest.ParkedAt).Seconds()
		if err == nil && age > 0 && math.Abs(age-want) < 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hookline_dlq_parked_oldest_age_seconds{tier=\"1h\"} = %v (%v), want about %.1f", age, err, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
