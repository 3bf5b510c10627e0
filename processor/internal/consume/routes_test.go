package consume

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// routesYAML is one provider, shop, with three routes: billing (invoice
// events, HTTP), crm (customer and invoice events, HTTP) and ledger (every
// event, a topic).
const routesYAML = `providers:
  shop:
    preset: stripe
    secret_env: [S]
    routes:
      billing:
        events: ["invoice.*"]
        destination: {url: "http://billing.invalid/", max_inflight: 4}
        priority: critical
      crm:
        events: ["customer.*", "invoice.*"]
        destination: {url: "http://crm.invalid/", max_inflight: 4}
      ledger:
        events: ["invoice.*", "customer.*"]
        destination: {topic: shop.ledger}
`

// newRoutesKafka is newFakeKafka with routesYAML's lanes and topic.
func newRoutesKafka(t *testing.T) *fakeKafka {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, "shop.ledger", f.names.RouteLane("shop", "billing"), f.names.RouteLane("shop", "crm")); err != nil {
		t.Fatal(err)
	}
	return f
}

// routeCalls is a destination that records each call's route and key and
// fails the first call of each route/key in fail (503).
type routeCalls struct {
	mu    sync.Mutex
	calls map[string]int // route/key -> calls
	fail  map[string]bool
}

func (c *routeCalls) Handle(_ context.Context, d deliver.Delivery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[d.Route+"/"+d.Key]++
	if c.fail[d.Route+"/"+d.Key] && c.calls[d.Route+"/"+d.Key] == 1 {
		return &deliver.StatusError{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable"}
	}
	return nil
}

func (c *routeCalls) count(route, key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[route+"/"+key]
}

// produceTyped writes one ingest record of provider with an event type.
func (f *fakeKafka) produceTyped(t *testing.T, provider, key, eventType string) {
	t.Helper()
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: []byte(key), Value: []byte(`{"id":"` + key + `"}`)}
	headers.Set(r, headers.Provider, provider)
	headers.Set(r, headers.Origin, headers.OriginIngest)
	headers.Set(r, headers.EventType, eventType)
	headers.SetAttempt(r, 1)
	headers.SetTime(r, headers.ReceivedAt, time.Now())
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readCommitted reads every committed record of topic.
func (f *fakeKafka) readCommitted(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	cl := f.client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
}

// outcomeOf is the statuses of a key's outcomes for one route.
func outcomeOf(out map[string][]outcome.Outcome, key, route string) []string {
	var s []string
	for _, o := range out[key] {
		if o.Route == route {
			s = append(s, o.Status)
		}
	}
	return s
}

// TestRoutesFanOut: each record goes to every route its event type
// matches, each route with its own outcome; billing fails its first call
// and is retried alone (its tier copy names it), while crm is called once
// and the topic route holds the exact record once, naming its route; an
// event no route matches is unrouted, with no call.
func TestRoutesFanOut(t *testing.T) {
	f := newRoutesKafka(t)
	dest := &routeCalls{fail: map[string]bool{"billing/inv1": true}}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"shop/billing": dest, "shop/crm": dest}, procOptions{providersYAML: routesYAML})

	f.produceTyped(t, "shop", "inv1", "invoice.paid")
	f.produceTyped(t, "shop", "cus1", "customer.created")
	f.produceTyped(t, "shop", "odd1", "payout.paid")
	waitFor(t, "outcomes of every route", func() bool {
		out := f.outcomes(t)
		return len(out["inv1"]) == 3 && len(out["cus1"]) == 2 && len(out["odd1"]) == 1
	})
	out := f.outcomes(t)
	for _, tc := range []struct {
		key, route string
		want       []string
	}{
		{"inv1", "billing", []string{outcome.StatusRetrying}},
		{"inv1", "crm", []string{outcome.StatusDone}},
		{"inv1", "ledger", []string{outcome.StatusDone}},
		{"cus1", "crm", []string{outcome.StatusDone}},
		{"cus1", "ledger", []string{outcome.StatusDone}},
		{"cus1", "billing", nil},
		{"odd1", "", []string{outcome.StatusUnrouted}},
	} {
		if got := outcomeOf(out, tc.key, tc.route); len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s route %q: outcomes %v, want %v (all: %+v)", tc.key, tc.route, got, tc.want, out[tc.key])
		}
	}
	if n := dest.count("billing", "cus1") + dest.count("crm", "odd1") + dest.count("billing", "odd1"); n != 0 {
		t.Errorf("%d calls to routes the events do not match", n)
	}

	// The topic route: the exact records, once each, naming the route.
	ledger := f.readCommitted(t, "shop.ledger")
	seen := map[string]int{}
	for _, r := range ledger {
		seen[string(r.Key)]++
		if headers.Value(r, headers.Route) != "ledger" || string(r.Value) != `{"id":"`+string(r.Key)+`"}` || headers.Value(r, headers.Provider) != "shop" {
			t.Errorf("ledger record %s: route %q, value %s, provider %q", r.Key, headers.Value(r, headers.Route), r.Value, headers.Value(r, headers.Provider))
		}
	}
	if len(ledger) != 2 || seen["inv1"] != 1 || seen["cus1"] != 1 {
		t.Errorf("ledger topic holds %v, want inv1 and cus1 once each", seen)
	}

	// billing's retry, as the retrier moves it back to raw: billing is
	// called again and done; crm and the ledger are not touched.
	tier := f.readCommitted(t, f.names.Retry[0])
	if len(tier) != 1 || headers.Value(tier[0], headers.Route) != "billing" {
		t.Fatalf("tier records %d (route %q), want inv1's billing copy", len(tier), headers.Value(tier[0], headers.Route))
	}
	back := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: tier[0].Key, Value: tier[0].Value, Headers: append([]kgo.RecordHeader(nil), tier[0].Headers...)}
	headers.Set(back, headers.Origin, headers.OriginRetry)
	if err := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(context.Background(), back).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A re-send of inv1 is a duplicate, whatever its routes did.
	f.produceTyped(t, "shop", "inv1", "invoice.paid")
	waitFor(t, "billing's retry done and the re-send skipped", func() bool {
		out := f.outcomes(t)
		return len(outcomeOf(out, "inv1", "billing")) == 2 && count(out, "inv1", outcome.StatusDuplicate) == 1
	})
	out = f.outcomes(t)
	if got := outcomeOf(out, "inv1", "billing"); got[1] != outcome.StatusDone {
		t.Errorf("billing's outcomes %v, want retrying then done", got)
	}
	if dest.count("billing", "inv1") != 2 || dest.count("crm", "inv1") != 1 {
		t.Errorf("calls: billing %d, crm %d; want 2 and 1", dest.count("billing", "inv1"), dest.count("crm", "inv1"))
	}
	if n := len(f.readCommitted(t, "shop.ledger")); n != 2 {
		t.Errorf("ledger topic holds %d records after the retry, want still 2", n)
	}
}

