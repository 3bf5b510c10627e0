package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/schemas"
)

// dlqEntry is a DLQ record with every header the processor writes.
func dlqEntry(p int32, o int64, key string, errs int) *store.Entry {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := &kgo.Record{Topic: "webhooks.dlq", Partition: p, Offset: o, Key: []byte(key), Value: []byte(`{"id":"` + key + `"}`), Timestamp: at}
	for _, h := range [][2]string{
		{headers.Provider, "stripe"}, {headers.EventType, "invoice.paid"}, {headers.IdempotencyKey, key},
		{headers.ReceivedAt, "2026-03-01T12:00:00.120Z"}, {headers.RequestID, "req-1"}, {headers.ContentType, "application/json"},
		{headers.Origin, headers.OriginRetry}, {headers.Attempt, "4"}, {"http.stripe-signature", "t=1,v1=ab"},
		{headers.FirstSeenAt, "2026-03-01T12:00:00.120Z"}, {headers.DueAt, "2026-03-01T12:05:00.000Z"},
		{headers.DeadReason, headers.DeadExhausted}, {headers.SourceTopic, "webhooks.retry.5m"},
		{headers.SourcePartition, "3"}, {headers.SourceOffset, "17"}, {headers.Route, "billing"},
		{headers.InvalidPayload, "schema invoice.json: at '/id': got number, want string"},
		{headers.Traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	} {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	var es []headers.ErrorEntry
	for i := 1; i <= errs; i++ {
		es = append(es, headers.ErrorEntry{Attempt: i, At: at, Error: fmt.Sprintf("error %d", i), Retryable: true})
	}
	headers.SetErrors(r, es)
	return &store.Entry{Ref: store.Ref{Partition: p, Offset: o}, Record: r, BodyBytes: len(r.Value)}
}

func TestRecord(t *testing.T) {
	e := dlqEntry(3, 1187, "stripe:evt_1", 4)
	out, err := Record("webhooks.raw", e)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.ValidateHeaders(out.Headers); err != nil {
		t.Fatalf("replay headers fail the schema: %v", err)
	}
	if out.Topic != "webhooks.raw" || string(out.Key) != "stripe:evt_1" || string(out.Value) != string(e.Record.Value) {
		t.Fatalf("record %s %s %s", out.Topic, out.Key, out.Value)
	}
	for name, want := range map[string]string{
		headers.Origin: headers.OriginReplay, headers.Attempt: "1", headers.ReplayID: "dlq:3:1187",
		headers.Provider: "stripe", headers.FirstSeenAt: "2026-03-01T12:00:00.120Z", "http.stripe-signature": "t=1,v1=ab",
		headers.Errors: headers.Value(e.Record, headers.Errors),
		// The entry's route goes with it: the replay is delivered to
		// that route only, never to the provider's other routes.
		headers.Route: "billing",
		// The dead-lettering attempt's trace context: the replay's
		// processing continues that trace (operating.md, Tracing).
		headers.Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	} {
		if got := headers.Value(out, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, gone := range dropped {
		if _, ok := headers.Get(out, gone); ok {
			t.Errorf("replay keeps %s", gone)
		}
	}
	seen := map[string]bool{}
	for _, h := range out.Headers {
		if seen[h.Key] {
			t.Errorf("header %s twice", h.Key)
		}
		seen[h.Key] = true
	}
	// The DLQ record is not changed.
	if headers.Value(e.Record, headers.Origin) != headers.OriginRetry || headers.Value(e.Record, headers.DeadReason) == "" {
		t.Fatal("Record changed the DLQ record")
	}
	out.Key[0] = 'X'
	if e.Record.Key[0] == 'X' {
		t.Fatal("replay shares the DLQ record's key bytes")
	}
}

// TestRecordOfAnEntryBeforeRoutes: an entry without hookline.route (the
// route default, written before routes) replays without it, which means
// the route default again; its result names the route.
func TestRecordOfAnEntryBeforeRoutes(t *testing.T) {
	e := dlqEntry(0, 1, "stripe:evt_old", 1)
	headers.Delete(e.Record, headers.Route)
	out, err := Record("webhooks.raw", e)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := headers.Get(out, headers.Route); ok {
		t.Errorf("a replay of an entry without a route got %s=%q", headers.Route, headers.Value(out, headers.Route))
	}
	var got []Result
	New(&recorder{}).Run(t.Context(), []*store.Entry{e, dlqEntry(0, 2, "stripe:evt_new", 1)}, Options{Raw: "raw", Status: "status", DryRun: true},
		func(r Result) { got = append(got, r) })
	if len(got) != 2 || got[0].Route != "default" || got[1].Route != "billing" {
		t.Errorf("results %+v: want routes default and billing", got)
	}
}

// TestOutcomeFor: a replay's outcome is its route's, the route default's
// when the outcome names none, or a duplicate's or unrouted's, decided
// for the key.
func TestOutcomeFor(t *testing.T) {
	for _, tc := range []struct {
		o     outcome.Outcome
		route string
		want  bool
	}{
		{outcome.Outcome{Status: "done", Route: "billing"}, "billing", true},
		{outcome.Outcome{Status: "done", Route: "crm"}, "billing", false},
		{outcome.Outcome{Status: "done"}, "default", true},
		{outcome.Outcome{Status: "done"}, "billing", false},
		{outcome.Outcome{Status: "done", Route: "default"}, "default", true},
		{outcome.Outcome{Status: "duplicate"}, "billing", true},
		{outcome.Outcome{Status: "unrouted"}, "billing", true},
	} {
		if got := outcomeFor(tc.o, tc.route); got != tc.want {
			t.Errorf("outcome %+v for a replay to %s: %v, want %v", tc.o, tc.route, got, tc.want)
		}
	}
}

func TestRecordHistoryAndKeyless(t *testing.T) {
	out, err := Record("raw", dlqEntry(0, 1, "k", MaxHistory+8))
	if err != nil {
		t.Fatal(err)
	}
	es, _ := headers.GetErrors(out)
	if len(es) != MaxHistory || es[0].Attempt != 9 || es[len(es)-1].Attempt != MaxHistory+8 {
		t.Fatalf("history of %d, from attempt %d", len(es), es[0].Attempt)
	}
	garbled := dlqEntry(0, 2, "k", 1)
	headers.Set(garbled.Record, headers.Errors, "[{not json")
	if out, err := Record("raw", garbled); err != nil || headers.Value(out, headers.Errors) != "" {
		t.Fatalf("garbled history: %v, %q", err, headers.Value(out, headers.Errors))
	}
	keyless := dlqEntry(0, 3, "", 1)
	if _, err := Record("raw", keyless); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("keyless record: %v", err)
	}
}

// recorder is a producer that records what it was given and acks at once.
type recorder struct {
	mu   sync.Mutex
	recs []*kgo.Record
	fail func(*kgo.Record) error
}

func (r *recorder) Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) {
	r.mu.Lock()
	var err error
	if r.fail != nil {
		err = r.fail(rec)
	}
	if err == nil {
		rec.Partition, rec.Offset = 0, int64(len(r.recs))
		r.recs = append(r.recs, rec)
	}
	r.mu.Unlock()
	go promise(rec, err)
}

func (r *recorder) topics() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for _, x := range r.recs {
		m[x.Topic]++
	}
	return m
}

func entries(n int) []*store.Entry {
	var es []*store.Entry
	for i := 0; i < n; i++ {
		es = append(es, dlqEntry(int32(i%3), int64(i), fmt.Sprintf("stripe:evt_%d", i), 1))
	}
	return es
}

func TestRunMarksEachReplay(t *testing.T) {
	p := &recorder{fail: func(r *kgo.Record) error {
		if r.Topic == "raw" && string(r.Key) == "stripe:evt_2" {
			return fmt.Errorf("broker says no")
		}
		return nil
	}}
	var got []Result
	var mu sync.Mutex
	sum := New(p).Run(t.Context(), entries(5), Options{Raw: "raw", Status: "status", By: "alice", Note: "fixed"}, func(r Result) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
	})
	if sum.Total != 5 || sum.Sent != 4 || sum.Failed != 1 || sum.Interrupted || len(got) != 5 {
		t.Fatalf("summary %+v, %d results", sum, len(got))
	}
	if tp := p.topics(); tp["raw"] != 4 || tp["status"] != 4 {
		t.Fatalf("produced %v, want 4 replays and 4 resolutions", tp)
	}
	for _, r := range got {
		if r.Key == "stripe:evt_2" {
			if r.Sent || r.Resolved || !strings.Contains(r.Error, "broker says no") {
				t.Errorf("failed replay reported as %+v", r)
			}
			continue
		}
		if !r.Sent || !r.Resolved || r.Error != "" || r.Offset < 0 {
			t.Errorf("result %+v", r)
		}
	}
	for _, rec := range p.recs {
		if rec.Topic != "status" {
			continue
		}
		if err := schemas.Validate(schemas.DLQStatus, rec.Value); err != nil {
			t.Fatalf("resolution fails its schema: %v\n%s", err, rec.Value)
		}
		var res store.Resolution
		_ = json.Unmarshal(rec.Value, &res)
		if res.Resolution != store.Replayed || res.By != "alice" || res.Note != "fixed" || string(rec.Key) != res.Ref || res.ReplayID != "dlq:"+res.Ref {
			t.Fatalf("resolution %s: %+v", rec.Key, res)
		}
	}
}

