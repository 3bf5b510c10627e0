package trace

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// TestTraceByRoute: one delivery to two routes, billing done at once and
// crm failing into a tier and then the DLQ, a re-send the dedup skipped:
// each step names its route (none for the key's own: accepted,
// duplicate), each route stands where its own steps leave it with its
// latest outcome, the key stands where its worst route does (named), and
// the counts add the routes up.
func TestTraceByRoute(t *testing.T) {
	names := topics.NewNames("", []string{"5m"})
	ix := mustIndex(t, names)
	key := "stripe:evt_routes"
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	raw := headers.IngestRecord(names.Raw, key, "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: t0, RequestID: "req-1"})
	raw.Timestamp = t0
	tier := &kgo.Record{Topic: names.Retry[0], Key: []byte(key), Timestamp: t0.Add(3 * time.Millisecond), Offset: 1}
	headers.Set(tier, headers.Provider, "stripe")
	headers.Set(tier, headers.Route, "crm")
	headers.SetAttempt(tier, 2)
	dead := &kgo.Record{Topic: names.DLQ, Key: []byte(key), Timestamp: t0.Add(5*time.Minute + 2*time.Millisecond), Partition: 1, Offset: 4}
	headers.Set(dead, headers.Provider, "stripe")
	headers.Set(dead, headers.Route, "crm")
	headers.Set(dead, headers.DeadReason, headers.DeadPermanent)
	recs := []*kgo.Record{
		raw,
		outcomeRecord(names, key, "done", 1, t0.Add(time.Millisecond), `,"route":"billing"`),
		outcomeRecord(names, key, "retrying", 1, t0.Add(2*time.Millisecond), `,"route":"crm","tier":"5m","error":"HTTP 503"`),
		tier,
		outcomeRecord(names, key, "dead", 2, t0.Add(5*time.Minute+time.Millisecond), `,"route":"crm","dead_reason":"permanent","error":"HTTP 400"`),
		dead,
		outcomeRecord(names, key, "duplicate", 1, t0.Add(10*time.Minute), ""),
	}
	if err := ix.Apply(recs, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := ix.Trace(key)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range tr.Steps {
		steps = append(steps, s.Kind+"/"+s.Status+"@"+s.Route)
	}
	if got, want := strings.Join(steps, " "), "accepted/@ outcome/done@billing outcome/retrying@crm waiting/@crm outcome/dead@crm dead_letter/@crm outcome/duplicate@"; got != want {
		t.Fatalf("steps %s\nwant  %s", got, want)
	}
	if len(tr.Routes) != 2 {
		t.Fatalf("routes %+v, want billing and crm", tr.Routes)
	}
	billing, crm := tr.Routes[0], tr.Routes[1]
	if billing.Route != "billing" || billing.Now.State != StateDone || billing.Attempts != 1 || billing.LastOutcome == nil || billing.LastOutcome.Status != "done" {
		t.Errorf("billing %+v", billing)
	}
	if crm.Route != "crm" || crm.Now.State != StateDead || crm.Now.Ref != "1:4" || crm.Attempts != 2 || crm.DeadLetters != 1 ||
		crm.LastOutcome == nil || crm.LastOutcome.Status != "dead" || crm.LastOutcome.Error != "HTTP 400" {
		t.Errorf("crm %+v", crm)
	}
	if tr.Now.State != StateDead || tr.Now.Route != "crm" || tr.Now.Ref != "1:4" {
		t.Errorf("key now %+v, want dead on route crm", tr.Now)
	}
	if tr.Accepted != 1 || tr.Attempts != 3 || tr.Duplicates != 1 || tr.DeadLetters != 1 || tr.Unrouted != 0 {
		t.Errorf("counts %+v", tr)
	}
	if dl, ok, err := ix.DeadLetter("1:4"); err != nil || !ok || dl.Route != "crm" {
		t.Errorf("dead letter 1:4: %+v %v %v, want route crm", dl, ok, err)
	}
	// crm replayed and done: every route done, the key done.
	replayed := headers.IngestRecord(names.Raw, key, "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: t0, RequestID: "req-1"})
	replayed.Timestamp, replayed.Offset = t0.Add(20*time.Minute), 9
	headers.Set(replayed, headers.Origin, headers.OriginReplay)
	headers.Set(replayed, headers.ReplayID, "dlq:1:4")
	headers.Set(replayed, headers.Route, "crm")
	if err := ix.Apply([]*kgo.Record{replayed, outcomeRecord(names, key, "done", 1, t0.Add(21*time.Minute), `,"route":"crm","replay_id":"dlq:1:4"`)}, nil); err != nil {
		t.Fatal(err)
	}
	tr, _ = ix.Trace(key)
	if tr.Now.State != StateDone || tr.Routes[1].Now.State != StateDone || tr.Routes[1].Replays != 1 || tr.Replays != 1 || tr.Accepted != 1 {
		t.Errorf("after crm's replay: now %+v, crm %+v, replays %d, accepted %d", tr.Now, tr.Routes[1], tr.Replays, tr.Accepted)
	}
}

// TestTraceOfAKeyBeforeRoutes: outcomes without a route, and entries an
// index kept before routes (no route field at all), are the route
// default's; a duplicate stays the key's.
func TestTraceOfAKeyBeforeRoutes(t *testing.T) {
	names := topics.NewNames("", nil)
	ix := mustIndex(t, names)
	key := "stripe:evt_old"
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	old := []Event{
		{At: t0, Kind: KindAccepted, Topic: names.Raw, Provider: "stripe", Origin: "ingest"},
		{At: t0.Add(time.Millisecond), Kind: KindOutcome, Topic: names.Outcomes, Offset: 1, Provider: "stripe", Status: "dead", Attempt: 1},
		{At: t0.Add(2 * time.Millisecond), Kind: KindDeadLetter, Topic: names.DLQ, Offset: 2, Provider: "stripe", Ref: "0:2"},
	}
	err := ix.db.Update(func(txn *badger.Txn) error {
		for _, ev := range old {
			v, _ := json.Marshal(ev)
			if strings.Contains(string(v), `"route"`) {
				return fmt.Errorf("an event without a route marshals one: %s", v)
			}
			if err := txn.Set(eventKey(key, ev), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Apply([]*kgo.Record{outcomeRecord(names, key, "duplicate", 1, t0.Add(time.Minute), "")}, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := ix.Trace(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Routes) != 1 || tr.Routes[0].Route != "default" || tr.Routes[0].Now.State != StateDead || tr.Routes[0].Now.Ref != "0:2" {
		t.Fatalf("routes %+v, want the route default, dead at 0:2", tr.Routes)
	}
	if tr.Now.State != StateDead || tr.Now.Route != "default" || tr.Duplicates != 1 || tr.Attempts != 1 {
		t.Fatalf("trace now %+v, duplicates %d, attempts %d", tr.Now, tr.Duplicates, tr.Attempts)
	}
	if tr.Steps[0].Route != "" || tr.Steps[1].Route != "default" || tr.Steps[3].Route != "" {
		t.Fatalf("step routes %q %q %q, want key, default, key", tr.Steps[0].Route, tr.Steps[1].Route, tr.Steps[3].Route)
	}
}

// TestTraceUnrouted: a key that matched no route stands unrouted, with no
// route of its own.
func TestTraceUnrouted(t *testing.T) {
	names := topics.NewNames("", nil)
	ix := mustIndex(t, names)
	key := "stripe:evt_nobody"
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	raw := headers.IngestRecord(names.Raw, key, "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: t0})
	raw.Timestamp = t0
	if err := ix.Apply([]*kgo.Record{raw, outcomeRecord(names, key, "unrouted", 1, t0.Add(time.Millisecond), "")}, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := ix.Trace(key)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Now.State != StateUnrouted || len(tr.Routes) != 0 || tr.Unrouted != 1 || tr.Attempts != 0 || tr.Steps[1].Route != "" {
		t.Fatalf("trace %+v", tr)
	}
}
