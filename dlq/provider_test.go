package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// TestProviderSettings runs the dlq binary against the real broker: the
// provider commands write to webhooks.control and read it back, and a
// running `dlq serve` follows them (GET /providers, the gauges on /metrics)
// and writes its own (POST /providers/{name}/...), token required.
func TestProviderSettings(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{})
	sys.EnsureTopics()
	svc := sys.StartDLQServe(adminToken, nil)
	base := "http://" + svc.Addr

	sys.DLQ(asTester, "provider", "pause", "github").Want(t, 0)
	if r := sys.DLQ(asTester, "provider", "rate", "stripe", "--rate", "20/s", "--json").Want(t, 0).JSONLines(t); r[0]["state"] != "draining" || r[0]["rate"] != 20.0 {
		t.Fatalf("provider rate --json: %v", r)
	}
	if r := sys.DLQ(asTester, "provider", "pause", "nosuch").Want(t, 2); !strings.Contains(r.Stderr, "calcom, github, gocardless, outcomes, shopify, standard, stripe") {
		t.Fatalf("an unknown provider: %s", r.Stderr)
	}
	lines := sys.DLQ(nil, "provider", "list", "--json").Want(t, 0).JSONLines(t)
	states := map[string]string{}
	for _, l := range lines {
		states[l["provider"].(string)] = l["text"].(string)
	}
	if len(states) != 7 || states["github"] != "paused" || states["stripe"] != "draining at 20/s" || states["shopify"] != "running" {
		t.Fatalf("provider list: %v", states)
	}

	// dlq serve follows what the CLI wrote.
	metric := func(name, provider string) float64 {
		t.Helper()
		v, err := loadtest.CounterSum(t.Context(), base+"/metrics", name, `provider="`+provider+`"`)
		if err != nil {
			t.Fatalf("scrape %s: %v", name, err)
		}
		return v
	}
	for deadline := time.Now().Add(30 * time.Second); metric("hookline_dlq_provider_paused", "github") != 1 || metric("hookline_dlq_provider_rate", "stripe") != 20; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("dlq serve's gauges never showed github paused and stripe at 20/s")
		}
	}
	if code, _, _ := call(t, "POST", base+"/providers/github/resume", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d", code)
	}
	auth := "Bearer " + adminToken
	if code, _, body := call(t, "POST", base+"/providers/github/resume", auth, map[string]any{"by": "alice"}); code != 200 || !strings.Contains(string(body), `"state":"running"`) {
		t.Fatalf("POST /providers/github/resume: %d %s", code, body)
	}
	if code, _, body := call(t, "POST", base+"/providers/shopify/rate?rate=5", auth, nil); code != 200 || !strings.Contains(string(body), `"rate":5`) {
		t.Fatalf("POST /providers/shopify/rate?rate=5: %d %s", code, body)
	}
	if code, _, body := call(t, "POST", base+"/providers/nosuch/pause", auth, nil); code != 404 {
		t.Fatalf("POST /providers/nosuch/pause: %d %s", code, body)
	}
	code, _, body := call(t, "GET", base+"/providers", auth, nil)
	var ans struct {
		Providers []map[string]any `json:"providers"`
		CaughtUp  bool             `json:"caught_up"`
	}
	if err := json.Unmarshal(body, &ans); code != 200 || err != nil || !ans.CaughtUp || len(ans.Providers) != 7 {
		t.Fatalf("GET /providers: %d %s", code, body)
	}
	if m := metric("hookline_dlq_provider_paused", "github"); m != 0 {
		t.Fatalf("github still paused on /metrics after resume: %v", m)
	}
	// The CLI reads what the API wrote.
	out := sys.DLQ(nil, "provider", "list").Want(t, 0).Stdout
	if f := strings.Join(strings.Fields(out), " "); !strings.Contains(f, "github running alice") || !strings.Contains(f, "shopify draining at 5/s api") {
		t.Fatalf("provider list after the API's writes:\n%s", out)
	}
}
