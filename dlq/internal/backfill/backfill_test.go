package backfill

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
)

const file = `
providers:
  bf:
    preset: generic
    secret_env: [S]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: /id}
    event_type: {json: /type}
    routes:
      crm: {events: [invoice.*], where: {"/live": true}, destination: {url: "http://127.0.0.1:1/crm"}}
      rest: {otherwise: true, destination: {url: "http://127.0.0.1:1/rest"}}
`

func spec(t *testing.T) Spec { return specOf(t, "crm") }

// specOf is a backfill of the route name of file's provider bf.
func specOf(t *testing.T, name string) Spec {
	t.Helper()
	reg, err := providers.Parse([]byte(file), func(string) (string, bool) { return "s3cret", true })
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.Get("bf")
	rt, ok := p.Route(name)
	if !ok {
		t.Fatalf("no route %s", name)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return Spec{Provider: p, Route: rt, Since: t0, Until: t0.Add(time.Hour), ID: "b1"}
}

func accepted(provider, typ, body string, at time.Time) *kgo.Record {
	r := &kgo.Record{Topic: "webhooks.raw", Partition: 3, Offset: 17, Key: []byte(provider + ":k1"), Value: []byte(body), Timestamp: at}
	for _, h := range [][2]string{
		{headers.Provider, provider}, {headers.EventType, typ}, {headers.IdempotencyKey, provider + ":k1"},
		{headers.Origin, headers.OriginIngest}, {headers.Attempt, "1"}, {"http.x-sig", "abc"},
	} {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	return r
}

func TestMatches(t *testing.T) {
	s := spec(t)
	in := s.Since.Add(time.Minute)
	live := `{"id":"k1","type":"invoice.paid","live":true}`
	retried := accepted("bf", "invoice.paid", live, in)
	headers.Set(retried, headers.Origin, headers.OriginRetry)
	onlyRefunds, err := route.ParseEventFilter([]string{"invoice.refunded"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		r      *kgo.Record
		events route.EventFilter
		want   bool
	}{
		{"accepted, in range, taken by the route", accepted("bf", "invoice.paid", live, in), route.EventFilter{}, true},
		{"at since: in", accepted("bf", "invoice.paid", live, s.Since), route.EventFilter{}, true},
		{"at until: out", accepted("bf", "invoice.paid", live, s.Until), route.EventFilter{}, false},
		{"before since", accepted("bf", "invoice.paid", live, s.Since.Add(-time.Millisecond)), route.EventFilter{}, false},
		{"another provider", accepted("other", "invoice.paid", live, in), route.EventFilter{}, false},
		{"an event type the route does not take", accepted("bf", "order.created", `{"live":true}`, in), route.EventFilter{}, false},
		{"where does not hold", accepted("bf", "invoice.paid", `{"live":false}`, in), route.EventFilter{}, false},
		{"a retry is not an accepted delivery", retried, route.EventFilter{}, false},
		{"--events narrows", accepted("bf", "invoice.paid", live, in), onlyRefunds, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Events = tc.events
			ev, ok := s.Matches(tc.r)
			if ok != tc.want {
				t.Fatalf("Matches = %v, want %v", ok, tc.want)
			}
			if ok && ev != "invoice.paid" {
				t.Fatalf("event type %q", ev)
			}
		})
	}
}

// TestMatchesOtherwise: a backfill of the otherwise route takes exactly
// the accepted events that no other route of the provider matched, as the
// processor routed them.
func TestMatchesOtherwise(t *testing.T) {
	s := specOf(t, "rest")
	in := s.Since.Add(time.Minute)
	onlyOrders, err := route.ParseEventFilter([]string{"order.*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, typ, body string
		events          route.EventFilter
		want            bool
	}{
		{"crm takes it", "invoice.paid", `{"live":true}`, route.EventFilter{}, false},
		{"crm's events, not its where", "invoice.paid", `{"live":false}`, route.EventFilter{}, true},
		{"crm's where, not its events", "order.created", `{"live":true}`, route.EventFilter{}, true},
		{"no event type", "", `{}`, route.EventFilter{}, true},
		{"--events narrows", "invoice.paid", `{"live":false}`, onlyOrders, false},
		{"--events keeps", "order.created", `{}`, onlyOrders, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Events = tc.events
			r := accepted("bf", tc.typ, tc.body, in)
			if _, ok := s.Matches(r); ok != tc.want {
				t.Fatalf("Matches = %v, want %v", ok, tc.want)
			}
			routes := s.Provider.Match(route.Request{EventType: tc.typ, Body: []byte(tc.body)}, nil)
			if taken := len(routes) == 1 && routes[0] == s.Route; tc.events.Match(tc.typ) && taken != tc.want {
				t.Fatalf("the processor's routes %v disagree with the backfill", routes)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	src := accepted("bf", "invoice.paid", `{"id":"k1"}`, time.Now())
	for _, again := range []bool{false, true} {
		r := Record("webhooks.raw", src, "crm", "b1", again)
		if r.Partition != src.Partition || string(r.Key) != string(src.Key) || string(r.Value) != string(src.Value) {
			t.Fatalf("partition %d key %q body %q: want the source's", r.Partition, r.Key, r.Value)
		}
		mode := headers.BackfillMissing
		if again {
			mode = headers.BackfillAgain
		}
		for name, want := range map[string]string{
			headers.Origin: headers.OriginBackfill, headers.Attempt: "1", headers.Route: "crm",
			headers.ReplayID: "backfill:b1", headers.Backfill: mode,
			headers.Provider: "bf", headers.EventType: "invoice.paid", "http.x-sig": "abc",
		} {
			if got := headers.Value(r, name); got != want {
				t.Errorf("again=%v: %s = %q, want %q", again, name, got, want)
			}
		}
		if got := headers.Value(src, headers.Origin); got != headers.OriginIngest {
			t.Fatalf("the source record was changed: origin %q", got)
		}
	}
}

func TestID(t *testing.T) {
	id := NewID(time.Date(2026, 3, 8, 9, 15, 0, 0x3f9a, time.UTC))
	if id != "20260308-091500-3f9a" {
		t.Fatalf("NewID = %q", id)
	}
	if err := CheckID(id); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "Bad", "-x", "a b", "a:b", string(make([]byte, 64))} {
		if CheckID(bad) == nil {
			t.Errorf("CheckID(%q) accepted it", bad)
		}
	}
}

func TestEventTypes(t *testing.T) {
	r := Report{ByEventType: map[string]int64{"b": 2, "a": 2, "c": 5, "": 1}}
	got := r.EventTypes()
	want := []string{"c", "a", "b", ""}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("EventTypes = %q, want %q", got, want)
		}
	}
}
