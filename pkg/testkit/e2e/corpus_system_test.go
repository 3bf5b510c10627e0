package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/corpus"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// corpusRoutes are the github provider's routes in the corpus scenario: by
// event type, by content (where) and by both; topic routes (cheap to
// count) and one HTTP route.
var corpusRoutes = []e2e.Route{
	{Name: "all", Topic: "gh.all"},
	{Name: "pulls", Topic: "gh.pulls", Events: []string{"pull_request", "pull_request_review*"}},
	{Name: "issues", Events: []string{"issues", "issue_comment"}},
	{Name: "created", Topic: "gh.created", Where: map[string]any{"/action": "created"}},
	{Name: "unmerged", Topic: "gh.unmerged", Events: []string{"pull_request"}, Where: map[string]any{"/action": "closed", "/pull_request/merged": false}},
	{Name: "bots", Topic: "gh.bots", Where: map[string]any{"/sender/type": "Bot"}},
}

// TestGitHubCorpus is issue 32's system test with real traffic: every
// example payload GitHub publishes (329 of 58 event types, vendored in
// pkg/testkit/corpus), signed with GitHub's own library where it is
// installed (.ci/run), posted to ingest with GitHub's headers, routed by
// event type and content (corpusRoutes) and checked against GitHub's own
// published schema with on_invalid: dlq — first with the schema mapped per
// event type (each event type's own definition, file.json#/definitions/x),
// then as the one whole-provider file (its top-level oneOf). In both:
// every payload is answered 202; the examples an independent draft-07
// validator accepts (Python's jsonschema: the corpus's expected lists) are
// each delivered on exactly the routes they match, once; the ones it
// refuses are dead as invalid_payload on each of their routes, in the DLQ,
// and nowhere else; sending the whole corpus again changes nothing.
func TestGitHubCorpus(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	exs := corpus.GitHub(t)
	signed := signCorpus(t, exs)
	defs, err := corpus.GitHubMapping()
	if err != nil {
		t.Fatal(err)
	}
	perEvent, err := json.Marshal(defs) // JSON is YAML: a flow mapping
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(corpus.GitHubSchema())
	for _, c := range []struct {
		mode   string
		schema string
	}{
		{corpus.PerEvent, string(perEvent)},
		{corpus.Whole, string(whole)},
	} {
		t.Run(c.mode, func(t *testing.T) {
			runCorpus(t, exs, signed, []string{"schema: " + c.schema, "on_invalid: dlq"}, corpus.GitHubInvalid(t, c.mode))
		})
	}
}

// signCorpus is each example's X-Hub-Signature-256 made by GitHub's own
// library (corpus.SignGitHub), or nil when it cannot run outside CI: the
// harness then signs with the github preset (which
// corpus.TestSignGitHubMatchesOurs checks against the library).
func signCorpus(t *testing.T, exs []corpus.GitHubExample) []string {
	bodies := make([][]byte, len(exs))
	for i, e := range exs {
		bodies[i] = e.Body
	}
	sigs, err := corpus.SignGitHub(e2e.Secret, bodies)
	switch {
	case err == nil:
		t.Logf("corpus: %d payloads signed with @octokit/webhooks-methods %s", len(sigs), corpus.GitHubMethodsVersion)
		return sigs
	case os.Getenv("CI") != "":
		t.Fatal(err)
	}
	t.Logf("corpus: GitHub's library cannot sign (%v): signing with the github preset", err)
	return nil
}

// corpusEvent is example i as GitHub sends it.
func corpusEvent(e corpus.GitHubExample, sig string) e2e.Event {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/corpus")
	h.Set("X-GitHub-Event", e.Event)
	h.Set("X-GitHub-Delivery", e.Delivery)
	h.Set("X-GitHub-Hook-ID", "1")
	if sig != "" {
		h.Set("X-Hub-Signature-256", sig)
	}
	return e2e.Event{Provider: "github", Body: e.Body, Header: h, Keys: []string{"github:" + e.Delivery}, Type: e.Event, Signed: sig != ""}
}

