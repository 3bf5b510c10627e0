package control

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBreakers: a report round-trips through its record; Follow's decoder
// skips it; a provider is closed unless a fresh report of some instance
// says open.
func TestBreakers(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	r, err := BreakerRecord("webhooks.control", Breaker{Provider: "acme", Instance: "p1", Open: true, At: now})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != "breaker:acme:p1" {
		t.Fatalf("key %s", r.Key)
	}
	if _, ok, err := Decode(r); ok || err != nil {
		t.Fatalf("Decode (the settings reader) took a breaker report: ok %v err %v", ok, err)
	}
	b, ok, err := DecodeBreaker(r)
	if err != nil || !ok || !b.Open || b.Instance != "p1" || !b.At.Equal(now) {
		t.Fatalf("DecodeBreaker: %+v %v %v", b, ok, err)
	}
	if _, ok, _ := DecodeBreaker(&kgo.Record{Key: []byte("provider:acme")}); ok {
		t.Fatal("DecodeBreaker took a setting")
	}
	if _, err := BreakerRecord("t", Breaker{Provider: "a:b", Instance: "p1"}); err == nil {
		t.Fatal("a provider name with ':' was taken")
	}

	bs := Breakers{}
	if ok, _ := bs.Closed("acme", now); !ok {
		t.Fatal("no report: want closed")
	}
	bs.Apply(b)
	bs.Apply(Breaker{Provider: "acme", Instance: "p2", Open: false, At: now})
	if ok, inst := bs.Closed("acme", now); ok || inst != "p1" {
		t.Fatalf("p1 open: closed %v (%s), want open by p1", ok, inst)
	}
	if ok, _ := bs.Closed("acme", now.Add(BreakerStale)); !ok {
		t.Fatal("an open report older than BreakerStale still counts")
	}
	bs.Apply(Breaker{Provider: "acme", Instance: "p1", Open: false, At: now.Add(time.Second)})
	if ok, _ := bs.Closed("acme", now.Add(time.Second)); !ok {
		t.Fatal("p1 closed again: want closed")
	}
}

// TestBreakerRouteState: unreported until a processor reports the route,
// open while a fresh report says so (naming it), closed again once it is
// stale or closed; a report without a route is the route default's.
func TestBreakerRouteState(t *testing.T) {
	now := time.Now()
	bs := Breakers{}
	cases := []struct {
		name         string
		apply        *Breaker
		route        string
		state, which string
	}{
		{name: "no report", route: "billing", state: BreakerUnreported},
		{name: "open", apply: &Breaker{Provider: "acme", Route: "billing", Instance: "p1", Open: true, At: now}, route: "billing", state: BreakerOpen, which: "p1"},
		{name: "another route unreported", route: "crm", state: BreakerUnreported},
		{name: "stale open", apply: &Breaker{Provider: "acme", Route: "billing", Instance: "p1", Open: true, At: now.Add(-BreakerStale)}, route: "billing", state: BreakerClosed},
		{name: "default without a route", apply: &Breaker{Provider: "acme", Instance: "p2", Open: true, At: now}, route: "", state: BreakerOpen, which: "p2"},
		{name: "default by name", route: "default", state: BreakerOpen, which: "p2"},
	}
	for _, c := range cases {
		snap := bs.Clone()
		if c.apply != nil {
			bs.Apply(*c.apply)
		}
		if state, which := bs.RouteState("acme", c.route, now); state != c.state || which != c.which {
			t.Errorf("%s: %s %q, want %s %q", c.name, state, which, c.state, c.which)
		}
		if c.apply != nil && len(snap["acme"]) == len(bs["acme"]) && c.name != "stale open" {
			t.Errorf("%s: the clone changed with the original", c.name)
		}
	}
}
