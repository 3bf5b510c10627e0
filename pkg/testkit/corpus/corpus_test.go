package corpus_test

import (
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

// TestGitHubCorpus checks the vendored corpus is the one the package
// describes: 329 examples of 58 event types, each with its own definition
// in the schema, distinct delivery ids, five pairs of byte-identical
// bodies (issue 32), and expected lists naming examples that exist.
func TestGitHubCorpus(t *testing.T) {
	exs := corpus.GitHub(t)
	types := map[string]bool{}
	ids := map[string]bool{}
	deliveries := map[string]bool{}
	bodies := map[string]int{}
	for _, e := range exs {
		types[e.Event] = true
		ids[e.ID()] = true
		deliveries[e.Delivery] = true
		bodies[e.Event+" "+string(e.Body)]++
	}
	if len(exs) != 329 || len(types) != 58 || len(deliveries) != len(exs) {
		t.Errorf("%d examples of %d event types, %d delivery ids: want 329 of 58, one id each", len(exs), len(types), len(deliveries))
	}
	if m, err := corpus.GitHubMapping(); err != nil || len(m) != len(types) {
		t.Errorf("mapping of %d event types to their own definitions: %d (%v)", len(types), len(m), err)
	}
	pairs := 0
	for _, n := range bodies {
		if n > 1 {
			pairs += n - 1
		}
	}
	if pairs != 5 {
		t.Errorf("%d repeated bodies of one event type: want the 5 pairs the corpus has", pairs)
	}
	for _, mode := range []string{corpus.PerEvent, corpus.Whole} {
		inv := corpus.GitHubInvalid(t, mode)
		if len(inv) == 0 || len(inv) > len(exs)/2 {
			t.Errorf("invalid-%s.txt names %d examples: want some, and fewer than half", mode, len(inv))
		}
		for id := range inv {
			if !ids[id] {
				t.Errorf("invalid-%s.txt names %q: no such example", mode, id)
			}
		}
	}
}

// TestSignGitHubMatchesOurs checks GitHub's own library (SignGitHub) and
// the github preset's signer write the same X-Hub-Signature-256 for real
// bodies, and the preset verifies the library's. Without node or the
// library it skips, except in CI (.ci/run installs both).
func TestSignGitHubMatchesOurs(t *testing.T) {
	exs := corpus.GitHub(t)
	var bodies [][]byte
	for i := 0; i < len(exs); i += 37 {
		bodies = append(bodies, exs[i].Body)
	}
	const secret = "corpus-secret"
	sigs, err := corpus.SignGitHub(secret, bodies)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	reg, err := providers.Parse([]byte("providers:\n  github: {preset: github, secret_env: [S], destination: {url: \"http://127.0.0.1:1/\"}}\n"),
		func(string) (string, bool) { return secret, true })
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.Get("github")
	for i, b := range bodies {
		h := http.Header{}
		if err := p.Sign(b, time.Now(), h); err != nil {
			t.Fatal(err)
		}
		if got := h.Get("X-Hub-Signature-256"); got != sigs[i] {
			t.Errorf("body %d: ours %s, GitHub's library %s", i, got, sigs[i])
		}
		h.Set("X-Hub-Signature-256", sigs[i])
		h.Set("X-GitHub-Delivery", "d")
		if err := p.Verify(h, b, time.Now()); err != nil {
			t.Errorf("body %d: the library's signature does not verify: %v", i, err)
		}
	}
	if !slices.ContainsFunc(sigs, func(s string) bool { return len(s) == len("sha256=")+64 }) {
		t.Errorf("signatures %v: want sha256=<64 hex>", sigs[:1])
	}
}