// runCorpus runs one system whose github provider has corpusRoutes and
// lines (its schema), sends the corpus twice and settles the ledger after
// each.
func runCorpus(t *testing.T, exs []corpus.GitHubExample, sigs []string, lines []string, invalid map[string]bool) {
	sys := e2e.New(t, e2e.Options{Partitions: 4, Routes: map[string][]e2e.Route{"github": corpusRoutes},
		ProviderLines: map[string][]string{"github": lines}})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)

	// The corpus holds five pairs of byte-identical bodies of one event
	// type under different delivery ids. Ingest takes the second of each
	// (the same signed bytes under another key within github's
	// replay_window, 1h by default) as a replay of the first: answered 202
	// "replay" naming the first, never delivered (issue 32 item 6;
	// TestIdenticalRealEventsSystem shows them delivered with a small
	// window, and traced). The second of each pair is sent after every
	// first, so which one is suppressed is known.
	var first, repeats []int
	seen := map[string]bool{}
	for i, e := range exs {
		if b := e.Event + " " + string(e.Body); seen[b] {
			repeats = append(repeats, i)
		} else {
			seen[b] = true
			first = append(first, i)
		}
	}
	if len(repeats) != 5 {
		t.Fatalf("%d repeated bodies in the corpus: the scenario accounts for the 5 pairs it holds", len(repeats))
	}
	var invalidKeys []string
	for _, e := range exs {
		if invalid[e.ID()] {
			invalidKeys = append(invalidKeys, "github:"+e.Delivery)
		}
	}
	sys.Ledger().ExpectInvalid(invalidKeys...)

	send := func(pass string, idx []int, wantDuplicate bool) (answers map[int]e2e.Answer, took time.Duration) {
		answers = map[int]e2e.Answer{}
		var mu sync.Mutex
		work := make(chan int)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					var sig string
					if sigs != nil {
						sig = sigs[i]
					}
					ev := corpusEvent(exs[i], sig)
					a, err := sys.Send(ev)
					if err != nil {
						t.Errorf("%s: %s: %v", pass, exs[i].ID(), err)
					}
					mu.Lock()
					answers[i] = a
					mu.Unlock()
					if err == nil && a.Status == http.StatusAccepted && !a.Duplicate && a.ReplayOf == "" {
						sys.Ledger().AcceptEvent(ev, a.Keys)
					}
				}
			}()
		}
		for _, i := range idx {
			work <- i
		}
		close(work)
		wg.Wait()
		took = time.Since(start)
		for _, i := range idx {
			a := answers[i]
			switch {
			case a.Status != http.StatusAccepted:
				t.Errorf("%s: %s answered %d %s: want 202", pass, exs[i].ID(), a.Status, a.Error)
			case !slices.Equal(a.Keys, []string{"github:" + exs[i].Delivery}):
				t.Errorf("%s: %s answered keys %v: want github:%s", pass, exs[i].ID(), a.Keys, exs[i].Delivery)
			case (a.Duplicate || a.ReplayOf != "") != wantDuplicate:
				t.Errorf("%s: %s answered duplicate=%v replay_of=%q: want produced %v", pass, exs[i].ID(), a.Duplicate, a.ReplayOf, !wantDuplicate)
			case slices.Contains(repeats, i) && !strings.HasPrefix(a.ReplayOf, "github:"):
				t.Errorf("%s: %s, a pair's second body, answered %+v: want replay of the first's key", pass, exs[i].ID(), a)
			}
		}
		return answers, took
	}

	_, took := send("first pass", first, false)
	_, tookRepeats := send("the pairs' second bodies", repeats, true)
	before := sys.Ledger().Settle(t, e2e.SettleOptions{})
	checkCorpusTally(t, sys, exs, before, invalid, repeats)

	// The whole corpus again, every payload signed afresh (GitHub's
	// signature has no timestamp: the same bytes): answered 202, and
	// nothing changes.
	all := make([]int, len(exs))
	for i := range all {
		all[i] = i
	}
	_, tookAgain := send("re-send", all, true)
	after := sys.Ledger().Settle(t, e2e.SettleOptions{})
	if !sameRoutes(before, after) {
		t.Errorf("the re-send changed what was delivered:\n before %v\n after  %v", before.Routes, after.Routes)
	}
	types := map[string]bool{}
	for _, e := range exs {
		types[e.Event] = true
	}
	t.Logf("corpus: github: %d payloads of %d event types answered 202 (first bodies in %s, 8 in flight; the 5 repeated bodies in %s, suppressed as replays), "+
		"%d delivered, %d invalid (independent validator: %d) dead as invalid_payload in the DLQ; the re-send of all %d in %s changed nothing",
		len(exs), len(types), took.Round(time.Millisecond), tookRepeats.Round(time.Millisecond),
		before.Accepted-before.Invalid, before.Invalid, len(invalid), len(exs), tookAgain.Round(time.Millisecond))
}

