// Package schema checks event bodies against a provider's JSON Schema
// files: a Set of entries, each an event type glob and its compiled file,
// or a place in a file (file.json#/definitions/x); the most specific entry
// that matches an event's type applies (see Set.Check). Schemas work as
// their publishers' validators read them: format is an annotation unless
// the Set asserts it (formats.go), and a oneOf over variants told apart by
// one property is checked on the variant the body names (dispatch.go).
// What the providers file's schema:, on_invalid and schema_formats say is
// read by the providers package.
package schema

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Bounds of a Error: the violations it lists, and each one's
// length.
const (
	maxPayloadProblems    = 5
	maxPayloadProblemSize = 200
)

// Error says an event's body does not satisfy its schema: not JSON,
// or the first few violations (at most 5, each at most 200 bytes).
type Error struct {
	Schema   string   // the schema file as the providers file names it
	Problems []string // "at '/amount': got string, want number"
}

// Error is "schema <file>: <problem>; <problem>...".
func (e *Error) Error() string {
	return "schema " + e.Schema + ": " + strings.Join(e.Problems, "; ")
}

// entry is one entry of schema: the glob ("*" for a schema of every
// event) and its compiled file.
type entry struct {
	events glob.Glob
	file   string // as written in the providers file
	schema *jsonschema.Schema
}

// Set is a provider's payload schemas, in the order they were added. The
// zero Set checks nothing, and does not assert format (AssertFormats). A
// Set is not changed after Load, so it is safe for concurrent use.
type Set struct {
	entries []entry
	assert  bool                 // AssertFormats
	c       *jsonschema.Compiler // the Set's compiler: each file read and compiled once
	loaded  map[string]any       // file URL -> its document, as added to c
}

// AssertFormats makes the Set check the format keyword (the providers
// file's schema_formats: assert), for every draft, with the library's
// checks; by default format is an annotation (formats.go). Call it before
// the first Add.
func (s *Set) AssertFormats() { s.assert = true }

// Globs are the entries' event type globs, in the order they were added
// ("*" for a schema of every event). Cost: one slice.
func (s *Set) Globs() []glob.Glob {
	out := make([]glob.Glob, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.events)
	}
	return out
}

// Add compiles ref for the event types events matches: a file (relative to
// dir unless absolute), or a place in one, file#pointer with a JSON pointer
// (RFC 6901, in a URI fragment: "schema.json#/definitions/push$event"), so
// one published file can give each event type its own definition. The
// pointer must lead to something in the file. ref is kept as written for
// messages. Each file is read once per Set. Cost: reading and compiling
// what ref leads to, at start.
func (s *Set) Add(events glob.Glob, dir, ref string) error {
	file, frag, hasFrag := strings.Cut(ref, "#")
	if file == "" {
		return fmt.Errorf("%s: want a JSON Schema file, or file#/pointer", ref)
	}
	if hasFrag && !strings.HasPrefix(frag, "/") {
		return fmt.Errorf("%s: want a JSON pointer after '#' (such as %s#/definitions/name)", ref, file)
	}
	path := file
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	if s.c == nil {
		s.c = jsonschema.NewCompiler()
		s.c.DefaultDraft(jsonschema.Draft2020)
		if s.assert {
			s.c.AssertFormat()
		} else {
			annotateFormats(s.c)
		}
		s.loaded = map[string]any{}
	}
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	doc, ok := s.loaded[u]
	if !ok {
		if doc, err = s.load(abs, u); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
	}
	loc := u
	if hasFrag {
		ptr, err := url.PathUnescape(frag)
		if err != nil {
			return fmt.Errorf("%s: the pointer: %w", ref, err)
		}
		if _, ok := find(doc, ptr); !ok {
			return fmt.Errorf("%s: %s leads to nothing in %s", ref, ptr, file)
		}
		loc += "#" + frag
	}
	sch, err := s.c.Compile(loc)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	s.entries = append(s.entries, entry{events: events, file: ref, schema: sch})
	return nil
}

// load reads the JSON Schema file at abs, rewrites its oneOf and anyOf
// over a discriminator (dispatch.go) when its draft has if/then/else and
// no subschema sets its own $id, and adds it to the Set's compiler as u.
func (s *Set) load(abs, u string) (any, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if root, ok := doc.(map[string]any); ok && hasConditionals(root) && !nestedID(root, true) {
		dispatch(doc)
	}
	if err := s.c.AddResource(u, doc); err != nil {
		return nil, err
	}
	s.loaded[u] = doc
	return doc, nil
}

