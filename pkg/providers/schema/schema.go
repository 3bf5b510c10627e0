// Package schema checks event bodies against a provider's JSON Schema
// files: a Set of entries, each an event type glob and its compiled file;
// the most specific entry that matches an event's type applies (see
// Set.Check). What the providers file's schema: and on_invalid say is read
// by the providers package.
package schema

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hookline/hookline/pkg/providers/glob"
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
// zero Set checks nothing. A Set is not changed after Load, so it is safe
// for concurrent use.
type Set struct{ entries []entry }

// Add compiles file (relative to dir unless absolute) and adds it for the
// event types events matches; file is kept as written for messages.
func (s *Set) Add(events glob.Glob, dir, file string) error {
	sch, err := compile(dir, file)
	if err != nil {
		return err
	}
	s.entries = append(s.entries, entry{events: events, file: file, schema: sch})
	return nil
}

// Len is the number of entries. Cost: none.
func (s *Set) Len() int { return len(s.entries) }

// Globs are the entries' event type globs, in the order they were added
// ("*" for a schema of every event). Cost: one slice.
func (s *Set) Globs() []glob.Glob {
	out := make([]glob.Glob, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.events)
	}
	return out
}

// compile reads and compiles one JSON Schema file (draft 2020-12
// unless its $schema says otherwise; $refs to other local files are
// followed, nothing is fetched over the network).
func compile(dir, file string) (*jsonschema.Schema, error) {
	path := file
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	s, err := c.Compile(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

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
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return &Error{Schema: e.file, Problems: []string{cut("the body is not JSON: "+err.Error(), maxPayloadProblemSize)}}
	}
	err = e.schema.Validate(doc)
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
