package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// holdProvider is a generic provider keyed by the body's id whose
// destination waits up to a minute, so calls held by the test stay in
// flight while dlq status reads.
func holdProvider(dest, secretEnv string) string {
	return fmt.Sprintf(`  hold:
    preset: generic
    secret_env: [%s]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: /id}
    destination: {url: %q, timeout: 60s}
`, secretEnv, dest)
}

// statusUntil runs dlq status --json with env until ok says yes, for up to
// 30s, and reports the last report it saw.
func statusUntil(t *testing.T, sys *e2e.System, env map[string]string, what string, ok func(status.Report) bool) status.Report {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run := sys.DLQ(env, "status", "--json").Want(t, 0)
		var rep status.Report
		if err := json.Unmarshal([]byte(run.Stdout), &rep); err != nil {
			t.Fatalf("dlq status --json: %v\n%s", err, run.Stdout)
		}
		if ok(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("dlq status: want %s; last report: totals %+v, in flight %v, processors %+v, reasons %q",
				what, rep.Totals.Counts, rep.Totals.InFlight, rep.Processors, rep.Reasons)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// TestStatusInFlightAndCompleted (issue 32, item 7): with
// HOOKLINE_PROCESSOR_METRICS naming the processor's /metrics, dlq status
// counts the records the processor holds in calls as in flight (2 held at
// the destination: in flight 2) and the deliveries it completed since it
// started (4, then 6 once the held ones are let go, in flight 0), equal
// per route to the done outcomes on webhooks.outcomes; without the
// variable both are null.
func TestStatusInFlightAndCompleted(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Partitions: 2, Providers: holdProvider})
	sys.EnsureTopics()
	release := make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	sys.Dest.OnCall(func(key string, _ time.Time) {
		if strings.Contains(key, "held") {
			<-release
		}
	})
	sys.StartIngest()
	proc := sys.StartProcessor("p1", nil)
	env := map[string]string{"HOOKLINE_PROCESSOR_METRICS": "http://" + proc.Addr + "/metrics"}
	outcomes := sys.Read(sys.Names.Outcomes)
	post := func(id string) {
		t.Helper()
		if code, err := sys.Post("hold", []byte(`{"id":"`+id+`"}`)); err != nil || code != 202 {
			t.Fatalf("post %s: %d %v", id, code, err)
		}
	}
	doneKeys := func(n int) {
		t.Helper()
		outcomes.Until(60*time.Second, fmt.Sprintf("%d done outcomes", n), func(rs []*kgo.Record) bool {
			done := 0
			for _, r := range rs {
				if strings.Contains(string(r.Value), `"status":"done"`) {
					done++
				}
			}
			return done >= n
		})
	}

	for i := range 4 {
		post(fmt.Sprintf("ok-%d", i))
	}
	doneKeys(4)
	waitLag(t, sys, 0)
	for i := range 2 {
		post(fmt.Sprintf("held-%d", i))
	}
	deadline := time.Now().Add(60 * time.Second)
	for sys.Dest.Inflight() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("calls in flight at the destination: %d, want the 2 held", sys.Dest.Inflight())
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep := statusUntil(t, sys, env, "2 in flight, 4 completed", func(r status.Report) bool {
		return intOr(r.Totals.InFlight) == 2 && intOr(r.Totals.Completed) == 4
	})
	if len(rep.Processors) != 1 || rep.Processors[0].Error != "" || rep.Processors[0].StartedAt == nil || rep.Totals.CompletedSince == nil {
		t.Errorf("processors %+v, completed since %v: want the one processor, read, with its start", rep.Processors, rep.Totals.CompletedSince)
	}
	if rep.Raw.Lag < 2 {
		t.Errorf("raw lag %d with 2 records in flight: the lag counts them too", rep.Raw.Lag)
	}

	letGo()
	doneKeys(6)
	waitLag(t, sys, 0)
	rep = statusUntil(t, sys, env, "0 in flight, 6 completed", func(r status.Report) bool {
		return intOr(r.Totals.InFlight) == 0 && intOr(r.Totals.Completed) == 6
	})
	got := readTopics(t, sys)
	for _, p := range rep.Providers {
		for _, r := range p.Routes {
			if w := got.done[place{p.Provider, r.Route}]; intOr(r.Completed) != w {
				t.Errorf("%s/%s: completed %d, webhooks.outcomes holds %d done", p.Provider, r.Route, intOr(r.Completed), w)
			}
		}
	}
	if sum(got.done) != 6 {
		t.Errorf("webhooks.outcomes holds %d done, want 6", sum(got.done))
	}
	table := sys.DLQ(env, "status").Want(t, 0).Stdout
	if !strings.Contains(table, "processors (1 read): 0 in flight; 6 completed since ") {
		t.Errorf("dlq status does not say in flight and completed:\n%s", table)
	}

	rep = statusReport(t, sys)
	if rep.Totals.InFlight != nil || rep.Totals.Completed != nil || len(rep.Processors) != 0 {
		t.Errorf("without HOOKLINE_PROCESSOR_METRICS: in flight %v, completed %v, processors %v; want null, null, none",
			rep.Totals.InFlight, rep.Totals.Completed, rep.Processors)
	}
}