// hasConditionals says whether a root schema's draft has if/then/else:
// draft-07 and later, or no $schema (draft 2020-12 is the default).
func hasConditionals(root map[string]any) bool {
	d, ok := root["$schema"].(string)
	if !ok {
		return true
	}
	for _, later := range []string{"draft-07", "draft/2019-09", "draft/2020-12"} {
		if strings.Contains(d, later) {
			return true
		}
	}
	return false
}

// nestedID says whether a subschema of v (below the root when root) sets
// its own $id, which would change what a "#/..." $ref means inside it.
func nestedID(v any, root bool) bool {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["$id"]; ok && !root {
			return true
		}
		for k, c := range t {
			switch k {
			case "enum", "const", "default", "examples":
				continue
			}
			if nestedID(c, false) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if nestedID(c, false) {
				return true
			}
		}
	}
	return false
}

// Len is the number of entries. Cost: none.
func (s *Set) Len() int { return len(s.entries) }

// schemaFor is the entry that applies to an event type: the literal one,
// else the glob with the most characters besides '*', the first on a tie;
// an empty type matches "*" alone. nil: none applies.
func (s *Set) schemaFor(eventType string) *entry {
	var best *entry
	bestLen := -1
	for i := range s.entries {
		e := &s.entries[i]
		switch {
		case eventType == "" && e.events.Pattern() != "*":
			continue
		case e.events.Literal() && e.events.Pattern() == eventType:
			return e
		case !e.events.Match(eventType):
			continue
		}
		if n := len(e.events.Pattern()) - strings.Count(e.events.Pattern(), "*"); n > bestLen {
			best, bestLen = e, n
		}
	}
	return best
}

// Check checks an event's body against the schema its type gets (see
// schemaFor): nil when it is valid or no schema applies,
// else a *Error (a body that is not JSON is invalid). Cost: one
// JSON parse of the body and one validation when a schema applies;
// nothing otherwise.
func (s *Set) Check(eventType string, body []byte) error {
	e := s.schemaFor(eventType)
	if e == nil {
		return nil
	}
	// jsonptr.Decode gives the tree the library's own UnmarshalJSON gives,
	// at about a third of its cost; it refuses what is not valid UTF-8,
	// which the library reads (replacing the bytes), so such a body, and
	// one that is not JSON, goes the library's way.
	doc, ok := jsonptr.Decode(body)
	if !ok {
		var err error
		if doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(body)); err != nil {
			return &Error{Schema: e.file, Problems: []string{cut("the body is not JSON: "+err.Error(), maxPayloadProblemSize)}}
		}
	}
	err := e.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Schema: e.file, Problems: []string{cut(err.Error(), maxPayloadProblemSize)}}
	}
	// The validator's causes come in no fixed order (an object's
	// properties are checked from a map): sort the violations by where they
	// are, so the same body always gets the same message and keeps the same
	// first maxPayloadProblems.
	type problem struct{ at, msg string }
	var all []problem
	leaves(ve, func(l *jsonschema.ValidationError) {
		all = append(all, problem{at: strings.Join(l.InstanceLocation, "/"), msg: l.Error()})
	})
	slices.SortFunc(all, func(a, b problem) int { return cmp.Or(strings.Compare(a.at, b.at), strings.Compare(a.msg, b.msg)) })
	pe := &Error{Schema: e.file}
	for _, pr := range all[:min(len(all), maxPayloadProblems)] {
		pe.Problems = append(pe.Problems, cut(pr.msg, maxPayloadProblemSize))
	}
	if len(pe.Problems) == 0 {
		pe.Problems = []string{cut(ve.Error(), maxPayloadProblemSize)}
	}
	return pe
}

// leaves calls f on each violation without causes, depth first.
func leaves(e *jsonschema.ValidationError, f func(*jsonschema.ValidationError)) {
	if len(e.Causes) == 0 {
		f(e)
		return
	}
	for _, c := range e.Causes {
		leaves(c, f)
	}
}

// cut shortens s to at most n bytes, on a rune boundary, one line.
func cut(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\n", " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