func TestRunDryRunProducesNothing(t *testing.T) {
	p := &recorder{}
	n := 0
	sum := New(p).Run(t.Context(), entries(7), Options{Raw: "raw", Status: "status", DryRun: true}, func(r Result) {
		n++
		if !r.DryRun || r.Sent || r.Partition != -1 {
			t.Errorf("dry-run result %+v", r)
		}
	})
	if len(p.recs) != 0 || n != 7 || sum.Sent != 0 || sum.Failed != 0 {
		t.Fatalf("dry run produced %d records, %d results, %+v", len(p.recs), n, sum)
	}
}

func TestRunRateAndInterrupt(t *testing.T) {
	p := &recorder{}
	var progress []Progress
	start := time.Now()
	sum := New(p).Run(t.Context(), entries(11), Options{Raw: "raw", Status: "status", Rate: 20, By: "a",
		Progress: func(pr Progress) { progress = append(progress, pr) }}, func(Result) {})
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Fatalf("11 replays at 20/s took %s, want at least 500ms", took)
	}
	last := progress[len(progress)-1]
	if sum.Sent != 11 || last.Done != 11 || last.Total != 11 || last.PerSecond <= 0 {
		t.Fatalf("summary %+v, last progress %+v", sum, last)
	}

	// Interrupted: what was sent is marked, the rest is not attempted.
	p = &recorder{}
	ctx, cancel := context.WithCancel(t.Context())
	var results []Result
	var mu sync.Mutex
	time.AfterFunc(300*time.Millisecond, cancel)
	sum = New(p).Run(ctx, entries(100), Options{Raw: "raw", Status: "status", Rate: 10, By: "a"}, func(r Result) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	})
	tp := p.topics()
	if !sum.Interrupted || sum.Sent == 0 || sum.Sent >= 100 || tp["raw"] != sum.Sent || tp["status"] != sum.Sent {
		t.Fatalf("interrupted run: %+v, produced %v", sum, tp)
	}
	if slices.ContainsFunc(results, func(r Result) bool { return r.Sent && !r.Resolved }) {
		t.Fatal("a replay sent before the interrupt was not marked replayed")
	}
}

