package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// outcomeRecord is an outcome record on topic as the processor writes it
// (replayID and route left out when empty).
func outcomeRecord(topic, key, status, origin, replayID, route string) *kgo.Record {
	extra := ""
	switch status {
	case "retrying":
		extra = `,"tier":"1s"`
	case "dead":
		extra = `,"dead_reason":"permanent"`
	}
	if replayID != "" {
		extra += fmt.Sprintf(`,"replay_id":%q`, replayID)
	}
	if route != "" {
		extra += fmt.Sprintf(`,"route":%q`, route)
	}
	v := fmt.Sprintf(`{"key":%q,"provider":"stripe","event_type":"","status":%q,"attempt":1,"origin":%q,"duration_ms":1,"time":"2026-11-23T10:00:00.000Z"%s}`,
		key, status, origin, extra)
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(v)}
}

// TestLedgerCatchesEveryBrokenPromise feeds the ledger records that break
// each promise once and checks that each is counted, and that a clean key
// is not.
func TestLedgerCatchesEveryBrokenPromise(t *testing.T) {
	sys := &System{tb: t, Names: topics.NewNames("t.", []string{"1s"}), Dest: NewDestination(t)}
	l := newLedger(sys, nil)
	outcome := func(key, status, origin, replayID string) *kgo.Record {
		return outcomeRecord(sys.Names.Outcomes, key, status, origin, replayID, "")
	}
	dlq := func(key string) *kgo.Record {
		return &kgo.Record{Topic: sys.Names.DLQ, Key: []byte(key), Headers: []kgo.RecordHeader{{Key: headers.Origin, Value: []byte("ingest")}}}
	}
	call := func(key string) {
		req, _ := http.NewRequest(http.MethodPost, sys.Dest.URL(), strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	l.Accept("stripe:clean", "stripe:lost", "stripe:twice", "stripe:nodlq", "stripe:replayed", "stripe:replay-twice", "stripe:chatty", "stripe:dup", "stripe:nocall")
	recs := []*kgo.Record{
		outcome("stripe:clean", "retrying", "ingest", ""), outcome("stripe:clean", "done", "retry", ""),
		outcome("stripe:lost", "retrying", "ingest", ""),
		outcome("stripe:twice", "done", "ingest", ""), outcome("stripe:twice", "done", "ingest", ""),
		outcome("stripe:nodlq", "dead", "ingest", ""),
		// The replay met an open circuit, so it ended from the retry tier.
		outcome("stripe:replayed", "dead", "ingest", ""), dlq("stripe:replayed"),
		outcome("stripe:replayed", "retrying", "replay", "dlq:0:1"), outcome("stripe:replayed", "done", "retry", "dlq:0:1"),
		outcome("stripe:replay-twice", "dead", "ingest", ""), dlq("stripe:replay-twice"),
		outcome("stripe:replay-twice", "dead", "replay", "dlq:0:2"), dlq("stripe:replay-twice"),
		outcome("stripe:replay-twice", "dead", "replay", "dlq:0:2"), dlq("stripe:replay-twice"),
		outcome("stripe:chatty", "done", "ingest", ""),
		outcome("stripe:dup", "done", "ingest", ""), outcome("stripe:dup", "duplicate", "ingest", ""),
		outcome("stripe:unasked", "done", "ingest", ""),
		outcome("stripe:nocall", "done", "ingest", ""),
	}
	for _, r := range recs {
		l.add(t, r)
	}
	for _, k := range []string{"stripe:clean", "stripe:clean", "stripe:twice", "stripe:replayed", "stripe:replayed",
		"stripe:chatty", "stripe:chatty", "stripe:chatty", "stripe:dup", "stripe:unasked"} {
		call(k)
	}

	got := l.tally(SettleOptions{})
	want := Tally{
		Accepted: 9, Done: 6, Dead: 2, Duplicates: 1,
		Lost:    1, // stripe:lost: retrying, never ended
		Doubled: 2, // stripe:twice done twice; stripe:replay-twice ended twice under one replay id
		DLQ:     4,
		// stripe:nodlq is dead without an entry; stripe:replay-twice has
		// three entries for three dead outcomes, so it matches.
		DLQWrong:   1,
		Calls:      10,
		ExtraCalls: 2, // stripe:chatty: three calls for one processed record
		Uncalled:   1, // stripe:nocall is done, yet the destination never saw it
		Unasked:    1,
	}
	got.Examples = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tally\n got  %+v\n want %+v", got, want)
	}
	if !strings.Contains(got.String(), "lost=1 doubled=2") {
		t.Errorf("the one line does not carry the counts: %s", got)
	}
}

// TestLedgerSettlesEveryRoute feeds a ledger of a system whose stripe
// provider has three routes (billing: invoice.* over HTTP; audit: every
// event over HTTP; book: every event to a topic), and whose standard
// provider has one (inv: invoice.*), records that keep or break each
// promise per (key, route), and checks each route's tally and their sum.
func TestLedgerSettlesEveryRoute(t *testing.T) {
	routes := map[string][]Route{
		"stripe": {
			{Name: "billing", Events: []string{"invoice.*"}},
			{Name: "audit", Events: []string{"*"}},
			{Name: "book", Topic: "billing.book"},
		},
		"standard": {{Name: "inv", Events: []string{"invoice.*"}}},
	}
	sys := &System{tb: t, Prefix: "t.", Names: topics.NewNames("t.", []string{"1s"}), Dest: NewDestination(t), routes: routes}
	l := newLedger(sys, nil)
	topic := sys.RouteTopic("stripe", "book")
	if topic != "t.billing.book" || sys.RouteTopic("stripe", "audit") != "" {
		t.Fatalf("RouteTopic: %q", topic)
	}
	out := func(key, route, status string) *kgo.Record {
		return outcomeRecord(sys.Names.Outcomes, key, status, "ingest", "", route)
	}
	dlq := func(key, route string) *kgo.Record {
		return &kgo.Record{Topic: sys.Names.DLQ, Key: []byte(key), Headers: []kgo.RecordHeader{
			{Key: headers.Origin, Value: []byte("ingest")}, {Key: headers.Route, Value: []byte(route)}}}
	}
	events := map[string]Event{}
	rec := func(key, route string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(key), Value: events[key].Body, Headers: []kgo.RecordHeader{
			{Key: headers.IdempotencyKey, Value: []byte(key)}, {Key: headers.Route, Value: []byte(route)}}}
	}
	call := func(url, route, key string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", key)
		if route != "" {
			req.Header.Set(routeHeader, route)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, ev := range []Event{
		NewTypedEvent("stripe", "inv", "invoice.paid"), NewTypedEvent("stripe", "cus", "customer.created"),
		NewTypedEvent("stripe", "lost", "invoice.paid"), NewTypedEvent("stripe", "twice", "customer.created"),
		NewTypedEvent("stripe", "dead", "invoice.paid"), NewTypedEvent("stripe", "stray", "customer.created"),
		NewTypedEvent("stripe", "mangled", "customer.created"),
		NewTypedEvent("standard", "unrouted", "customer.created"), NewTypedEvent("standard", "unended", "customer.created"),
	} {
		events[ev.Keys[0]] = ev
		l.acceptEvent(ev, ev.Keys)
	}
	all := func(key string) []*kgo.Record {
		return []*kgo.Record{out(key, "audit", "done"), out(key, "book", "done"), rec(key, "book")}
	}
	var recs []*kgo.Record
	// stripe:inv: every route once, billing after a retry; a duplicate.
	recs = append(recs, out("stripe:inv", "billing", "retrying"), out("stripe:inv", "billing", "done"), out("stripe:inv", "", "duplicate"))
	recs = append(recs, all("stripe:inv")...)
	// stripe:cus matches audit and book only.
	recs = append(recs, all("stripe:cus")...)
	// stripe:lost: billing never ends, and book never got its record.
	recs = append(recs, out("stripe:lost", "billing", "retrying"), out("stripe:lost", "audit", "done"), out("stripe:lost", "book", "done"))
	// stripe:twice: done twice on audit, twice in the topic.
	recs = append(recs, all("stripe:twice")...)
	recs = append(recs, out("stripe:twice", "audit", "done"), rec("stripe:twice", "book"))
	// stripe:dead: dead on billing with its entry; audit dead without one.
	recs = append(recs, out("stripe:dead", "billing", "dead"), dlq("stripe:dead", "billing"), out("stripe:dead", "audit", "dead"))
	recs = append(recs, all("stripe:dead")[1:]...)
	// stripe:stray: a customer event delivered to billing too.
	recs = append(recs, all("stripe:stray")...)
	recs = append(recs, out("stripe:stray", "billing", "done"))
	// stripe:mangled: its topic record names another route.
	recs = append(recs, out("stripe:mangled", "audit", "done"), out("stripe:mangled", "book", "done"), rec("stripe:mangled", "audit"))
	// standard:unrouted matches no route and says so; standard:unended
	// does not.
	recs = append(recs, out("standard:unrouted", "", "unrouted"))
	for _, r := range recs {
		l.add(t, r)
	}
	billing, audit := sys.Dest.RouteURL("billing"), sys.Dest.RouteURL("audit")
	for _, c := range []struct{ url, route, key string }{
		{billing, "billing", "stripe:inv"}, {billing, "billing", "stripe:inv"}, {audit, "audit", "stripe:inv"},
		{audit, "audit", "stripe:cus"}, {audit, "audit", "stripe:lost"}, {billing, "billing", "stripe:lost"},
		{audit, "audit", "stripe:twice"}, {billing, "billing", "stripe:dead"}, {audit, "audit", "stripe:dead"},
		{audit, "audit", "stripe:stray"}, {billing, "billing", "stripe:stray"},
		{audit, "audit", "stripe:mangled"}, {audit, "audit", "stripe:mangled"}, // one call beyond its one outcome
		{audit, "", "stripe:mangled"}, // no X-Hookline-Route on audit's URL: misrouted (on the route default)
	} {
		call(c.url, c.route, c.key)
	}

	got := l.tally(SettleOptions{})
	byRoute := map[string]Tally{}
	for _, r := range got.Routes {
		r.Examples = nil
		byRoute[r.Route] = r
	}
	want := map[string]Tally{
		"audit":   {Route: "audit", Accepted: 7, Done: 6, Dead: 1, Doubled: 1, DLQWrong: 1, Calls: 8, ExtraCalls: 1},
		"billing": {Route: "billing", Accepted: 3, Done: 1, Dead: 1, Lost: 1, DLQ: 1, Calls: 5, Stray: 1},
		"book":    {Route: "book", Topic: topic, Accepted: 7, Done: 7, Records: 7, Missing: 1, Twice: 1, Mangled: 1},
		"inv":     {Route: "inv"},
	}
	for name, w := range want {
		if !reflect.DeepEqual(byRoute[name], w) {
			t.Errorf("route %s\n got  %+v\n want %+v", name, byRoute[name], w)
		}
	}
	if len(byRoute) != len(want) {
		t.Errorf("tallies of routes %v, want those of %v", slices.Sorted(maps.Keys(byRoute)), slices.Sorted(maps.Keys(want)))
	}
	got.Routes, got.Examples = nil, nil
	wantSum := Tally{Accepted: 9, Done: 14, Dead: 2, Duplicates: 1, Lost: 2, Doubled: 1, DLQ: 1, DLQWrong: 1, Calls: 13, ExtraCalls: 1,
		Unrouted: 1, Stray: 1, Misrouted: 1, Records: 7, Missing: 1, Twice: 1, Mangled: 1}
	if !reflect.DeepEqual(got, wantSum) {
		t.Errorf("sum\n got  %+v\n want %+v", got, wantSum)
	}
	for _, line := range []string{
		byRoute["billing"].String(), byRoute["book"].String(),
	} {
		t.Log(line)
	}
	if s := byRoute["book"].String(); !strings.Contains(s, "ledger route book: accepted=7") || !strings.Contains(s, "topic t.billing.book: records=7 missing=1 twice=1 mangled=1") {
		t.Errorf("the topic route's line does not carry its counts: %s", s)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		glob, s string
		want    bool
	}{
		{"*", "", true}, {"*", "invoice.paid", true}, {"invoice.*", "invoice.paid", true}, {"invoice.*", "invoice.", true},
		{"invoice.*", "invoices.paid", false}, {"payment_intent.succeeded", "payment_intent.succeeded", true},
		{"payment_intent.succeeded", "payment_intent.succeeded2", false}, {"*.paid", "invoice.paid", true},
		{"*.paid", "invoice.paid.x", false}, {"a*b*c", "abc", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "acb", false},
		{"a*a", "a", false}, {"a.?", "a.b", false},
	} {
		if got := globMatch(c.glob, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.glob, c.s, got, c.want)
		}
	}
}

// TestLedgerInvalidPayloads feeds a ledger whose stripe provider has a
// topic route for every event and a where route (data.object.status
// "open") keys that ExpectInvalid names and keys it does not: an invalid
// key dead as invalid_payload with its entries on each of its routes is
// right; one delivered, or dead for another reason, is wrong; a valid key
// dead as invalid_payload is wrong.
func TestLedgerInvalidPayloads(t *testing.T) {
	routes := map[string][]Route{"stripe": {
		{Name: "book", Topic: "book"},
		{Name: "open", Where: map[string]any{"/data/object/status": "open"}},
	}}
	sys := &System{tb: t, Prefix: "t.", Names: topics.NewNames("t.", []string{"1s"}), Dest: NewDestination(t), routes: routes}
	l := newLedger(sys, nil)
	dead := func(key, route, reason string) []*kgo.Record {
		o := outcomeRecord(sys.Names.Outcomes, key, "dead", "ingest", "", route)
		o.Value = []byte(strings.Replace(string(o.Value), `"dead_reason":"permanent"`, `"dead_reason":"`+reason+`"`, 1))
		return []*kgo.Record{o, {Topic: sys.Names.DLQ, Key: []byte(key), Headers: []kgo.RecordHeader{
			{Key: headers.Origin, Value: []byte("ingest")}, {Key: headers.Route, Value: []byte(route)}}}}
	}
	open := []byte(`{"id":"x","type":"invoice.created","data":{"object":{"status":"open"}}}`)
	for _, k := range []string{"bad", "bad-delivered", "bad-permanent", "good", "good-marked"} {
		body := open
		if k == "good" {
			body = []byte(`{"id":"x","type":"invoice.created","data":{"object":{"status":"paid"}}}`)
		}
		l.acceptEvent(Event{Provider: "stripe", Body: body, Type: "invoice.created"}, []string{"stripe:" + k})
	}
	if got := l.expect["stripe:good"]; !reflect.DeepEqual(got, []string{"book"}) {
		t.Errorf("a paid invoice is expected on %v: want [book] (where /data/object/status is open)", got)
	}
	if got := l.expect["stripe:bad"]; !reflect.DeepEqual(got, []string{"book", "open"}) {
		t.Errorf("an open invoice is expected on %v: want [book open]", got)
	}
	l.ExpectInvalid("stripe:bad", "stripe:bad-delivered", "stripe:bad-permanent")
	var recs []*kgo.Record
	for _, r := range []string{"book", "open"} {
		recs = append(recs, dead("stripe:bad", r, "invalid_payload")...)
		recs = append(recs, dead("stripe:bad-permanent", r, "permanent")...)
		recs = append(recs, dead("stripe:good-marked", r, "invalid_payload")...)
	}
	recs = append(recs, dead("stripe:bad-delivered", "open", "invalid_payload")...)
	recs = append(recs, outcomeRecord(sys.Names.Outcomes, "stripe:bad-delivered", "done", "ingest", "", "book"),
		&kgo.Record{Topic: "t.book", Key: []byte("stripe:bad-delivered"), Value: open, Headers: []kgo.RecordHeader{
			{Key: headers.IdempotencyKey, Value: []byte("stripe:bad-delivered")}, {Key: headers.Route, Value: []byte("book")}}})
	recs = append(recs, outcomeRecord(sys.Names.Outcomes, "stripe:good", "done", "ingest", "", "book"),
		&kgo.Record{Topic: "t.book", Key: []byte("stripe:good"), Value: []byte(`{"id":"x","type":"invoice.created","data":{"object":{"status":"paid"}}}`),
			Headers: []kgo.RecordHeader{{Key: headers.IdempotencyKey, Value: []byte("stripe:good")}, {Key: headers.Route, Value: []byte("book")}}})
	for _, r := range recs {
		l.add(t, r)
	}
	got := l.tally(SettleOptions{})
	if got.Invalid != 3 || got.InvalidWrong != 3 {
		t.Errorf("invalid=%d invalid-wrong=%d: want 3 (bad, bad-delivered, good-marked) and 3 (bad-delivered, bad-permanent, good-marked); %v",
			got.Invalid, got.InvalidWrong, got.Examples)
	}
	if !strings.Contains(got.String(), "invalid=3 invalid-wrong=3") || !got.broken(0) {
		t.Errorf("the line does not carry the invalid counts, or the tally is not broken: %s", got)
	}
}
