package control

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// TestSettingKeys: a provider-wide setting keeps its key, a route's has
// its own, and both come back from their records; a reader that knows
// only "provider:" keys (a processor of the version before routes) finds
// none in a route's.
func TestSettingKeys(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		s         Setting
		key, name string
	}{
		{Setting{Provider: "stripe", Paused: true, By: "alice", At: at}, "provider:stripe", "stripe"},
		{Setting{Provider: "stripe", Route: "billing", Rate: 5, By: "bob", At: at}, "route:stripe/billing", "stripe/billing"},
		{Setting{Provider: "stripe", Route: headers.DefaultRoute, Paused: true, At: at}, "route:stripe/default", "stripe/default"},
	} {
		r, err := Record("webhooks.control", tc.s)
		if err != nil {
			t.Fatalf("%+v: %v", tc.s, err)
		}
		if string(r.Key) != tc.key || tc.s.Key() != tc.key || tc.s.Name() != tc.name {
			t.Errorf("%+v: key %s (Key %s), name %s; want %s, %s", tc.s, r.Key, tc.s.Key(), tc.s.Name(), tc.key, tc.name)
		}
		if tc.s.Route != "" && strings.HasPrefix(string(r.Key), keyPrefix) {
			t.Errorf("a route's setting is keyed %s: a processor before routes would read it as provider-wide", r.Key)
		}
		if tc.s.Route == "" && strings.Contains(string(r.Value), `"route"`) {
			t.Errorf("a provider-wide setting writes a route: %s", r.Value)
		}
		got, ok, err := Decode(r)
		if err != nil || !ok || got.Provider != tc.s.Provider || got.Route != tc.s.Route || got.Paused != tc.s.Paused || got.Rate != tc.s.Rate || !got.At.Equal(at) {
			t.Errorf("Decode(Record(%+v)) = %+v, %v, %v", tc.s, got, ok, err)
		}
		tomb, ok, err := Decode(&kgo.Record{Key: r.Key, Timestamp: at})
		if err != nil || !ok || tomb.Provider != tc.s.Provider || tomb.Route != tc.s.Route || tomb.Paused || tomb.Rate != 0 {
			t.Errorf("tombstone of %s: %+v, %v, %v; want it running", r.Key, tomb, ok, err)
		}
	}
}

// TestDecodeOldAndBad: a record written before routes (no route field)
// decodes as it did; a key and a value that disagree, a route key without
// a route and a bad route name are errors; a breaker report is not a
// setting.
func TestDecodeOldAndBad(t *testing.T) {
	old := &kgo.Record{Key: []byte("provider:slowcrm"), Value: []byte(`{"provider":"slowcrm","paused":true,"by":"alice","at":"2026-03-01T12:00:00Z"}`)}
	if s, ok, err := Decode(old); err != nil || !ok || s.Provider != "slowcrm" || s.Route != "" || !s.Paused || s.By != "alice" {
		t.Errorf("a setting written before routes: %+v, %v, %v", s, ok, err)
	}
	for key, value := range map[string]string{
		"provider:stripe":       `{"provider":"stripe","route":"billing","paused":true,"at":"2026-03-01T12:00:00Z"}`,
		"route:stripe/billing":  `{"provider":"stripe","paused":true,"at":"2026-03-01T12:00:00Z"}`,
		"route:stripe/crm":      `{"provider":"stripe","route":"billing","paused":true,"at":"2026-03-01T12:00:00Z"}`,
		"route:stripe":          `{"provider":"stripe","paused":true,"at":"2026-03-01T12:00:00Z"}`,
		"route:stripe/":         `{"provider":"stripe","paused":true,"at":"2026-03-01T12:00:00Z"}`,
		"route:stripe/Bill.ing": `{"provider":"stripe","route":"Bill.ing","paused":true,"at":"2026-03-01T12:00:00Z"}`,
	} {
		if s, ok, err := Decode(&kgo.Record{Key: []byte(key), Value: []byte(value)}); err == nil || !ok {
			t.Errorf("%s = %s: Decode gave %+v, %v, %v; want an error", key, value, s, ok, err)
		}
	}
	if _, ok, err := Decode(&kgo.Record{Key: []byte("breaker:stripe/billing:p1"), Value: []byte(`{}`)}); ok || err != nil {
		t.Errorf("Decode took a breaker report: %v, %v", ok, err)
	}
}

