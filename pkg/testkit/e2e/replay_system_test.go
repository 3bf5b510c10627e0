package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/corpus"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestIdenticalRealEventsSystem (issue 32 item 6): GitHub's five
// byte-identical example pairs (corpus.GitHubPairs), each posted as two
// real events under their two delivery ids, through ingest and
// the processor. With a small replay_window (1ms, the second sent later
// than that) both of each pair are delivered. With the default window
// (1h) the second is suppressed: answered 202 replay naming the first,
// never delivered, counted by ingest's metric, and `dlq trace` of its own
// key says it was suppressed as a replay of the first.
func TestIdenticalRealEventsSystem(t *testing.T) {
	skipShort(t)
	pairs := corpus.GitHubPairs(corpus.GitHub(t))
	if len(pairs) != 5 {
		t.Fatalf("the corpus holds %d identical pairs, want 5", len(pairs))
	}
	sys := e2e.New(t, e2e.Options{Providers: func(dest, env string) string {
		return fmt.Sprintf("  gh-hour: {preset: github, secret_env: [%s], destination: {url: %q}}\n", env, dest) +
			fmt.Sprintf("  gh-ms: {preset: github, secret_env: [%s], replay_window: 1ms, destination: {url: %q}}\n", env, dest)
	}})
	in := sys.StartIngest()
	sys.StartProcessor("p1", nil)

	send := func(provider, event, id string, body []byte) e2e.Answer {
		t.Helper()
		h := http.Header{"Content-Type": {"application/json"}}
		h.Set("X-GitHub-Delivery", id)
		h.Set("X-GitHub-Event", event)
		a, err := sys.Send(e2e.Event{Provider: provider, Body: body, Header: h})
		if err != nil || a.Status != http.StatusAccepted || len(a.Keys) != 1 || a.Keys[0] != provider+":"+id {
			t.Fatalf("%s %s: %+v %v, want 202 for %s:%s", provider, id, a, err, provider, id)
		}
		return a
	}
	var delivered, suppressed []string // keys
	replayOf := map[string]string{}
	for _, pair := range pairs {
		event, body := pair[0].Event, pair[0].Body
		for _, provider := range []string{"gh-ms", "gh-hour"} {
			first, second := pair[0].Delivery, pair[1].Delivery
			if a := send(provider, event, first, body); a.Duplicate || a.ReplayOf != "" {
				t.Fatalf("%s %s first: %+v, want accepted", provider, event, a)
			}
			start := time.Now()
			time.Sleep(5 * time.Millisecond) // past gh-ms's 1ms window
			a := send(provider, event, second, body)
			switch {
			case provider == "gh-ms" && (a.Duplicate || a.ReplayOf != ""):
				t.Fatalf("gh-ms %s second, %s after the first: %+v, want accepted (window 1ms)", event, time.Since(start), a)
			case provider == "gh-ms":
				delivered = append(delivered, provider+":"+first, provider+":"+second)
			case a.ReplayOf != provider+":"+first:
				t.Fatalf("gh-hour %s second: %+v, want 202 replay of %s:%s", event, a, provider, first)
			default:
				delivered = append(delivered, provider+":"+first)
				suppressed = append(suppressed, provider+":"+second)
				replayOf[provider+":"+second] = provider + ":" + first
			}
		}
	}

	// Delivered: every key once; the suppressed ones never (the processor
	// never saw them: they are not on webhooks.raw).
	deadline := time.Now().Add(90 * time.Second)
	for {
		var missing []string
		for _, k := range delivered {
			if sys.Dest.Calls(k) == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered within 90s: %v (destination calls so far: %v)", missing, sys.Dest.AllCalls())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range delivered {
		if n := sys.Dest.Calls(k); n != 1 {
			t.Errorf("%s: %d calls, want 1", k, n)
		}
	}
	for _, k := range suppressed {
		if n := sys.Dest.Calls(k); n != 0 {
			t.Errorf("suppressed %s: %d calls, want none", k, n)
		}
	}

	// Counted.
	resp, err := http.Get("http://" + in.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`hookline_ingest_replays_suppressed_total{provider="gh-hour"} %d`, len(suppressed)); !strings.Contains(string(m), want+"\n") {
		t.Errorf("ingest's /metrics lacks %s", want)
	}
	if strings.Contains(string(m), `hookline_ingest_replays_suppressed_total{provider="gh-ms"}`) {
		t.Errorf("ingest's /metrics counts suppressed gh-ms deliveries; want none")
	}

	// Traced, by the suppressed delivery's own key.
	for _, k := range suppressed {
		out := sys.DLQ(nil, "trace", k).Want(t, 0).Stdout
		if want := k + " (provider gh-hour): suppressed as a replay of " + replayOf[k]; !strings.Contains(out, want) {
			t.Errorf("dlq trace %s: lacks %q:\n%s", k, want, out)
		}
	}
}
