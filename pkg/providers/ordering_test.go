package providers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers/ordering"
)

// TestOrderingEntity: the file's ordering: gives each provider the rule
// its entities are read by (what an entity is: ordering.TestEntity).
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
    placement_from: 2026-11-28T17:30:00+01:00
  plain:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id}
`, env{"S1": "whsec_dGVzdA=="})
	s, _ := r.Get("s")
	g, _ := r.Get("g")
	plain, _ := r.Get("plain")
	for _, tc := range []struct {
		name string
		p    *Provider
		h    http.Header
		body string
		want string
	}{
		{"a string at the pointer", s, nil, `{"data":{"object":{"customer":"cus_1"}}}`, "cus_1"},
		{"a header", g, http.Header{"X-Entity": {"team-7"}}, `{"id":"1"}`, "team-7"},
		{"no header", g, http.Header{}, `{"id":"1"}`, ""},
		{"not ordered", plain, nil, `{"id":"1"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ordering.Entity(tc.p.orderRule, tc.h, []byte(tc.body)); got != tc.want {
				t.Fatalf("entity %q, want %q", got, tc.want)
			}
		})
	}
	if !s.Ordered() || plain.Ordered() {
		t.Fatal("Ordered wrong")
	}
	if s.OrderingRule() != "json /data/object/customer" || g.OrderingRule() != "header X-Entity" || plain.OrderingRule() != "" {
		t.Errorf("OrderingRule: %q, %q, %q", s.OrderingRule(), g.OrderingRule(), plain.OrderingRule())
	}
	if want := time.Date(2026, 11, 28, 16, 30, 0, 0, time.UTC); !g.PlacementFrom.Equal(want) || g.PlacementFrom.Location() != time.UTC || !s.PlacementFrom.IsZero() {
		t.Errorf("PlacementFrom: g %v, s %v; want g %v, s none", g.PlacementFrom, s.PlacementFrom, want)
	}
	if _, err := Parse([]byte("providers:\n  x:\n    preset: generic\n    signature: {none: true}\n    placement_from: yesterday\n"), env{}.lookup); err == nil || !strings.Contains(err.Error(), "placement_from") {
		t.Fatalf("placement_from: yesterday: %v", err)
	}
	if _, err := Parse([]byte("providers:\n  x:\n    preset: generic\n    signature: {none: true}\n    ordering: {json: [/a, /b]}\n"), env{}.lookup); err == nil || !strings.Contains(err.Error(), "ordering") {
		t.Fatalf("two pointers: %v", err)
	}
}
