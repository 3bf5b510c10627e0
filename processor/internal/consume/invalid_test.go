package consume

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// TestInvalidPayloadToDLQ: a record ingest marked hookline.invalid-payload
// (an ingest of an earlier version) is called on no route: it is dead for
// each route it matches (a DLQ entry each, reason invalid_payload, naming
// the route; nothing written to the topic route), and dead once for the
// key when it matches none. An unmarked fresh record (ingest checks no
// body of an on_invalid: dlq provider) is checked here: an invalid one is
// dead the same way, its DLQ entries saying why; a valid one is
// delivered to each route. A replay
// is checked against this processor's schema (docs/providers.md's order schema for
// invoice.*), whatever it carries: a valid body is delivered to its
// route, an invalid one is dead-lettered again without a call.
func TestInvalidPayloadToDLQ(t *testing.T) {
	schema, err := filepath.Abs("../../../compose/schemas/order.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	f := newRoutesKafka(t)
	dest := &routeCalls{}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"shop/billing": dest, "shop/crm": dest},
		procOptions{providersYAML: routesYAML + "    schema: {\"invoice.*\": " + schema + "}\n"})

	const validOrder = `{"id":"bad1","type":"order.created","data":{"order_id":"o1","amount":1,"currency":"EUR"}}`
	produce := func(r *kgo.Record) {
		t.Helper()
		if err := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fresh := func(key, eventType, body string) *kgo.Record {
		r := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: []byte(key), Value: []byte(body)}
		headers.Set(r, headers.Provider, "shop")
		headers.Set(r, headers.Origin, headers.OriginIngest)
		headers.Set(r, headers.EventType, eventType)
		headers.SetAttempt(r, 1)
		headers.SetTime(r, headers.ReceivedAt, time.Now())
		return r
	}
	marked := func(key, eventType, body string) *kgo.Record {
		r := fresh(key, eventType, body)
		headers.SetInvalidPayload(r, "schema order.schema.json: at '/data': missing property 'order_id'")
		return r
	}
	// bad1's body passes this processor's schema (as after a fix): only
	// ingest's mark makes it invalid.
	produce(marked("bad1", "invoice.paid", validOrder))
	produce(marked("bad2", "payout.paid", `{"id":"bad2"}`)) // no route takes payout.*
	produce(fresh("bad3", "invoice.paid", `{"id":"bad3"}`))
	produce(fresh("ok4", "invoice.paid", validOrder))
	waitFor(t, "the records' outcomes", func() bool {
		out := f.outcomes(t)
		return len(out["bad1"]) == 3 && len(out["bad2"]) == 1 && len(out["bad3"]) == 3 && len(out["ok4"]) == 3
	})
	out := f.outcomes(t)
	for _, o := range out["ok4"] {
		if o.Status != outcome.StatusDone {
			t.Errorf("ok4 (valid, unmarked) route %q: %s %q, want done", o.Route, o.Status, o.DeadReason)
		}
	}
	for _, o := range append(append(out["bad1"], out["bad2"]...), out["bad3"]...) {
		if o.Status != outcome.StatusDead || o.DeadReason != headers.DeadInvalidPayload {
			t.Errorf("%s route %q: %s %q, want dead %s", o.Key, o.Route, o.Status, o.DeadReason, headers.DeadInvalidPayload)
		}
	}
	if got := out["bad2"][0].Route; got != "" {
		t.Errorf("bad2's outcome names route %q, want none (the key's one entry)", got)
	}
	dlq := f.readCommitted(t, f.names.DLQ)
	byRoute := map[string]*kgo.Record{}
	for _, r := range dlq {
		byRoute[string(r.Key)+"/"+headers.Value(r, headers.Route)] = r
		if headers.Value(r, headers.DeadReason) != headers.DeadInvalidPayload || headers.Value(r, headers.InvalidPayload) == "" {
			t.Errorf("DLQ %s route %q: dead-reason %q, invalid-payload %q", r.Key, headers.Value(r, headers.Route),
				headers.Value(r, headers.DeadReason), headers.Value(r, headers.InvalidPayload))
		}
	}
	for _, k := range []string{"bad1/billing", "bad1/crm", "bad1/ledger", "bad2/", "bad3/billing", "bad3/crm", "bad3/ledger"} {
		if byRoute[k] == nil {
			t.Errorf("no DLQ entry %s (DLQ holds %d)", k, len(dlq))
		}
	}
	for _, k := range []string{"bad3/billing", "bad3/crm", "bad3/ledger"} {
		if r := byRoute[k]; r != nil && !strings.Contains(headers.Value(r, headers.InvalidPayload), "order.schema.json") {
			t.Errorf("DLQ %s: invalid-payload %q, want the processor's reason naming order.schema.json", k, headers.Value(r, headers.InvalidPayload))
		}
	}
	if len(dlq) != 7 {
		t.Errorf("DLQ holds %d records, want 7", len(dlq))
	}
	if n := dest.count("billing", "bad1") + dest.count("crm", "bad1") + dest.count("billing", "bad3") + dest.count("crm", "bad3"); n != 0 {
		t.Errorf("%d calls for an invalid record", n)
	}
	if n := dest.count("billing", "ok4") + dest.count("crm", "ok4"); n != 2 {
		t.Errorf("%d calls for the valid unmarked record, want 2 (billing, crm)", n)
	}
	ledger := map[string]int{}
	for _, r := range f.readCommitted(t, "shop.ledger") {
		ledger[string(r.Key)]++
	}
	if ledger["bad1"]+ledger["bad3"] != 0 || ledger["ok4"] != 1 {
		t.Errorf("the topic route holds %v; want ok4 once and no invalid record", ledger)
	}

	// Replays, as dlq replay builds them (the mark kept, to show the
	// processor checks a replay itself): billing's entry is valid for
	// this processor's schema and is delivered; crm's, with a body that
	// is not, goes back to the DLQ.
	replay := func(src *kgo.Record, ref, body string) {
		r := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: src.Key, Value: []byte(body), Headers: append([]kgo.RecordHeader(nil), src.Headers...)}
		headers.Delete(r, headers.DeadReason)
		headers.Set(r, headers.Origin, headers.OriginReplay)
		headers.SetAttempt(r, 1)
		headers.Set(r, headers.ReplayID, ref)
		produce(r)
	}
	replay(byRoute["bad1/billing"], "dlq:0:0", validOrder)
	replay(byRoute["bad1/crm"], "dlq:0:1", `{"id":"bad1"}`)
	waitFor(t, "the replays' outcomes", func() bool {
		out := f.outcomes(t)
		return len(outcomeOf(out, "bad1", "billing")) == 2 && len(outcomeOf(out, "bad1", "crm")) == 2
	})
	out = f.outcomes(t)
	if got := outcomeOf(out, "bad1", "billing"); got[1] != outcome.StatusDone || dest.count("billing", "bad1") != 1 {
		t.Errorf("billing's replay: outcomes %v, %d calls; want done after one call", got, dest.count("billing", "bad1"))
	}
	if got := outcomeOf(out, "bad1", "crm"); got[1] != outcome.StatusDead || dest.count("crm", "bad1") != 0 {
		t.Errorf("crm's invalid replay: outcomes %v, %d calls; want dead, no call", got, dest.count("crm", "bad1"))
	}
	if n := len(f.readCommitted(t, f.names.DLQ)); n != 8 {
		t.Errorf("DLQ holds %d records after the replays, want 8", n)
	}
}