func TestRouteNames(t *testing.T) {
	for _, ok := range []string{"default", "billing", "a", "crm_eu-2", strings.Repeat("x", 40)} {
		if err := CheckRoute(ok); err != nil {
			t.Errorf("CheckRoute(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Billing", "bill.ing", "a/b", "a:b", "a b", strings.Repeat("x", 41)} {
		if err := CheckRoute(bad); err == nil {
			t.Errorf("CheckRoute(%q) took it", bad)
		}
		if err := (Setting{Provider: "stripe", Route: bad}).Validate(); bad != "" && err == nil {
			t.Errorf("a setting of route %q validates", bad)
		}
	}
	if p, r, err := ParseRoute("stripe/billing"); err != nil || p != "stripe" || r != "billing" {
		t.Errorf("ParseRoute(stripe/billing) = %q, %q, %v", p, r, err)
	}
	for _, bad := range []string{"stripe", "stripe/", "/billing", "stripe/billing/x", "stripe/Billing", "a:b/c"} {
		if _, _, err := ParseRoute(bad); err == nil {
			t.Errorf("ParseRoute(%q) took it", bad)
		}
	}
	r := &kgo.Record{}
	if got := RecordRoute(r); got != headers.DefaultRoute {
		t.Errorf("a record without %s is for route %q, want %q", headers.Route, got, headers.DefaultRoute)
	}
	headers.Set(r, headers.Route, "billing")
	if got := RecordRoute(r); got != "billing" {
		t.Errorf("RecordRoute = %q, want billing", got)
	}
}

// TestBreakerKeys: the route default's report keeps the key of the
// version before routes (with or without the route named), another
// route's has its own; both decode, as does a report written before
// routes; a key and a value that disagree are an error.
func TestBreakerKeys(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		b   Breaker
		key string
	}{
		{Breaker{Provider: "acme", Instance: "p1", Open: true, At: now}, "breaker:acme:p1"},
		{Breaker{Provider: "acme", Route: headers.DefaultRoute, Instance: "p1", Open: true, At: now}, "breaker:acme:p1"},
		{Breaker{Provider: "acme", Route: "billing", Instance: "p-2:x", Open: true, At: now}, "breaker:acme/billing:p-2:x"},
	} {
		r, err := BreakerRecord("webhooks.control", tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != tc.key {
			t.Errorf("%+v: key %s, want %s", tc.b, r.Key, tc.key)
		}
		got, ok, err := DecodeBreaker(r)
		if err != nil || !ok || got != tc.b {
			t.Errorf("DecodeBreaker(BreakerRecord(%+v)) = %+v, %v, %v", tc.b, got, ok, err)
		}
		tomb, ok, err := DecodeBreaker(&kgo.Record{Key: r.Key, Timestamp: now})
		if err != nil || !ok || tomb.Open || tomb.Provider != "acme" || RouteOr(tomb.Route) != RouteOr(tc.b.Route) {
			t.Errorf("tombstone of %s: %+v, %v, %v", r.Key, tomb, ok, err)
		}
	}
	old := &kgo.Record{Key: []byte("breaker:acme:p1"), Value: []byte(`{"provider":"acme","instance":"p1","open":true,"at":"2026-03-01T12:00:00Z"}`)}
	if b, ok, err := DecodeBreaker(old); err != nil || !ok || b.Route != "" || !b.Open {
		t.Errorf("a report written before routes: %+v, %v, %v", b, ok, err)
	}
	for key, value := range map[string]string{
		"breaker:acme/billing:p1": `{"provider":"acme","instance":"p1","open":true,"at":"2026-03-01T12:00:00Z"}`,
		"breaker:acme:p1":         `{"provider":"acme","route":"billing","instance":"p1","open":true,"at":"2026-03-01T12:00:00Z"}`,
		"breaker:acme/:p1":        `{"provider":"acme","instance":"p1","open":true,"at":"2026-03-01T12:00:00Z"}`,
		"breaker:acme/B.x:p1":     `{"provider":"acme","route":"B.x","instance":"p1","open":true,"at":"2026-03-01T12:00:00Z"}`,
		"breaker:acme":            `{"provider":"acme","instance":"","open":true,"at":"2026-03-01T12:00:00Z"}`,
	} {
		if b, ok, err := DecodeBreaker(&kgo.Record{Key: []byte(key), Value: []byte(value)}); err == nil || !ok {
			t.Errorf("%s = %s: DecodeBreaker gave %+v, %v, %v; want an error", key, value, b, ok, err)
		}
	}
	if _, err := BreakerRecord("t", Breaker{Provider: "acme", Route: "Bad.Route", Instance: "p1"}); err == nil {
		t.Error("a bad route name was taken")
	}
}

// TestBreakersByRoute: a route's open breaker holds that route back and
// makes the provider-level check answer open; a report without a route is
// the route default's.
func TestBreakersByRoute(t *testing.T) {
	now := time.Now()
	bs := Breakers{}
	bs.Apply(Breaker{Provider: "acme", Route: "billing", Instance: "p1", Open: true, At: now})
	bs.Apply(Breaker{Provider: "acme", Route: "crm", Instance: "p1", Open: false, At: now})
	for _, tc := range []struct {
		route string
		open  bool
	}{{"billing", true}, {"crm", false}, {headers.DefaultRoute, false}, {"", false}} {
		if ok, _ := bs.ClosedRoute("acme", tc.route, now); ok == tc.open {
			t.Errorf("route %q: closed %v, want open %v", tc.route, ok, tc.open)
		}
	}
	if ok, inst := bs.Closed("acme", now); ok || inst != "p1" {
		t.Errorf("provider-level: closed %v (%s), want open by p1 (route billing)", ok, inst)
	}
	bs.Apply(Breaker{Provider: "acme", Instance: "p2", Open: true, At: now}) // before routes: the route default
	if ok, inst := bs.ClosedRoute("acme", headers.DefaultRoute, now); ok || inst != "p2" {
		t.Errorf("default after a report without a route: closed %v (%s), want open by p2", ok, inst)
	}
	if ok, _ := bs.ClosedRoute("acme", "crm", now); !ok {
		t.Error("crm held back by other routes' breakers")
	}
	if ok, _ := bs.ClosedRoute("acme", "billing", now.Add(BreakerStale)); !ok {
		t.Error("a stale open report still holds its route")
	}
}
