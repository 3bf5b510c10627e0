package providers

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/glob"
)

// Payload schemas. A provider's schema: in the providers file is a JSON
// Schema file (path relative to the providers file's directory) for every
// event, or a mapping from event types or globs (as a route's events
// write them) to files:
//
//	schema: schemas/acme.json
//	schema: {"invoice.*": invoice.json, invoice.paid: paid.json, "*": any.json}
//
// The most specific entry wins: the event type written literally, else the
// glob with the most characters besides '*' (the first listed on a tie);
// "*" is the fallback, and the only entry an event without a type matches.
// An event no entry matches is not checked. on_invalid says what an
// invalid body becomes: dlq (default) is accepted and marked
// (headers.InvalidPayload) for the processor to dead-letter without a call,
// reject is refused 422 by ingest.

// On_invalid values.
const (
	OnInvalidDLQ    = "dlq"
	OnInvalidReject = "reject"
)

// Bounds of a PayloadError: the violations it lists, and each one's
// length.
const (
	maxPayloadProblems    = 5
	maxPayloadProblemSize = 200
)

// PayloadError says an event's body does not satisfy its schema: not JSON,
// or the first few violations (at most 5, each at most 200 bytes).
type PayloadError struct {
	Schema   string   // the schema file as the providers file names it
	Problems []string // "at '/amount': got string, want number"
}

// Error is "schema <file>: <problem>; <problem>...".
func (e *PayloadError) Error() string {
	return "schema " + e.Schema + ": " + strings.Join(e.Problems, "; ")
}

// schemaEntry is one entry of schema: the glob ("*" for a schema of every
// event) and its compiled file.
type schemaEntry struct {
	events glob.Glob
	file   string // as written in the providers file
	schema *jsonschema.Schema
}

// schemaConfig is schema: a path, or a mapping of globs to paths (in file
// order).
type schemaConfig struct {
	path    string
	entries [][2]string // glob, path
}

func (c *schemaConfig) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		c.path = n.Value
		if c.path == "" {
			return fmt.Errorf("line %d: schema: empty: want a JSON Schema file, or a mapping of event types to files", n.Line)
		}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: schema[%q]: want a JSON Schema file", v.Line, k.Value)
			}
			c.entries = append(c.entries, [2]string{k.Value, v.Value})
		}
		if len(c.entries) == 0 {
			return fmt.Errorf("line %d: schema: empty mapping: list event types (or globs) and their JSON Schema files", n.Line)
		}
		return nil
	}
	return fmt.Errorf("line %d: schema: want a JSON Schema file, or a mapping of event types to files", n.Line)
}

// buildSchemas compiles schema: and checks on_invalid, reading files
// relative to dir.
func (c *providerConfig) buildSchemas(p *Provider, dir string) []error {
	var errs []error
	switch c.OnInvalid {
	case "", OnInvalidDLQ:
	case OnInvalidReject:
		p.rejectInvalid = true
	default:
		errs = append(errs, fmt.Errorf("on_invalid: %q: want dlq (accept, then the DLQ as invalid_payload) or reject (422)", c.OnInvalid))
	}
	if c.Schema == nil {
		if c.OnInvalid != "" {
			errs = append(errs, fmt.Errorf("on_invalid: set without schema: nothing is checked"))
		}
		return errs
	}
	if c.Schema.path != "" {
		s, err := compileSchema(dir, c.Schema.path)
		if err != nil {
			return append(errs, fmt.Errorf("schema: %w", err))
		}
		p.schemas = []schemaEntry{{events: glob.MustCompile("*"), file: c.Schema.path, schema: s}}
		return errs
	}
	for _, e := range c.Schema.entries {
		g, err := glob.Compile(e[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("schema: %w", err))
			continue
		}
		if e[1] == "" {
			errs = append(errs, fmt.Errorf("schema[%q]: empty: want a JSON Schema file", e[0]))
			continue
		}
		s, err := compileSchema(dir, e[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("schema[%q]: %w", e[0], err))
			continue
		}
		p.schemas = append(p.schemas, schemaEntry{events: g, file: e[1], schema: s})
	}
	return errs
}

// compileSchema reads and compiles one JSON Schema file (draft 2020-12
// unless its $schema says otherwise; $refs to other local files are
// followed, nothing is fetched over the network).
func compileSchema(dir, file string) (*jsonschema.Schema, error) {
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
func (p *Provider) schemaFor(eventType string) *schemaEntry {
	var best *schemaEntry
	bestLen := -1
	for i := range p.schemas {
		e := &p.schemas[i]
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

// HasSchema reports whether the provider checks bodies against a schema
// (schema: in the providers file). Cost: none.
func (p *Provider) HasSchema() bool { return len(p.schemas) > 0 }

// RejectsInvalid reports whether an invalid body is refused (on_invalid:
// reject, 422) rather than accepted for the DLQ. Cost: none.
func (p *Provider) RejectsInvalid() bool { return p.rejectInvalid }

// CheckPayload checks an event's body against the schema its type gets
// (see the file's schema:): nil when it is valid or no schema applies,
// else a *PayloadError (a body that is not JSON is invalid). Cost: one
// JSON parse of the body and one validation when a schema applies;
// nothing otherwise.
func (p *Provider) CheckPayload(eventType string, body []byte) error {
	e := p.schemaFor(eventType)
	if e == nil {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return &PayloadError{Schema: e.file, Problems: []string{cut("the body is not JSON: "+err.Error(), maxPayloadProblemSize)}}
	}
	err = e.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &PayloadError{Schema: e.file, Problems: []string{cut(err.Error(), maxPayloadProblemSize)}}
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
	pe := &PayloadError{Schema: e.file}
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
