package providers

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/schema"
)

// Payload schemas. A provider's schema: in the providers file is a JSON
// Schema file (path relative to the providers file's directory) for every
// event, or a mapping from event types or globs (as a route's events
// write them) to files:
//
//	schema: schemas/acme.json
//	schema: {"invoice.*": invoice.json, invoice.paid: paid.json, "*": any.json}
//	schema: {push: github.json#/definitions/push$event, issues: github.json#/definitions/issues_event}
//
// A file may be followed by a JSON pointer (a URI fragment) to a place in
// it, so that one published file gives each event type its own definition
// (package schema). The most specific entry wins: the event type written
// literally, else the glob with the most characters besides '*' (the first
// listed on a tie); "*" is the fallback, and the only entry an event
// without a type matches. An event no entry matches is not checked.
// on_invalid says what an invalid body becomes: dlq (default) is accepted
// unchecked by ingest, and the processor checks it and dead-letters it
// without a call (headers.InvalidPayload on its DLQ copy); reject is
// checked and refused 422 by ingest. schema_formats says
// whether format is checked: annotate (default, as draft 2019-09 and the
// common validators do) or assert.

// On_invalid values.
const (
	OnInvalidDLQ    = "dlq"
	OnInvalidReject = "reject"
)

// schemaConfig is schema: a path, or a mapping of globs to paths (in file
// order).
type schemaConfig struct {
	path    string
	entries [][2]string // glob, path
}

func (c *schemaConfig) UnmarshalYAML(n *yaml.Node) error {
	var err error
	c.path, c.entries, err = globMapping(n, "schema", "a JSON Schema file", "files")
	if err == nil && n.Kind == yaml.ScalarNode && c.path == "" {
		err = fmt.Errorf("line %d: schema: empty: want a JSON Schema file, or a mapping of event types to files", n.Line)
	}
	return err
}

// globMapping reads a providers-file field that is one value for every
// event, or a mapping of event types (or globs) to values, in file order:
// schema: and dedup_ttl:. want names one value ("a JSON Schema file"),
// plural the values of a mapping ("files"), for the errors.
func globMapping(n *yaml.Node, field, want, plural string) (one string, entries [][2]string, err error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil, nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return "", nil, fmt.Errorf("line %d: %s[%q]: want %s", v.Line, field, k.Value, want)
			}
			entries = append(entries, [2]string{k.Value, v.Value})
		}
		if len(entries) == 0 {
			return "", nil, fmt.Errorf("line %d: %s: empty mapping: list event types (or globs) and their %s", n.Line, field, plural)
		}
		return "", entries, nil
	}
	return "", nil, fmt.Errorf("line %d: %s: want %s, or a mapping of event types to %s", n.Line, field, want, plural)
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
	switch c.SchemaFormats {
	case "", schema.FormatsAnnotate:
	case schema.FormatsAssert:
		p.schemas.AssertFormats()
	default:
		errs = append(errs, fmt.Errorf("schema_formats: %q: want annotate (format is not checked, the default) or assert", c.SchemaFormats))
	}
	if c.Schema == nil {
		if c.OnInvalid != "" {
			errs = append(errs, fmt.Errorf("on_invalid: set without schema: nothing is checked"))
		}
		if c.SchemaFormats != "" {
			errs = append(errs, fmt.Errorf("schema_formats: set without schema: nothing is checked"))
		}
		return errs
	}
	if c.Schema.path != "" {
		if err := p.schemas.Add(glob.MustCompile("*"), dir, c.Schema.path); err != nil {
			return append(errs, fmt.Errorf("schema: %w", err))
		}
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
		if err := p.schemas.Add(g, dir, e[1]); err != nil {
			errs = append(errs, fmt.Errorf("schema[%q]: %w", e[0], err))
		}
	}
	return errs
}

// HasSchema reports whether the provider checks bodies against a schema
// (schema: in the providers file). Cost: none.
func (p *Provider) HasSchema() bool { return p.schemas.Len() > 0 }

// RejectsInvalid reports whether an invalid body is refused (on_invalid:
// reject, 422) rather than accepted for the DLQ. Cost: none.
func (p *Provider) RejectsInvalid() bool { return p.rejectInvalid }

// CheckPayload checks an event's body against the schema its type gets
// (see the file's schema:): nil when it is valid or no schema applies,
// else a *schema.Error (a body that is not JSON is invalid). Cost: one
// JSON parse of the body and one validation when a schema applies;
// nothing otherwise.
func (p *Provider) CheckPayload(eventType string, body []byte) error {
	return p.schemas.Check(eventType, body)
}
