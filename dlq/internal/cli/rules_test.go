package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/rules"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// rulesFile is a providers file with a filtered route, a where route and
// an otherwise route.
const rulesFile = `
providers:
  github:
    preset: github
    secret_env: [GH_SECRET]
    routes:
      merged:
        events: [pull_request]
        filter:
          body:
            action: closed
            pull_request: {merged: true, base: {ref: {$in: [main, master]}}}
          headers:
            user-agent: {$startsWith: GitHub-Hookshot/}
        destination: {url: "http://releases.internal/merged"}
      pushes:
        events: [push]
        destination: {topic: gh.pushes}
      rest:
        otherwise: true
        destination: {url: "http://rest.internal/"}
`

// writeRulesFile writes rulesFile into a new folder: the folder and the
// file's path.
func writeRulesFile(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(file, []byte(rulesFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestRulesTestBody: dlq rules test --body on a real pull_request payload,
// closed but not merged, then merged: the verdict and the deciding
// operator, in the table and in JSON.
func TestRulesTestBody(t *testing.T) {
	dir, file := writeRulesFile(t)
	var closed []byte
	for _, ex := range corpus.GitHub(t) {
		if ex.Event == "pull_request" && ex.Action == "closed" {
			closed = ex.Body
			break
		}
	}
	if closed == nil {
		t.Fatal("no closed pull_request example in the corpus")
	}
	var doc map[string]any
	if err := json.Unmarshal(closed, &doc); err != nil {
		t.Fatal(err)
	}
	doc["pull_request"].(map[string]any)["merged"] = true
	merged, _ := json.Marshal(doc)
	for name, b := range map[string][]byte{"closed.json": closed, "merged.json": merged} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"HOOKLINE_PROVIDERS": file}
	hdrs := []string{"--header", "X-GitHub-Event: pull_request", "--header", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958", "--header", "User-Agent: GitHub-Hookshot/044aadd"}

	code, out, errs := run(env, append([]string{"rules", "test", "github", "--body", filepath.Join(dir, "closed.json")}, hdrs...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"event pull_request", "merged", "the filter fails at body/pull_request/merged $eq (line 12:", "rest", "no other route matched"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = run(env, append([]string{"rules", "test", "github", "--json", "--body", filepath.Join(dir, "merged.json")}, hdrs...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res rules.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]rules.RouteResult{}
	for _, r := range res.Events[0].Routes {
		got[r.Route] = r
	}
	if m := got["merged"]; !m.Matched || m.By != "filter" || m.Filter == nil || m.Filter.Part != "headers" {
		t.Errorf("merged: %+v, want matched by filter, last checked in headers", m)
	}
	if p := got["pushes"]; p.Matched || p.By != "events" {
		t.Errorf("pushes: %+v, want refused by events", p)
	}
	if r := got["rest"]; r.Matched || r.YieldedTo != "merged" {
		t.Errorf("rest: %+v, want yielded to merged", r)
	}

	// Without the User-Agent the header filter decides.
	code, out, _ = run(env, "rules", "test", "github", "--body", filepath.Join(dir, "merged.json"), "--header", "X-GitHub-Event: pull_request", "--header", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if code != 0 || !strings.Contains(out, "the filter fails at headers/user-agent $startsWith") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

// TestRulesTestUsage: mistakes are usage errors (exit 2).
func TestRulesTestUsage(t *testing.T) {
	dir, file := writeRulesFile(t)
	body := filepath.Join(dir, "b.json")
	if err := os.WriteFile(body, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOOKLINE_PROVIDERS": file}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rules"}, "want rules test"},
		{[]string{"rules", "test", "github"}, "give one of --body, --from-dlq, --from-raw"},
		{[]string{"rules", "test", "nope", "--body", body, "--event", "x"}, `provider "nope" is not in`},
		{[]string{"rules", "test", "github", "--body", body}, "derives no event"},
		{[]string{"rules", "test", "--from-raw", "0:1", "--event", "x"}, "--header and --event go with --body"},
		{[]string{"rules", "test", "github", "--body", body, "--header", "nocolon"}, "want 'Name: value'"},
	} {
		code, _, errs := run(env, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if code, _, errs := run(map[string]string{}, "rules", "test", "github", "--body", body); code != 2 || !strings.Contains(errs, "needs HOOKLINE_PROVIDERS") {
		t.Errorf("without the file: exit %d, %q", code, errs)
	}
}

// TestRulesTestStored: --from-raw and --from-dlq take a stored delivery
// (kfake): its event type, body and copied headers, as the processor saw
// them; the provider comes from the record.
func TestRulesTestStored(t *testing.T) {
	_, file := writeRulesFile(t)
	names := topics.NewNames("", nil)
	addrs := kafkatest.Fake(t, kfake.SeedTopics(1, names.Raw, names.DLQ, names.DLQStatus))
	cl := kafkatest.Client(t, addrs)
	body := []byte(`{"action":"closed","pull_request":{"merged":true,"base":{"ref":"main"}}}`)
	raw := headers.IngestRecord(names.Raw, "github:d1", "pull_request", body, headers.IngestMeta{
		Provider: "github", ReceivedAt: time.Now(),
		HTTP: []kgo.RecordHeader{{Key: "user-agent", Value: []byte("GitHub-Hookshot/1")}},
	})
	dead := headers.IngestRecord(names.DLQ, "github:d1", "pull_request", body, headers.IngestMeta{Provider: "github", ReceivedAt: time.Now()})
	headers.Set(dead, headers.DeadReason, headers.DeadPermanent)
	if err := cl.ProduceSync(t.Context(), raw, dead).FirstErr(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOOKLINE_PROVIDERS": file, "KAFKA_BROKERS": strings.Join(addrs, ",")}
	for _, tc := range []struct {
		args    []string
		matched bool // the route merged (the DLQ copy has no user-agent)
	}{
		{[]string{"--from-raw", "0:0"}, true},
		{[]string{"github", "--from-dlq", "0:0"}, false},
	} {
		code, out, errs := run(env, append([]string{"rules", "test", "--json"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errs)
		}
		var res rules.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %v: %s", tc.args, err, out)
		}
		if len(res.Events) != 1 || res.Events[0].EventType != "pull_request" || res.Events[0].Key != "github:d1" {
			t.Fatalf("%v: %s", tc.args, out)
		}
		for _, r := range res.Events[0].Routes {
			if r.Route == "merged" && r.Matched != tc.matched {
				t.Errorf("%v: merged %+v, want matched %v", tc.args, r, tc.matched)
			}
		}
	}
	if code, _, errs := run(env, "rules", "test", "--from-raw", "0:9"); code != 2 {
		t.Errorf("a ref past the end: exit %d, %s", code, errs)
	}
	if code, _, errs := run(env, "rules", "test", "stripe", "--from-raw", "0:0"); code != 2 || !strings.Contains(errs, `is of provider "github"`) {
		t.Errorf("another provider: exit %d, %s", code, errs)
	}
}