// TestRunAndWaitOnKafka replays to a kfake cluster and finds the outcomes a
// processor would write, matched by where each replay landed.
func TestRunAndWaitOnKafka(t *testing.T) {
	addrs := kafkatest.Fake(t, kfake.SeedTopics(2, "raw", "status", "outcomes"))
	cl := kafkatest.Client(t, addrs)
	newClient := kafkatest.NewClient(addrs)
	ctx := t.Context()
	// An old outcome of the same replay id, before the watch: not this run's.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "outcomes", Key: []byte("stripe:evt_0"),
		Value: []byte(`{"status":"done","replay_id":"dlq:0:0","partition":0,"offset":0}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w, err := WatchOutcomes(ctx, kadm.NewClient(cl), newClient, "outcomes")
	if err != nil {
		t.Fatal(err)
	}
	var res []*Result
	New(cl).Run(ctx, entries(3), Options{Raw: "raw", Status: "status", By: "a"}, func(r Result) { res = append(res, &r) })
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	// The processor's outcomes for two of the three.
	for _, r := range res[:2] {
		v := fmt.Sprintf(`{"status":"duplicate","replay_id":%q,"partition":%d,"offset":%d}`, r.ReplayID, r.Partition, r.Offset)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "outcomes", Key: []byte(r.Key), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := w.Wait(ctx, res, 2*time.Second)
	if err != nil || pending != 1 {
		t.Fatalf("Wait: %d pending, %v", pending, err)
	}
	if res[0].Outcome != "duplicate" || res[1].Outcome != "duplicate" || res[2].Outcome != OutcomePending {
		t.Fatalf("outcomes %q %q %q", res[0].Outcome, res[1].Outcome, res[2].Outcome)
	}
}
