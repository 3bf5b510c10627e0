package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileDoc compiles a schema document as decoded, formats not asserted.
func compileDoc(t *testing.T, doc any, ptr string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	annotateFormats(c)
	if err := c.AddResource("mem:///s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///s.json" + ptr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decode(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDispatchSameVerdicts checks a rewritten oneOf or anyOf accepts and
// refuses the same bodies as the original, and that shapes without a
// discriminator are left as they are.
func TestDispatchSameVerdicts(t *testing.T) {
	const branches = `"definitions": {
		"opened": {"type": "object", "required": ["action", "n"], "properties": {"action": {"enum": ["opened"]}, "n": {"type": "integer"}}},
		"closed": {"type": "object", "required": ["action"], "properties": {"action": {"const": "closed"}, "merged": {"type": "boolean"}}, "additionalProperties": false},
		"edited": {"type": "object", "required": ["action", "changes"], "properties": {"action": {"type": "string", "enum": ["edited", "renamed"]}}}
	}`
	bodies := []string{
		`{"action":"opened","n":1}`, `{"action":"opened","n":"x"}`, `{"action":"opened"}`,
		`{"action":"closed"}`, `{"action":"closed","merged":true}`, `{"action":"closed","other":1}`,
		`{"action":"edited","changes":{}}`, `{"action":"renamed"}`, `{"action":"deleted"}`, `{"n":1}`, `{"action":1}`, `[]`, `"opened"`,
		`{"action":"requested","user":1}`, `{"action":"requested","team":1}`, `{"action":"requested","user":1,"team":1}`, `{"action":"requested"}`,
	}
	cases := []struct {
		name   string
		schema string
		want   int // rewrites
	}{
		{"oneOf of refs", `{"$schema": "http://json-schema.org/draft-07/schema#", ` + branches + `, "oneOf": [{"$ref": "#/definitions/opened"}, {"$ref": "#/definitions/closed"}, {"$ref": "#/definitions/edited"}]}`, 1},
		{"anyOf inline, beside allOf", `{"allOf": [{"type": "object"}], "anyOf": [
			{"required": ["action"], "properties": {"action": {"const": "opened"}}},
			{"required": ["action"], "properties": {"action": {"const": "closed"}}, "maxProperties": 1}]}`, 1},
		{"nested under properties", `{"properties": {"x": {"oneOf": [
			{"required": ["k"], "properties": {"k": {"const": "a"}}}, {"required": ["k"], "properties": {"k": {"const": "b"}}}]}}}`, 1},
		{"a branch of variants of one value", `{"oneOf": [
			{"required": ["action", "n"], "properties": {"action": {"const": "opened"}}},
			{"oneOf": [
				{"required": ["action", "user"], "properties": {"action": {"const": "requested"}}},
				{"required": ["action", "team"], "properties": {"action": {"const": "requested"}}}]}]}`, 1},
		{"values shared: left", `{"oneOf": [
			{"required": ["action"], "properties": {"action": {"enum": ["opened", "closed"]}}},
			{"required": ["action"], "properties": {"action": {"const": "closed"}}}]}`, 0},
		{"not required everywhere: left", `{"oneOf": [
			{"required": ["action"], "properties": {"action": {"const": "opened"}}},
			{"properties": {"action": {"const": "closed"}}}]}`, 0},
		{"numbers: left", `{"oneOf": [
			{"required": ["v"], "properties": {"v": {"const": 1}}}, {"required": ["v"], "properties": {"v": {"const": 2}}}]}`, 0},
		{"enum data untouched", `{"enum": [{"oneOf": [{"required": ["a"], "properties": {"a": {"const": "x"}}}, {"required": ["a"], "properties": {"a": {"const": "y"}}}]}]}`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := decode(t, tc.schema)
			rewritten := decode(t, tc.schema)
			if n := dispatch(rewritten); n != tc.want {
				t.Fatalf("%d rewrites, want %d", n, tc.want)
			}
			if tc.want == 0 && !reflect.DeepEqual(orig, rewritten) {
				t.Fatal("a schema without a discriminator was changed")
			}
			so, sr := compileDoc(t, orig, ""), compileDoc(t, rewritten, "")
			for _, b := range bodies {
				vo, vr := so.Validate(decode(t, b)) == nil, sr.Validate(decode(t, b)) == nil
				if vo != vr {
					t.Errorf("%s: valid %v as published, %v rewritten", b, vo, vr)
				}
			}
		})
	}
}

// TestDispatchRewritesEachBranchOnce checks the chain names every branch
// once, in order, and ends refusing what no branch takes.
func TestDispatchRewritesEachBranchOnce(t *testing.T) {
	doc := decode(t, `{"oneOf": [{"required": ["t"], "properties": {"t": {"const": "a"}}}, {"required": ["t"], "properties": {"t": {"enum": ["c", "b"]}}}]}`)
	if dispatch(doc) != 1 {
		t.Fatal("not rewritten")
	}
	got, _ := json.Marshal(doc)
	want := `{"allOf":[{"else":{"else":{"properties":{"t":{"enum":["a","b","c"]}},"required":["t"]},` +
		`"if":{"properties":{"t":{"enum":["c","b"]}},"required":["t"]},"then":{"properties":{"t":{"enum":["c","b"]}},"required":["t"]}},` +
		`"if":{"properties":{"t":{"enum":["a"]}},"required":["t"]},"then":{"properties":{"t":{"const":"a"}},"required":["t"]}}]}`
	if string(got) != want {
		t.Errorf("rewritten\n got  %s\n want %s", got, want)
	}
}
