package docs

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

// readmeYAML returns the first yaml block of README.md after heading.
func readmeYAML(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatalf("README.md: no yaml block after %q", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// TestReadmeFilter runs the README's filter example on GitHub's published
// pull_request payloads: none of them is merged, so none goes to the
// route, each closed one refused at pull_request/merged and every other at
// action; the closed ones with merged set to true (their one change) go.
func TestReadmeFilter(t *testing.T) {
	file := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(file, []byte(readmeYAML(t, "## Routing on what a webhook says")), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := providers.LoadWithoutSecrets(file)
	if err != nil {
		t.Fatal(err)
	}
	gh, ok := reg.Get("github")
	if !ok {
		t.Fatal("no provider github")
	}
	verdict := func(body []byte) providers.RouteVerdict {
		t.Helper()
		vs := gh.Explain(providers.HTTPRequest("pull_request", body, http.Header{}))
		if len(vs) != 1 || vs[0].Route.Name != "merged" {
			t.Fatalf("routes %v, want merged alone", vs)
		}
		return vs[0]
	}
	closed := 0
	for _, ex := range corpus.GitHub(t) {
		if ex.Event != "pull_request" {
			continue
		}
		v := verdict(ex.Body)
		wantAt := "body/action $eq"
		if ex.Action == "closed" {
			wantAt = "body/pull_request/merged $eq"
		}
		if v.Matched || v.At == nil || !strings.HasPrefix(v.At.String(), wantAt) {
			t.Errorf("%s (%s): matched %v at %v, want refused at %s", ex.ID(), ex.Action, v.Matched, v.At, wantAt)
		}
		if ex.Action != "closed" {
			continue
		}
		closed++
		var doc map[string]any
		if err := json.Unmarshal(ex.Body, &doc); err != nil {
			t.Fatal(err)
		}
		doc["pull_request"].(map[string]any)["merged"] = true
		merged, _ := json.Marshal(doc)
		if v := verdict(merged); !v.Matched {
			t.Errorf("%s merged: refused at %v", ex.ID(), v.At)
		}
	}
	if closed == 0 {
		t.Fatal("no closed pull_request among the examples")
	}
}