// checkCorpusTally checks each route got exactly the payloads it matches
// (counted here from the corpus, apart from the kit), the invalid ones went
// to the DLQ only, and the pairs' second bodies nowhere.
func checkCorpusTally(t *testing.T, sys *e2e.System, exs []corpus.GitHubExample, got e2e.Tally, invalid map[string]bool, repeats []int) {
	t.Helper()
	want := map[string]int{}
	wantDLQ, wantInvalid := 0, 0
	for i, e := range exs {
		if slices.Contains(repeats, i) {
			continue
		}
		n := 0
		for _, r := range corpusRoutes {
			if routeTakes(r, e) {
				want[r.Name]++
				n++
			}
		}
		if invalid[e.ID()] {
			wantDLQ += n
			wantInvalid++
		}
	}
	var summary []string
	for _, r := range got.Routes {
		summary = append(summary, fmt.Sprintf("%s=%d", r.Route, r.Accepted))
		if r.Accepted != want[r.Route] || r.Accepted == 0 {
			t.Errorf("route %s: %d payloads, want %d (and some)", r.Route, r.Accepted, want[r.Route])
		}
	}
	t.Logf("corpus: payloads per route %s", strings.Join(summary, " "))
	if got.Accepted != len(exs)-len(repeats) || got.Invalid != wantInvalid || got.DLQ != wantDLQ || got.InvalidWrong != 0 {
		t.Errorf("accepted %d (want %d), invalid %d (want %d), DLQ entries %d (want %d: one per route of each invalid payload), invalid-wrong %d",
			got.Accepted, len(exs)-len(repeats), got.Invalid, wantInvalid, got.DLQ, wantDLQ, got.InvalidWrong)
	}
}

// routeTakes is the route's rule for one example, written out for the
// corpus's routes: event type globs and where, apart from the kit's own
// matching.
func routeTakes(r e2e.Route, e corpus.GitHubExample) bool {
	var body struct {
		Action      string `json:"action"`
		PullRequest *struct {
			Merged bool `json:"merged"`
		} `json:"pull_request"`
		Sender *struct {
			Type string `json:"type"`
		} `json:"sender"`
	}
	_ = json.Unmarshal(e.Body, &body)
	switch r.Name {
	case "all":
		return true
	case "pulls":
		return e.Event == "pull_request" || strings.HasPrefix(e.Event, "pull_request_review")
	case "issues":
		return e.Event == "issues" || e.Event == "issue_comment"
	case "created":
		return body.Action == "created"
	case "unmerged":
		return e.Event == "pull_request" && body.Action == "closed" && body.PullRequest != nil && !body.PullRequest.Merged
	case "bots":
		return body.Sender != nil && body.Sender.Type == "Bot"
	}
	panic("corpus: no rule for route " + r.Name)
}

// sameRoutes says whether two tallies delivered the same: per route the
// same keys, ends, DLQ entries, calls and topic records.
func sameRoutes(a, b e2e.Tally) bool {
	if len(a.Routes) != len(b.Routes) || a.Accepted != b.Accepted || a.DLQ != b.DLQ || a.Invalid != b.Invalid {
		return false
	}
	for i := range a.Routes {
		x, y := a.Routes[i], b.Routes[i]
		x.Examples, y.Examples, x.Settled, y.Settled = nil, nil, time.Time{}, time.Time{}
		if fmt.Sprint(x) != fmt.Sprint(y) {
			return false
		}
	}
	return true
}
