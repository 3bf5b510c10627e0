package e2e

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
)

// TestProvidersFileWithoutRoutes: the harness's file without routes is the
// one it always wrote: every provider delivers to the destination.
func TestProvidersFileWithoutRoutes(t *testing.T) {
	s := &System{tb: t, Prefix: "t.", Dest: NewDestination(t)}
	env := map[string]string{"E2E_SECRET": Secret, "E2E_STD_SECRET": "whsec_ZTJlLXNlY3JldA=="}
	reg, err := providers.Parse([]byte(s.providersFile(Options{}, nil)), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range MixedProviders {
		p, ok := reg.Get(name)
		if !ok || p.Preset != name || p.Destination == nil || p.Destination.URL != s.Dest.URL() || p.Destination.Timeout != 5*time.Second {
			t.Errorf("provider %s: %+v", name, p)
		}
	}
	if p, ok := reg.Get("outcomes"); !ok || p.Destination != nil {
		t.Errorf("provider outcomes: %+v", p)
	}
}

// TestProvidersFileRoutes: a provider given routes has them in its entry
// as issue 22's contract spells them, and no provider-level destination.
func TestProvidersFileRoutes(t *testing.T) {
	s := &System{tb: t, Prefix: "t-x.", Dest: NewDestination(t)}
	o := Options{Routes: map[string][]Route{"stripe": {
		{Name: "billing", Events: []string{"invoice.*", "payment_intent.succeeded"}, Timeout: 10 * time.Second, MaxInflight: 4,
			Priority: "critical", Tiers: []string{"1s", "2s"}},
		{Name: "audit"},
		{Name: "book", Topic: "billing.book"},
	}}}
	checkRoutes(t, o.Routes)
	var file struct {
		Providers map[string]map[string]any
	}
	if err := yaml.Unmarshal([]byte(s.providersFile(o, nil)), &file); err != nil {
		t.Fatal(err)
	}
	stripe := file.Providers["stripe"]
	want := map[string]any{
		"preset": "stripe", "secret_env": []any{"E2E_SECRET"},
		"routes": map[string]any{
			"billing": map[string]any{
				"events":      []any{"invoice.*", "payment_intent.succeeded"},
				"destination": map[string]any{"url": s.Dest.RouteURL("billing"), "timeout": "10s", "max_inflight": 4},
				"priority":    "critical",
				"retry":       map[string]any{"tiers": []any{"1s", "2s"}},
			},
			"audit": map[string]any{"destination": map[string]any{"url": s.Dest.RouteURL("audit")}},
			"book":  map[string]any{"destination": map[string]any{"topic": "t-x.billing.book"}},
		},
	}
	if !reflect.DeepEqual(stripe, want) {
		t.Errorf("stripe's entry\n got  %#v\n want %#v", stripe, want)
	}
	if d, ok := file.Providers["github"]["destination"].(map[string]any); !ok || d["url"] != s.Dest.URL() {
		t.Errorf("github keeps its provider-level destination: %#v", file.Providers["github"])
	}
	if got := s.routesOf("stripe:1", "customer.created", nil); !reflect.DeepEqual(got, []string{"default"}) {
		t.Errorf("routesOf without routes given to the system: %v, want [default]", got)
	}
	// providers.Load reads the same routes, and matches the kit's event
	// types as the kit expects.
	env := map[string]string{"E2E_SECRET": Secret, "E2E_STD_SECRET": "whsec_ZTJlLXNlY3JldA=="}
	reg, err := providers.Parse([]byte(s.providersFile(o, nil)), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.Get("stripe")
	billing, ok := p.Route("billing")
	if !ok || billing.Destination.URL != s.Dest.RouteURL("billing") || billing.Destination.Timeout != 10*time.Second ||
		billing.Destination.MaxInflight != 4 || billing.Priority.String() != "critical" || billing.Retry == nil ||
		!reflect.DeepEqual(billing.Retry.Tiers, []time.Duration{time.Second, 2 * time.Second}) {
		t.Errorf("route billing as loaded: %+v (destination %+v)", billing, billing.Destination)
	}
	if book, ok := p.Route("book"); !ok || book.Destination.Topic != "t-x.billing.book" {
		t.Errorf("route book as loaded: %+v", book)
	}
	s.routes = o.Routes
	for _, typ := range []string{"invoice.paid", "payment_intent.succeeded", "customer.created", ""} {
		var loaded []string
		for _, r := range p.Match(route.Request{EventType: typ, Body: NewTypedEvent("stripe", "1", typ).Body}, nil) {
			loaded = append(loaded, r.Name)
		}
		kit := s.routesOf("stripe:1", typ, nil)
		slices.Sort(kit)
		if !reflect.DeepEqual(loaded, kit) {
			t.Errorf("event type %q: providers matches %v, the kit expects %v", typ, loaded, kit)
		}
	}
	for _, c := range []struct {
		key, typ string
		want     []string
	}{
		{"stripe:1", "invoice.paid", []string{"billing", "audit", "book"}},
		{"stripe:2", "payment_intent.succeeded", []string{"billing", "audit", "book"}},
		{"stripe:3", "customer.created", []string{"audit", "book"}},
		{"github:4", "issues", []string{"default"}},
	} {
		if got := s.routesOf(c.key, c.typ, nil); !reflect.DeepEqual(got, c.want) {
			t.Errorf("routesOf(%s, %s) = %v, want %v", c.key, c.typ, got, c.want)
		}
	}
}

// TestProvidersFileOtherwise: an otherwise route is written as
// otherwise: true, and the kit expects it exactly where providers.Match
// delivers: for the events no other route takes.
func TestProvidersFileOtherwise(t *testing.T) {
	s := &System{tb: t, Prefix: "t-o.", Dest: NewDestination(t)}
	o := Options{Routes: map[string][]Route{"stripe": {
		{Name: "billing", Events: []string{"invoice.*"}},
		{Name: "rest", Otherwise: true},
	}}}
	checkRoutes(t, o.Routes)
	env := map[string]string{"E2E_SECRET": Secret, "E2E_STD_SECRET": "whsec_ZTJlLXNlY3JldA=="}
	reg, err := providers.Parse([]byte(s.providersFile(o, nil)), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.Get("stripe")
	if rest, ok := p.Route("rest"); !ok || !rest.Otherwise {
		t.Fatalf("route rest as loaded: %+v", rest)
	}
	s.routes = o.Routes
	for typ, want := range map[string][]string{"invoice.paid": {"billing"}, "customer.created": {"rest"}, "": {"rest"}} {
		var loaded []string
		body := NewTypedEvent("stripe", "1", typ).Body
		for _, r := range p.Match(route.Request{EventType: typ, Body: body}, nil) {
			loaded = append(loaded, r.Name)
		}
		if kit := s.routesOf("stripe:1", typ, body); !reflect.DeepEqual(loaded, want) || !reflect.DeepEqual(kit, want) {
			t.Errorf("event type %q: providers matches %v, the kit expects %v, want %v", typ, loaded, kit, want)
		}
	}
}
