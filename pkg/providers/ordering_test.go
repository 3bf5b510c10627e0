package providers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/ordering"
)

func TestOrderingEntity(t *testing.T) {
	r := mustParse(t, `
providers:
  s:
    preset: stripe
    secret_env: [S1]
    ordering: {json: /data/object/customer}
  g:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id}
    ordering: {header: X-Entity}
  plain:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id}
`, env{"S1": "whsec_dGVzdA=="})
	s, _ := r.Get("s")
	g, _ := r.Get("g")
	plain, _ := r.Get("plain")
	long := strings.Repeat("c", ordering.MaxEntityLen+1)
	for _, tc := range []struct {
		name string
		p    *Provider
		h    http.Header
		body string
		want string
	}{
		{"a string at the pointer", s, nil, `{"data":{"object":{"customer":"cus_1"}}}`, "cus_1"},
		{"a number", s, nil, `{"data":{"object":{"customer":42}}}`, "42"},
		{"no field: its own entity", s, nil, `{"data":{"object":{}}}`, ""},
		{"an object: its own entity", s, nil, `{"data":{"object":{"customer":{"id":1}}}}`, ""},
		{"not JSON: its own entity", s, nil, `customer=cus_1`, ""},
		{"long: hashed", s, nil, `{"data":{"object":{"customer":"` + long + `"}}}`, "sha256:"},
		{"control character: hashed", s, nil, `{"data":{"object":{"customer":"a\nb"}}}`, "sha256:"},
		{"a header", g, http.Header{"X-Entity": {"team-7"}}, `{"id":"1"}`, "team-7"},
		{"no header", g, http.Header{}, `{"id":"1"}`, ""},
		{"not ordered", plain, nil, `{"id":"1"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ordering.Entity(tc.p.orderRule, tc.h, []byte(tc.body))
			if tc.want == "sha256:" {
				if !strings.HasPrefix(got, "sha256:") || len(got) != len("sha256:")+64 {
					t.Fatalf("entity %q, want sha256:<hex>", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("entity %q, want %q", got, tc.want)
			}
		})
	}
	if !s.Ordered() || plain.Ordered() {
		t.Fatal("Ordered wrong")
	}
	if _, err := Parse([]byte("providers:\n  x:\n    preset: generic\n    signature: {none: true}\n    ordering: {json: [/a, /b]}\n"), env{}.lookup); err == nil || !strings.Contains(err.Error(), "ordering") {
		t.Fatalf("two pointers: %v", err)
	}
}
