package providers

import (
	"slices"
	"testing"

	"github.com/hookline/hookline/pkg/providers/glob"
)

// TestNamedEventTypes: every event type pattern a provider's entry names,
// from routes (in name order), schema entries and key parts (a preset's
// own included), each once; none for a provider that names none.
func TestNamedEventTypes(t *testing.T) {
	dir := mustSchemaDir(t, map[string]string{"any.json": `{"type": "object"}`})
	r, err := parse([]byte(`
providers:
  s:
    preset: generic
    signature: {none: true}
    event_type: {json: /type}
    idempotency_key:
      parts:
        - {json: /type}
        - {json: /id}
        - {json: /at, optional: true, events: ["order.paid", "refund.*"]}
    schema: {"order.*": order.json, "*": any.json, "invoice.paid": any.json}
    routes:
      b: {events: ["invoice.*", "payment_intent.succeeded", "*.deleted"], destination: {url: "http://x/"}}
      a: {events: ["invoice.paid", "customer.created"], destination: {url: "http://x/"}}
      c: {otherwise: true, destination: {url: "http://x/"}}
  retell: {preset: retell, secret_env: [S1], destination: {url: "http://x/"}}
  plain: {preset: stripe, secret_env: [S1], destination: {url: "http://x/"}}
`), dir, testEnv().lookup, verifySecrets)
	if err != nil {
		t.Fatal(err)
	}
	patterns := func(gs []glob.Glob) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.Pattern())
		}
		return out
	}
	for _, tc := range []struct {
		provider string
		want     []string
	}{
		{"s", []string{"invoice.paid", "customer.created", "invoice.*", "payment_intent.succeeded", "*.deleted", "order.*", "*", "order.paid", "refund.*"}},
		{"retell", []string{"call_ended"}}, // the preset's key part for call_ended
		{"plain", nil},
	} {
		got := patterns(mustGet(t, r, tc.provider).NamedEventTypes())
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: NamedEventTypes = %q, want %q", tc.provider, got, tc.want)
		}
		if all := patterns(r.NamedEventTypes()[tc.provider]); !slices.Equal(all, tc.want) {
			t.Errorf("%s: Registry.NamedEventTypes = %q, want %q", tc.provider, all, tc.want)
		}
	}
}