// TestUnknownProviderRetries: a record of a provider missing from this
// processor's providers file (ingest's may be newer) is a retryable
// failure of the route default, never a delivery to nowhere.
func TestUnknownProviderRetries(t *testing.T) {
	f := newRoutesKafka(t)
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"shop/crm": &routeCalls{}}, procOptions{providersYAML: routesYAML})
	f.produceTyped(t, "ghost", "g1", "invoice.paid")
	waitFor(t, "ghost's outcome", func() bool { return len(f.outcomes(t)["g1"]) == 1 })
	o := f.outcomes(t)["g1"][0]
	if o.Status != outcome.StatusRetrying || o.Route != headers.DefaultRoute {
		t.Errorf("outcome %+v: want retrying on the route default", o)
	}
	tier := f.readCommitted(t, f.names.Retry[0])
	if len(tier) != 1 || headers.Value(tier[0], headers.Route) != headers.DefaultRoute {
		t.Errorf("tier copies %d, want g1's, naming the route default", len(tier))
	}
}

// otherwiseYAML is one provider, shop, with a route billing (invoice.paid,
// HTTP) and an otherwise route rest (HTTP).
const otherwiseYAML = `providers:
  shop:
    preset: stripe
    secret_env: [S]
    routes:
      billing: {events: [invoice.paid], destination: {url: "http://billing.invalid/"}}
      rest: {otherwise: true, destination: {url: "http://rest.invalid/"}, priority: low}
`

// runOtherwise runs a processor of otherwiseYAML with o (its lanes
// created), both routes calling the routeCalls it returns.
func runOtherwise(t *testing.T, o procOptions) (*fakeKafka, *routeCalls) {
	t.Helper()
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("shop", "billing"), f.names.RouteLane("shop", "rest")); err != nil {
		t.Fatal(err)
	}
	dest := &routeCalls{}
	o.providersYAML = otherwiseYAML
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"shop/billing": dest, "shop/rest": dest}, o)
	return f, dest
}

