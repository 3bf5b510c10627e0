// Package corpus is real provider traffic for tests and benchmarks: the
// example payloads and JSON Schemas providers publish themselves, vendored
// under testdata/ at pinned versions with their licences (testdata/README.md
// says what, which version and how each was fetched).
//
// GitHub: every example payload of the api.github.com set of
// @octokit/webhooks-examples (58 event types, 329 payloads) and the schema
// of @octokit/webhooks-schemas (draft-07, one definition per event type
// under a top-level oneOf), with the examples an independent draft-07
// validator refuses (expected.py) and a signer that uses GitHub's own
// library, @octokit/webhooks-methods (SignGitHub).
package corpus

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Dir is the corpus's testdata folder, absolute.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// GitHubDir is the GitHub corpus's folder (README, LICENSE, examples,
// schema).
func GitHubDir() string { return filepath.Join(Dir(), "github") }

// GitHubSchema is the path of GitHub's published schema file (the whole
// provider: a top-level oneOf over every event's definition).
func GitHubSchema() string { return filepath.Join(GitHubDir(), "webhooks-schemas", "schema.json") }

// GitHubExample is one of GitHub's example payloads as GitHub would send it.
type GitHubExample struct {
	// Event is the event type (X-GitHub-Event): the examples' entry name.
	Event string
	// Index is the example's place among its event type's examples.
	Index int
	// Action is the body's action ("" for event types without one).
	Action string
	// Body is the example as one line of JSON, its keys in the published
	// order (GitHub's own bodies are compact JSON).
	Body []byte
	// Delivery is a delivery id (X-GitHub-Delivery) of GitHub's shape, a
	// UUID, derived from Event and Index: the same in every run.
	Delivery string
}

// ID names the example as the expected lists do: "<event> <index>".
func (e GitHubExample) ID() string { return fmt.Sprintf("%s %d", e.Event, e.Index) }

// GitHub reads every example of the api.github.com set, in the published
// order, failing the test when the file does not parse.
func GitHub(tb testing.TB) []GitHubExample {
	tb.Helper()
	exs, err := LoadGitHub()
	if err != nil {
		tb.Fatal(err)
	}
	return exs
}

// LoadGitHub reads every example of the api.github.com set, in the
// published order (GitHub, for programs).
func LoadGitHub() ([]GitHubExample, error) {
	b, err := os.ReadFile(filepath.Join(GitHubDir(), "webhooks-examples", "api.github.com", "index.json"))
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, fmt.Errorf("corpus: github examples: %w", err)
	}
	var out []GitHubExample
	for _, e := range index {
		for i, raw := range e.Examples {
			var body bytes.Buffer
			if err := json.Compact(&body, raw); err != nil {
				return nil, fmt.Errorf("corpus: github %s %d: %w", e.Name, i, err)
			}
			var head struct {
				Action string `json:"action"`
			}
			_ = json.Unmarshal(raw, &head) // an action that is not a string is left ""
			ex := GitHubExample{Event: e.Name, Index: i, Action: head.Action, Body: body.Bytes()}
			ex.Delivery = uuidOf(ex.ID())
			out = append(out, ex)
		}
	}
	return out, nil
}

// uuidOf is a name-based UUID (version 5's layout, over SHA-1) of s.
func uuidOf(s string) string {
	h := sha1.Sum([]byte("hookline corpus " + s))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// GitHubMapping maps each event type of the examples to its own
// definition in GitHub's schema, as a providers file's schema: mapping
// writes it: "<schema file>#/definitions/<event>_event" for event types
// with actions, "...#/definitions/<event>$event" for the others, as the
// schema names them. An event type with neither is an error.
func GitHubMapping() (map[string]string, error) {
	exs, err := LoadGitHub()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(GitHubSchema())
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var s struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("corpus: github schema: %w", err)
	}
	out := map[string]string{}
	for _, e := range exs {
		for _, name := range []string{e.Event + "_event", e.Event + "$event"} {
			if _, ok := s.Definitions[name]; ok {
				out[e.Event] = GitHubSchema() + "#/definitions/" + name
				break
			}
		}
		if out[e.Event] == "" {
			return nil, fmt.Errorf("corpus: github schema: no definition for event type %s", e.Event)
		}
	}
	return out, nil
}

// Against which schema an expected list was computed.
const (
	// PerEvent: each example against its own event type's definition
	// (GitHubMapping).
	PerEvent = "per-event"
	// Whole: each example against the whole schema file (its top-level
	// oneOf).
	Whole = "whole"
)

// GitHubInvalid is the set of examples (GitHubExample.ID) that Python's
// jsonschema (Draft7Validator, format an annotation) refuses against the
// schema as mode (PerEvent or Whole) applies it: testdata/github/
// invalid-<mode>.txt, computed by expected.py there.
func GitHubInvalid(tb testing.TB, mode string) map[string]bool {
	tb.Helper()
	out, err := LoadGitHubInvalid(mode)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// LoadGitHubInvalid is GitHubInvalid for a program: an error where
// GitHubInvalid fails its test.
func LoadGitHubInvalid(mode string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(GitHubDir(), "invalid-"+mode+".txt"))
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out[line] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	return out, nil
}

// GitHubPairs returns the examples whose body an earlier example of the
// same event type has byte for byte, each with that earlier one:
// {first, second}, in published order. GitHub's bodies for some events
// carry no timestamp or id, so two real events can be the same bytes
// (issue 32: org_block blocked, membership removed, organization
// member_added, sponsorship created, github_app_authorization revoked).
func GitHubPairs(exs []GitHubExample) [][2]GitHubExample {
	first := map[string]GitHubExample{}
	var pairs [][2]GitHubExample
	for _, e := range exs {
		k := e.Event + "\n" + string(e.Body)
		if f, ok := first[k]; ok {
			pairs = append(pairs, [2]GitHubExample{f, e})
			continue
		}
		first[k] = e
	}
	return pairs
}
