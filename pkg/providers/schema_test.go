package providers

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/schema"
)

// exampleSchema is docs/providers.md's order schema, relative to this package.
const exampleSchema = "../../compose/schemas/order.schema.json"

// mustSchemaDir writes files into a temporary directory and copies the
// example schema there as order.json; it returns the directory.
func mustSchemaDir(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	b, err := os.ReadFile(exampleSchema)
	if err != nil {
		tb.Fatal(err)
	}
	files["order.json"] = string(b)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

const shopYAML = `
providers:
  shop:
    preset: generic
    signature: {none: true}
    event_type: {json: /type}
    idempotency_key: {json: /id}
`

func TestLoadSchemas(t *testing.T) {
	dir := mustSchemaDir(t, map[string]string{
		"any.json":     `{"type": "object", "required": ["id"]}`,
		"paid.json":    `{"type": "object", "required": ["paid_at"]}`,
		"bad.json":     `{"type": 7}`,
		"garbled.json": `{"type": `,
		"defs.json":    `{"definitions": {"paid": {"type": "object", "required": ["paid_at"]}}}`,
	})
	cases := []struct {
		name    string
		extra   string // the provider's schema and on_invalid lines
		wantErr string // "" loads
		reject  bool
	}{
		{name: "one file for every event", extra: "    schema: order.json\n"},
		{name: "reject", extra: "    schema: order.json\n    on_invalid: reject\n", reject: true},
		{name: "dlq said", extra: "    schema: order.json\n    on_invalid: dlq\n"},
		{name: "per event type", extra: "    schema: {\"order.*\": order.json, order.paid: paid.json, \"*\": any.json}\n"},
		{name: "missing file", extra: "    schema: nowhere.json\n", wantErr: `provider "shop": schema: nowhere.json:`},
		{name: "missing file of an event type", extra: "    schema: {order.paid: nowhere.json}\n", wantErr: `provider "shop": schema["order.paid"]: nowhere.json:`},
		{name: "not a schema", extra: "    schema: bad.json\n", wantErr: `provider "shop": schema: bad.json:`},
		{name: "not JSON", extra: "    schema: garbled.json\n", wantErr: `provider "shop": schema: garbled.json:`},
		{name: "unknown on_invalid", extra: "    schema: order.json\n    on_invalid: drop\n", wantErr: `provider "shop": on_invalid: "drop": want dlq`},
		{name: "on_invalid without schema", extra: "    on_invalid: reject\n", wantErr: `provider "shop": on_invalid: set without schema`},
		{name: "bad glob", extra: "    schema: {\"order.**\": order.json}\n", wantErr: `provider "shop": schema: "order.**": ** is the same as *`},
		{name: "empty mapping", extra: "    schema: {}\n", wantErr: `schema: empty mapping`},
		{name: "a list", extra: "    schema: [order.json]\n", wantErr: `schema: want a JSON Schema file`},
		{name: "a definition in a file", extra: "    schema: {order.paid: \"defs.json#/definitions/paid\", \"*\": order.json}\n"},
		{name: "a pointer to nothing", extra: "    schema: {order.paid: \"defs.json#/definitions/gone\"}\n",
			wantErr: `provider "shop": schema["order.paid"]: defs.json#/definitions/gone: /definitions/gone leads to nothing in defs.json`},
		{name: "formats asserted", extra: "    schema: order.json\n    schema_formats: assert\n"},
		{name: "formats annotated", extra: "    schema: order.json\n    schema_formats: annotate\n"},
		{name: "unknown schema_formats", extra: "    schema: order.json\n    schema_formats: strict\n", wantErr: `provider "shop": schema_formats: "strict": want annotate`},
		{name: "schema_formats without schema", extra: "    schema_formats: assert\n", wantErr: `provider "shop": schema_formats: set without schema`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "providers.yaml")
			if err := os.WriteFile(path, []byte(shopYAML+tc.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Load(path, env{}.lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load: got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			p := mustGet(t, r, "shop")
			if !p.HasSchema() || p.RejectsInvalid() != tc.reject {
				t.Fatalf("HasSchema %v, RejectsInvalid %v; want true, %v", p.HasSchema(), p.RejectsInvalid(), tc.reject)
			}
		})
	}
}

func TestCheckPayload(t *testing.T) {
	dir := mustSchemaDir(t, map[string]string{
		"any.json":  `{"type": "object", "required": ["id"]}`,
		"paid.json": `{"type": "object", "required": ["paid_at"]}`,
	})
	path := filepath.Join(dir, "providers.yaml")
	yml := shopYAML + "    schema: {\"order.*\": order.json, order.paid: paid.json, \"*\": any.json}\n" +
		"  plain:\n    preset: generic\n    signature: {none: true}\n"
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadForProcessor(path, env{}.lookup) // the processor compiles them too
	if err != nil {
		t.Fatal(err)
	}
	shop, plain := mustGet(t, r, "shop"), mustGet(t, r, "plain")
	const order = `{"id":"e1","type":"order.created","data":{"order_id":"o1","amount":1200,"currency":"EUR"}}`
	cases := []struct {
		name      string
		p         *Provider
		eventType string
		body      string
		schema    string // "" valid
		problem   string
	}{
		{name: "valid order", p: shop, eventType: "order.created", body: order},
		{name: "glob: order.json", p: shop, eventType: "order.created", body: `{"id":"e1","type":"order.created","data":{"order_id":"o1","amount":"12","currency":"EUR"}}`,
			schema: "order.json", problem: "at '/data/amount': got string, want integer"},
		{name: "literal wins over the glob", p: shop, eventType: "order.paid", body: order, schema: "paid.json", problem: "missing property 'paid_at'"},
		{name: "literal: valid", p: shop, eventType: "order.paid", body: `{"paid_at":1}`},
		{name: "* for other types", p: shop, eventType: "customer.created", body: `{"name":"x"}`, schema: "any.json", problem: "missing property 'id'"},
		{name: "* for an event without a type", p: shop, eventType: "", body: `{}`, schema: "any.json"},
		{name: "not JSON", p: shop, eventType: "order.created", body: `id=1`, schema: "order.json", problem: "the body is not JSON"},
		{name: "trailing bytes are not JSON", p: shop, eventType: "order.created", body: order + `{}`, schema: "order.json", problem: "the body is not JSON"},
		{name: "no schema: nothing checked", p: plain, eventType: "x", body: `not json`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.CheckPayload(tc.eventType, []byte(tc.body))
			if tc.schema == "" {
				if err != nil {
					t.Fatalf("CheckPayload: %v", err)
				}
				return
			}
			var pe *schema.Error
			if !errors.As(err, &pe) {
				t.Fatalf("CheckPayload: got %v, want a *schema.Error", err)
			}
			if pe.Schema != tc.schema || !strings.Contains(err.Error(), tc.problem) {
				t.Fatalf("got %q (schema %s), want schema %s and %q", err, pe.Schema, tc.schema, tc.problem)
			}
		})
	}
}