// TestOtherwiseRoute: an event that no other route of its provider
// matches goes to its otherwise route, delivered with its own outcome,
// never unrouted; an event another route matches does not.
func TestOtherwiseRoute(t *testing.T) {
	f, dest := runOtherwise(t, procOptions{})

	f.produceTyped(t, "shop", "inv1", "invoice.paid")
	f.produceTyped(t, "shop", "odd1", "payout.paid")
	f.produceTyped(t, "shop", "none1", "")
	waitFor(t, "an outcome of each key", func() bool {
		out := f.outcomes(t)
		return len(out["inv1"]) == 1 && len(out["odd1"]) == 1 && len(out["none1"]) == 1
	})
	out := f.outcomes(t)
	for _, tc := range []struct{ key, route string }{{"inv1", "billing"}, {"odd1", "rest"}, {"none1", "rest"}} {
		if got := outcomeOf(out, tc.key, tc.route); len(got) != 1 || got[0] != outcome.StatusDone {
			t.Errorf("%s: outcomes %+v, want done on route %s", tc.key, out[tc.key], tc.route)
		}
		if n := dest.count(tc.route, tc.key); n != 1 {
			t.Errorf("%s: %d calls to route %s, want 1", tc.key, n, tc.route)
		}
	}
	if n := dest.count("rest", "inv1") + dest.count("billing", "odd1") + dest.count("billing", "none1"); n != 0 {
		t.Errorf("%d calls to routes the events do not go to", n)
	}
}

// filterYAML is one provider, shop, with a route big whose filter reads
// the body and a copied request header, and an otherwise route rest.
const filterYAML = `providers:
  shop:
    preset: stripe
    secret_env: [S]
    routes:
      big:
        events: ["invoice.*"]
        filter:
          body: {amount: {$gte: 100}, $not: {status: void}}
          headers: {x-tier: {$in: [gold, platinum]}}
        destination: {url: "http://big.invalid/"}
      rest: {otherwise: true, destination: {url: "http://rest.invalid/"}}
`

// TestFilterRoute: the processor's plan takes a route's filter, on the
// body and on the request headers ingest copied with the record: an event
// the filter holds on goes to its route; one it fails on (by the body, by
// the header, or with the header missing) goes to the otherwise route.
func TestFilterRoute(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("shop", "big"), f.names.RouteLane("shop", "rest")); err != nil {
		t.Fatal(err)
	}
	dest := &routeCalls{}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"shop/big": dest, "shop/rest": dest}, procOptions{providersYAML: filterYAML})
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cases := []struct{ key, body, tier, route string }{
		{"big1", `{"amount":150,"status":"open"}`, "Gold", "rest"}, // header values are case-sensitive
		{"big2", `{"amount":150,"status":"open"}`, "gold", "big"},
		{"small", `{"amount":5}`, "gold", "rest"},
		{"void", `{"amount":500,"status":"void"}`, "platinum", "rest"},
		{"nohdr", `{"amount":150}`, "", "rest"},
	}
	for _, tc := range cases {
		var hs []kgo.RecordHeader
		if tc.tier != "" {
			hs = append(hs, kgo.RecordHeader{Key: "x-tier", Value: []byte(tc.tier)})
		}
		r := headers.IngestRecord(f.names.Raw, tc.key, "invoice.paid", []byte(tc.body), headers.IngestMeta{Provider: "shop", ReceivedAt: time.Now(), HTTP: hs})
		r.Partition = 0
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "an outcome of each key", func() bool {
		out := f.outcomes(t)
		for _, tc := range cases {
			if len(out[tc.key]) != 1 {
				return false
			}
		}
		return true
	})
	out := f.outcomes(t)
	for _, tc := range cases {
		if got := outcomeOf(out, tc.key, tc.route); len(got) != 1 || got[0] != outcome.StatusDone {
			t.Errorf("%s: outcomes %+v, want done on route %s", tc.key, out[tc.key], tc.route)
		}
		if n := dest.count(tc.route, tc.key); n != 1 {
			t.Errorf("%s: %d calls to route %s, want 1", tc.key, n, tc.route)
		}
	}
}
