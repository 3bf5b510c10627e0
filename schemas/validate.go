package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Schema names, as Validate takes them: the file name without
// ".schema.json".
const (
	State     = "state"
	Outcome   = "outcome"
	DLQStatus = "dlq-status"
	Headers   = "headers"
	Errors    = "errors"
)

// defs holds shared definitions only; it is loaded, never validated against.
const defs = "defs"

// baseURL is the $id prefix of every schema file; relative $refs between the
// files resolve against it.
const baseURL = "https://github.com/hookline/hookline/schemas/"

//go:embed *.schema.json *.openapi.yaml
var files embed.FS

// compiled compiles every schema once, on first use. It is package-level but
// not mutable state: the compiled schemas are only read.
var compiled = sync.OnceValues(compile)

func compile() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertContent() // hookline.errors is JSON inside a string: check it against errors.schema.json
	names, err := fs.Glob(files, "*.schema.json")
	if err != nil {
		return nil, err
	}
	for _, file := range names {
		b, err := files.ReadFile(file)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", file, err)
		}
		if err := c.AddResource(baseURL+file, doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", file, err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(names))
	for _, file := range names {
		name := strings.TrimSuffix(file, ".schema.json")
		if name == defs {
			continue
		}
		if out[name], err = c.Compile(baseURL + file); err != nil {
			return nil, fmt.Errorf("compile schema %s: %w", file, err)
		}
	}
	return out, nil
}

// Names returns the names Validate accepts, sorted.
func Names() []string {
	schs, _ := compiled()
	names := make([]string, 0, len(schs))
	for name := range schs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Validate checks the JSON document doc against the schema called name (the
// constants above). The first call compiles every schema (about a
// millisecond); later calls cost one JSON decode and one validation.
func Validate(name string, doc []byte) error {
	schs, err := compiled()
	if err != nil {
		return err
	}
	sch, ok := schs[name]
	if !ok {
		return fmt.Errorf("unknown schema %q (have %s)", name, strings.Join(Names(), ", "))
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not JSON: %w", name, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// ValidateHeaders checks a record's headers against the headers schema. A
// header name that appears twice is an error of its own, since the schema's
// object form cannot show it.
func ValidateHeaders(hs []kgo.RecordHeader) error {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		if _, dup := m[h.Key]; dup {
			return fmt.Errorf("%s: header %q appears twice", Headers, h.Key)
		}
		m[h.Key] = string(h.Value)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return Validate(Headers, b)
}
