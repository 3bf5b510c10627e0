package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// backfillProviders is provider bf (keyed by the body's id, typed by its
// type) with the route orders (order.*) and, once crm is set, the route
// crm (every event) added since.
func backfillProviders(crm bool) func(dest, secretEnv string) string {
	return func(dest, secretEnv string) string {
		s := fmt.Sprintf(`  bf:
    preset: generic
    secret_env: [%s]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: /id}
    event_type: {json: /type}
    routes:
      orders: {events: [order.*], destination: {url: %q, timeout: 5s}}
`, secretEnv, dest+"/orders")
		if crm {
			s += fmt.Sprintf("      crm: {destination: {url: %q, timeout: 5s}}\n", dest+"/crm")
		}
		return s
	}
}

// TestBackfillRoute (issue 24, item 3): events accepted before the route
// crm existed are backfilled to it: each key once, the sibling route
// orders nothing more; the same backfill again calls nobody; --again
// calls each once more, once per backfill id; --dry-run counts what kcat
// reads from webhooks.raw. HOOKLINE_BACKFILL_TEST_EVENTS (default 200) and
// HOOKLINE_BACKFILL_TEST_RATE (events a second, default 0: as fast as
// ingest answers) size it: 5000 at 20 is issue 24's "5,000 accepted events
// over several minutes".
func TestBackfillRoute(t *testing.T) {
	skipShort(t)
	n, perSecond := e2e.EnvCount(t, "HOOKLINE_BACKFILL_TEST_EVENTS", 200, 1), e2e.EnvCount(t, "HOOKLINE_BACKFILL_TEST_RATE", 0, 0)
	sys := e2e.New(t, e2e.Options{Providers: backfillProviders(false)})
	sys.StartIngest()
	p1 := sys.StartProcessor("p1", nil)
	start := time.Now().Add(-time.Second)

	orders := 0
	for i := range n {
		if perSecond > 0 {
			time.Sleep(time.Until(start.Add(time.Second + time.Duration(i)*time.Second/time.Duration(perSecond))))
		}
		typ := "invoice.paid"
		if i%2 == 0 {
			typ, orders = "order.created", orders+1
		}
		ev := e2e.Event{Provider: "bf", Body: []byte(fmt.Sprintf(`{"id":"bf-%05d","type":%q}`, i, typ)), Header: http.Header{"Content-Type": {"application/json"}}}
		if a, err := sys.Send(ev); err != nil || a.Status != 202 {
			t.Fatalf("post %d: %+v %v", i, a, err)
		}
	}
	outcomes := sys.Read(sys.Names.Outcomes)
	settled := func(what string, want int, match func(o outcome.Outcome) bool) {
		t.Helper()
		outcomes.Until(90*time.Second, what, func(rs []*kgo.Record) bool {
			got := 0
			for _, r := range rs {
				if o, err := outcome.Decode(r.Value); err == nil && match(o) {
					got++
				}
			}
			return got >= want
		})
	}
	settled("the outcomes of every accepted event", n, func(o outcome.Outcome) bool { return o.Origin == headers.OriginIngest })
	if got := len(sys.Dest.RouteCalls("orders")); got != orders {
		t.Fatalf("route orders called for %d keys, want %d", got, orders)
	}

	// The route crm is added: the processor restarts with it.
	p1.Stop(t)
	pf := filepath.Join(sys.Dir, "providers.yaml")
	b, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pf, []byte(strings.Replace(string(b), backfillProviders(false)(sys.Dest.URL(), "E2E_SECRET"), backfillProviders(true)(sys.Dest.URL(), "E2E_SECRET"), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	sys.StartProcessor("p1", nil)
	since := start.UTC().Format(time.RFC3339Nano)

	// --dry-run counts what kcat reads: bf's records accepted by ingest.
	dry := backfillReport(t, sys.DLQ(nil, "backfill", "bf/crm", "--since", since, "--dry-run", "--json").Want(t, 0))
	if kcat, err := exec.LookPath("kcat"); err == nil {
		out := runOut(t, kcat, "-C", "-b", sys.Brokers[0], "-t", sys.Names.Raw, "-e", "-q", "-X", "isolation.level=read_committed",
			"-f", "%h\n")
		read := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, headers.Provider+"=bf") && strings.Contains(line, headers.Origin+"="+headers.OriginIngest) {
				read++
			}
		}
		if dry.Matched != int64(read) || read != n {
			t.Fatalf("--dry-run matched %d, kcat read %d records of bf accepted by ingest, %d were sent", dry.Matched, read, n)
		}
	} else if !t.Skipped() && os.Getenv("CI") != "" {
		t.Fatal("kcat is not installed: .ci/run installs it")
	}
	if dry.Matched != int64(n) || dry.ByEventType["order.created"] != int64(orders) || dry.Sent != 0 || !dry.DryRun {
		t.Fatalf("dry run: %+v, want %d matched (%d order.created), nothing sent", dry, n, orders)
	}
	if len(sys.Dest.RouteCalls("crm")) != 0 {
		t.Fatal("a dry run called crm")
	}

	// The backfill: crm gets every key once, orders nothing more.
	first := backfillReport(t, sys.DLQ(nil, "backfill", "bf/crm", "--since", since, "--progress", "--json").Want(t, 0))
	if first.Sent != int64(n) {
		t.Fatalf("backfill sent %d, want %d: %+v", first.Sent, n, first)
	}
	settled("crm's outcomes of the backfill", n, func(o outcome.Outcome) bool {
		return o.ReplayID == "backfill:"+first.ID && o.Status == outcome.StatusDone
	})
	checkCalls := func(when string, crmEach int) {
		t.Helper()
		crm, ord := sys.Dest.RouteCalls("crm"), sys.Dest.RouteCalls("orders")
		lost, doubled := 0, 0
		for i := range n {
			key := fmt.Sprintf("bf:bf-%05d", i)
			switch c := crm[key]; {
			case c < crmEach:
				lost++
			case c > crmEach:
				doubled++
			}
			if i%2 == 0 && ord[key] != 1 {
				doubled++
			}
		}
		t.Logf("ledger (%s): %d keys, crm %d keys × %d call, orders %d keys × 1 call: lost %d, doubled %d", when, n, len(crm), crmEach, len(ord), lost, doubled)
		if lost+doubled > 0 || len(crm) != n || len(ord) != orders {
			t.Fatalf("%s: crm calls %v, orders calls %v", when, crm, ord)
		}
	}
	checkCalls("after the backfill", 1)

	// The same backfill again: the processor skips every key.
	second := backfillReport(t, sys.DLQ(nil, "backfill", "bf/crm", "--since", since, "--json").Want(t, 0))
	settled("the second backfill's duplicates", n, func(o outcome.Outcome) bool {
		return o.ReplayID == "backfill:"+second.ID && o.Status == outcome.StatusDuplicate
	})
	checkCalls("after the same backfill again", 1)

	// --again delivers each key once more, once per id: the same id again
	// calls nobody.
	again := backfillReport(t, sys.DLQ(nil, "backfill", "bf/crm", "--since", since, "--again", "--id", "crm-lost-tuesday", "--json").Want(t, 0))
	settled("the again backfill's outcomes", n, func(o outcome.Outcome) bool {
		return o.ReplayID == "backfill:crm-lost-tuesday" && o.Status == outcome.StatusDone
	})
	backfillReport(t, sys.DLQ(nil, "backfill", "bf/crm", "--since", since, "--again", "--id", "crm-lost-tuesday", "--json").Want(t, 0))
	settled("the resumed again backfill's duplicates", n, func(o outcome.Outcome) bool {
		return o.ReplayID == "backfill:crm-lost-tuesday" && o.Status == outcome.StatusDuplicate
	})
	checkCalls("after --again twice with one id", 2)
	if again.Mode != headers.BackfillAgain {
		t.Fatalf("mode %q, want again", again.Mode)
	}

	// Usage errors are clear.
	for _, tc := range []struct{ args []string }{
		{[]string{"backfill", "bf/nope", "--since", "1h"}},
		{[]string{"backfill", "bf", "--since", "1h"}},
		{[]string{"backfill", "bf/crm"}},
		{[]string{"backfill", "bf/crm", "--since", "1h", "--id", "Bad Id"}},
	} {
		if r := sys.DLQ(nil, tc.args...); r.Code != 2 || r.Stderr == "" {
			t.Errorf("dlq %s: exit %d, stderr %q; want 2 and a message", strings.Join(tc.args, " "), r.Code, r.Stderr)
		}
	}
}

// backfillReport decodes a backfill's --json report.
func backfillReport(t *testing.T, r e2e.DLQRun) (rep struct {
	ID          string           `json:"id"`
	Mode        string           `json:"mode"`
	DryRun      bool             `json:"dry_run"`
	Matched     int64            `json:"matched"`
	Sent        int64            `json:"sent"`
	ByEventType map[string]int64 `json:"by_event_type"`
},
) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("dlq %s: %v\n%s\n%s", strings.Join(r.Args, " "), err, r.Stdout, r.Stderr)
	}
	t.Logf("dlq %s: %s", strings.Join(r.Args, " "), strings.TrimSpace(r.Stderr))
	return rep
}
