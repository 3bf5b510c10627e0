package schema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

// writeSchema writes a schema file into a new folder and returns the
// folder.
func writeSchema(t *testing.T, name, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFormats: format is an annotation by default in every draft, and
// asserted in every draft after AssertFormats.
func TestFormats(t *testing.T) {
	body := []byte(`{"url": "https://api.github.com/users/x/following{/other_user}", "at": "yesterday", "mail": "nobody"}`)
	for _, draft := range []string{"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"} {
		dir := writeSchema(t, "f.json", `{"$schema": "`+draft+`", "properties": {
			"url": {"type": "string", "format": "uri-template"},
			"at": {"type": "string", "format": "date-time"},
			"mail": {"type": "string", "format": "email"}}}`)
		var annotate, assert Set
		assert.AssertFormats()
		for _, s := range []*Set{&annotate, &assert} {
			if err := s.Add(glob.MustCompile("*"), dir, "f.json"); err != nil {
				t.Fatal(err)
			}
		}
		if err := annotate.Check("x", body); err != nil {
			t.Errorf("%s, default: %v; want valid (format is an annotation)", draft, err)
		}
		err := assert.Check("x", body)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "/at") || !strings.Contains(err.Error(), "/mail") {
			t.Errorf("%s, asserted: %v; want /at and /mail refused", draft, err)
		}
	}
}

// TestAddPointer: an entry can name a definition in a file; each file is
// read once per Set; a pointer that leads nowhere, or a fragment that is
// no pointer, is refused at Add naming the entry and the file.
func TestAddPointer(t *testing.T) {
	dir := writeSchema(t, "p.json", `{"$schema": "http://json-schema.org/draft-07/schema#",
		"definitions": {
			"a": {"type": "object", "required": ["a"]},
			"b$event": {"type": "object", "required": ["b"]},
			"x/y": {"required": ["xy"]}},
		"oneOf": [{"$ref": "#/definitions/a"}, {"$ref": "#/definitions/b$event"}]}`)
	var s Set
	for ev, ref := range map[string]string{"a": "p.json#/definitions/a", "b": "p.json#/definitions/b$event", "xy": "p.json#/definitions/x~1y", "*": "p.json"} {
		if err := s.Add(glob.MustCompile(ev), dir, ref); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
	}
	if len(s.loaded) != 1 {
		t.Errorf("%d files loaded for four entries into one file: want 1", len(s.loaded))
	}
	for _, c := range []struct {
		typ, body string
		valid     bool
	}{
		{"a", `{"a": 1}`, true}, {"a", `{"b": 1}`, false},
		{"b", `{"b": 1}`, true}, {"b", `{"a": 1}`, false},
		{"xy", `{"xy": 1}`, true}, {"xy", `{}`, false},
		{"other", `{"a": 1}`, true}, {"other", `{"a": 1, "b": 1}`, false}, // the file's oneOf: exactly one
	} {
		if err := s.Check(c.typ, []byte(c.body)); (err == nil) != c.valid {
			t.Errorf("%s %s: %v, want valid %v", c.typ, c.body, err, c.valid)
		}
	}
	err := s.Check("a", []byte(`{}`))
	var e *Error
	if !errors.As(err, &e) || e.Schema != "p.json#/definitions/a" {
		t.Errorf("error %v: want it to name p.json#/definitions/a", err)
	}
	for ref, want := range map[string]string{
		"p.json#/definitions/nope": "p.json#/definitions/nope: /definitions/nope leads to nothing in p.json",
		"p.json#a":                 "p.json#a: want a JSON pointer after '#'",
		"#/definitions/a":          "want a JSON Schema file",
		"gone.json#/definitions/a": "gone.json#/definitions/a: open",
	} {
		var s Set
		if err := s.Add(glob.MustCompile("*"), dir, ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Add(%s): %v; want it to say %q", ref, err, want)
		}
	}
}

// TestGitHubCorpusVerdicts: GitHub's example payloads against GitHub's
// published schema, mapped per event type and as the whole file, get the
// verdicts an independent draft-07 validator gives them (the corpus's
// expected lists, from Python's jsonschema): the discriminator rewrite
// and the annotated formats change no verdict.
func TestGitHubCorpusVerdicts(t *testing.T) {
	exs := corpus.GitHub(t)
	defs, err := corpus.GitHubMapping()
	if err != nil {
		t.Fatal(err)
	}
	var perEvent, whole Set
	for ev, ref := range defs {
		if err := perEvent.Add(glob.MustCompile(ev), "", ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := whole.Add(glob.MustCompile("*"), "", corpus.GitHubSchema()); err != nil {
		t.Fatal(err)
	}
	modes := []struct {
		name string
		set  *Set
	}{{corpus.PerEvent, &perEvent}, {corpus.Whole, &whole}}
	if testing.Short() {
		modes = modes[:1] // the whole file's oneOf costs seconds
	}
	for _, m := range modes {
		invalid := corpus.GitHubInvalid(t, m.name)
		refused := 0
		for _, e := range exs {
			err := m.set.Check(e.Event, e.Body)
			if (err != nil) != invalid[e.ID()] {
				t.Errorf("%s: %s: %v; the independent validator says invalid=%v", m.name, e.ID(), err, invalid[e.ID()])
			}
			if err != nil {
				refused++
			}
		}
		t.Logf("%s: %d of %d refused (independent validator: %d)", m.name, refused, len(exs), len(invalid))
	}
}
