package consume

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// orderedYAML is one ordered provider, ord, whose entity is the body's
// /entity, with the routes crm and audit (every event, HTTP).
const orderedYAML = `providers:
  ord:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id}
    ordering: {json: /entity}
    routes:
      crm: {destination: {url: "http://crm.invalid/", max_inflight: 8}}
      audit: {destination: {url: "http://audit.invalid/", max_inflight: 8}}
`

// callLog records each route's calls in order and fails the calls listed
// in fail (route/key -> how many first calls fail with 503).
type callLog struct {
	mu    sync.Mutex
	calls map[string][]string // route -> keys in call order
	n     map[string]int
	fail  map[string]int
}

func (c *callLog) Handle(_ context.Context, d deliver.Delivery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls, c.n = map[string][]string{}, map[string]int{}
	}
	c.calls[d.Route] = append(c.calls[d.Route], d.Key)
	c.n[d.Route+"/"+d.Key]++
	if c.n[d.Route+"/"+d.Key] <= c.fail[d.Route+"/"+d.Key] {
		return &deliver.StatusError{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable"}
	}
	return nil
}

func (c *callLog) of(route string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls[route])
}

// produceEntity writes one ingest record of ord, as ingest does for an
// ordered provider: hookline.entity set, in partition 0.
func (f *fakeKafka) produceEntity(t *testing.T, key, entity string) {
	t.Helper()
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := headers.IngestRecord(f.names.Raw, key, "thing.happened", []byte(`{"id":"`+key+`","entity":"`+entity+`"}`),
		headers.IngestMeta{Provider: "ord", ReceivedAt: time.Now(), RequestID: "r", ContentType: "application/json"})
	r.Partition = 0
	headers.Set(r, headers.Entity, entity)
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// retrier moves what the retry tiers hold back to raw, in order, as the
// retrier does (origin retry), each record once.
type retrier struct {
	f     *fakeKafka
	moved map[string]bool // topic/offset
}

func (rt *retrier) pass(t *testing.T) int {
	t.Helper()
	cl := rt.f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	n := 0
	for _, tier := range rt.f.names.Retry {
		for _, r := range rt.f.readCommitted(t, tier) {
			id := fmt.Sprintf("%s/%d", tier, r.Offset)
			if rt.moved[id] {
				continue
			}
			rt.moved[id] = true
			back := &kgo.Record{Topic: rt.f.names.Raw, Partition: 0, Key: r.Key, Value: r.Value, Headers: slices.Clone(r.Headers)}
			headers.Set(back, headers.Origin, headers.OriginRetry)
			if err := cl.ProduceSync(context.Background(), back).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// TestOrderingHoldsEntity (issue 24 items 1 and 2): the records of an
// entity are called in order on each route; while the head fails on crm
// (twice), the entity's later records wait behind it on crm only, with no
// attempt used, and are called in order once it is done; another entity
// and the sibling route audit are never held.
func TestOrderingHoldsEntity(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
		t.Fatal(err)
	}
	dest := &callLog{fail: map[string]int{"crm/e7-2": 2}}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": dest}, procOptions{providersYAML: orderedYAML})

	var e1, e7 []string
	for i := 1; i <= 5; i++ {
		k1, k7 := fmt.Sprintf("e1-%d", i), fmt.Sprintf("e7-%d", i)
		f.produceEntity(t, k7, "e7")
		f.produceEntity(t, k1, "e1")
		e1, e7 = append(e1, k1), append(e7, k7)
	}
	rt := &retrier{f: f, moved: map[string]bool{}}
	waitFor(t, "every key done on crm", func() bool {
		rt.pass(t)
		done := 0
		for key, os := range f.outcomes(t) {
			for _, o := range os {
				if o.Route == "crm" && o.Status == outcome.StatusDone && (slices.Contains(e1, key) || slices.Contains(e7, key)) {
					done++
				}
			}
		}
		return done == 10
	})
	only := func(calls, keys []string) []string {
		var out []string
		for _, c := range calls {
			if slices.Contains(keys, c) {
				out = append(out, c)
			}
		}
		return out
	}
	crm, audit := dest.of("crm"), dest.of("audit")
	if got, want := only(crm, e7), []string{"e7-1", "e7-2", "e7-2", "e7-2", "e7-3", "e7-4", "e7-5"}; !slices.Equal(got, want) {
		t.Errorf("crm's calls of e7: %v, want %v (its later records after e7-2 succeeded)", got, want)
	}
	if got := only(crm, e1); !slices.Equal(got, e1) {
		t.Errorf("crm's calls of e1: %v, want %v, each once in order", got, e1)
	}
	if got := only(audit, e7); !slices.Equal(got, e7) {
		t.Errorf("audit's calls of e7: %v, want %v: the sibling route is never held", got, e7)
	}
	if got := only(audit, e1); !slices.Equal(got, e1) {
		t.Errorf("audit's calls of e1: %v, want %v", got, e1)
	}
	// e1 was not held behind e7: all of e1 was called on crm before e7-2
	// succeeded.
	last1, ok7 := slices.Index(crm, "e1-5"), slices.Index(crm, "e7-3")
	if last1 > ok7 {
		t.Errorf("crm called e1-5 at %d, after e7-3 at %d: e1 waited behind e7 (%v)", last1, ok7, crm)
	}
	out := f.outcomes(t)
	held := 0
	for _, k := range e7[2:] {
		for _, o := range out[k] {
			if o.Route == "crm" && o.Status == outcome.StatusHeld {
				held++
			}
		}
	}
	if held < 3 {
		t.Errorf("e7-3..e7-5 have %d held outcomes on crm, want at least 3", held)
	}
}

// TestOrderingOnDead: when the head of an entity goes to the DLQ, on_dead:
// release delivers the entity's later records at once, in order; on_dead:
// hold keeps them waiting until the head is replayed and done.
func TestOrderingOnDead(t *testing.T) {
	for _, mode := range []string{"release", "hold"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeKafka(t)
			adm := kadm.NewClient(f.client(t))
			if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
				t.Fatal(err)
			}
			yml := strings.Replace(orderedYAML, `crm: {destination: {url: "http://crm.invalid/", max_inflight: 8}}`,
				`crm: {destination: {url: "http://crm.invalid/", max_inflight: 8}, on_dead: `+mode+`}`, 1)
			dest := &callLog{fail: map[string]int{"crm/e7-1": 3}} // every attempt of tiers 1s,2s
			runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": dest}, procOptions{providersYAML: yml})
			for i := 1; i <= 3; i++ {
				f.produceEntity(t, fmt.Sprintf("e7-%d", i), "e7")
			}
			rt := &retrier{f: f, moved: map[string]bool{}}
			crmDone := func(key string) bool {
				for _, o := range f.outcomes(t)[key] {
					if o.Route == "crm" && o.Status == outcome.StatusDone {
						return true
					}
				}
				return false
			}
			waitFor(t, "e7-1 dead on crm", func() bool {
				rt.pass(t)
				return len(f.readCommitted(t, f.names.DLQ)) == 1
			})
			if mode == "release" {
				waitFor(t, "e7-2 and e7-3 done on crm", func() bool { rt.pass(t); return crmDone("e7-2") && crmDone("e7-3") })
				if got := dest.of("crm"); !slices.Equal(got, []string{"e7-1", "e7-1", "e7-1", "e7-2", "e7-3"}) {
					t.Fatalf("crm's calls %v, want e7-1 three times, then e7-2, e7-3", got)
				}
				return
			}
			// hold: the later records go round behind the dead head, called never.
			waitFor(t, "e7-2 held twice (sent round behind its dead head)", func() bool {
				rt.pass(t)
				n := 0
				for _, o := range f.outcomes(t)["e7-2"] {
					if o.Route == "crm" && o.Status == outcome.StatusHeld {
						n++
					}
				}
				return n >= 2
			})
			if got := dest.of("crm"); !slices.Equal(got, []string{"e7-1", "e7-1", "e7-1"}) {
				t.Fatalf("crm's calls with its head dead and on_dead: hold: %v, want e7-1's three only", got)
			}
			// The head replayed (as dlq replay sends it), and done this time.
			dead := f.readCommitted(t, f.names.DLQ)[0]
			replay := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: dead.Key, Value: dead.Value}
			for _, h := range dead.Headers {
				if h.Key != headers.DeadReason && h.Key != headers.DueAt {
					replay.Headers = append(replay.Headers, h)
				}
			}
			headers.Set(replay, headers.Origin, headers.OriginReplay)
			headers.SetAttempt(replay, 1)
			headers.Set(replay, headers.ReplayID, fmt.Sprintf("dlq:0:%d", dead.Offset))
			dest.mu.Lock()
			dest.fail = nil
			dest.mu.Unlock()
			if err := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(context.Background(), replay).FirstErr(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "e7-2 and e7-3 done on crm after the replay", func() bool { rt.pass(t); return crmDone("e7-2") && crmDone("e7-3") })
			if got := dest.of("crm"); !slices.Equal(got, []string{"e7-1", "e7-1", "e7-1", "e7-1", "e7-2", "e7-3"}) {
				t.Fatalf("crm's calls %v, want e7-1 three times and once replayed, then e7-2, e7-3", got)
			}
		})
	}
}

// A record with a garbled hookline.held (written by hand) is taken as no
// held copy: delivered, and the processor goes on.
func TestOrderingGarbledHeld(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
		t.Fatal(err)
	}
	dest := &callLog{}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": dest}, procOptions{providersYAML: orderedYAML})
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := headers.IngestRecord(f.names.Raw, "g-1", "thing.happened", []byte(`{"id":"g-1","entity":"g"}`),
		headers.IngestMeta{Provider: "ord", ReceivedAt: time.Now(), RequestID: "r", ContentType: "application/json"})
	headers.Set(r, headers.Entity, "g")
	headers.Set(r, headers.Held, "not-a-number")
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f.produceEntity(t, "g-2", "g")
	waitFor(t, "g-1 and g-2 called on crm", func() bool { return len(dest.of("crm")) == 2 })
	if got := dest.of("crm"); !slices.Equal(got, []string{"g-1", "g-2"}) {
		t.Fatalf("crm's calls %v, want g-1, g-2", got)
	}
}

// commitWatch is a destination that notes, at each call, the processor
// group's committed offset of raw partition 0.
type commitWatch struct {
	f  *fakeKafka
	cl *kadm.Client

	mu    sync.Mutex
	seen  map[string]int64 // key -> committed offset at its first call
	order []string
}

func (w *commitWatch) Handle(ctx context.Context, d deliver.Delivery) error {
	at := int64(-1)
	offs, err := w.cl.FetchOffsetsForTopics(ctx, w.f.names.Group(topics.GroupProcessor), w.f.names.Raw)
	if err != nil {
		return err // retried: the test then sees a call twice
	}
	if o, ok := offs.Lookup(w.f.names.Raw, 0); ok && o.Err == nil {
		at = o.At
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[d.Key]; !ok {
		w.seen[d.Key] = at
	}
	w.order = append(w.order, d.Key)
	return nil
}

// TestOrderingCallsAfterCommit: an entity's record is called only once
// the call of the one before it committed (the barrier), so a kill
// repeats at most one call per entity and never calls an earlier event
// after a later one. The four records are read in one fetch; without the
// barrier their calls would follow each other with nothing committed.
func TestOrderingCallsAfterCommit(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
		t.Fatal(err)
	}
	const n = 4
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("b-%d", i+1)
		f.produceEntity(t, keys[i], "b") // offsets 0..n-1
	}
	dest := &commitWatch{f: f, cl: adm, seen: map[string]int64{}}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": &callLog{}}, procOptions{providersYAML: orderedYAML})
	waitFor(t, "every key called on crm", func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.seen) == n
	})
	dest.mu.Lock()
	defer dest.mu.Unlock()
	if !slices.Equal(dest.order, keys) {
		t.Errorf("crm calls %v, want each of %v once, in order", dest.order, keys)
	}
	for i, k := range keys[1:] {
		// Offset i (the record before) committed: the low-water mark is past it.
		if want := int64(i + 1); dest.seen[k] < want {
			t.Errorf("%s called with raw committed at %d: want ≥ %d (the call before it committed)", k, dest.seen[k], want)
		}
	}
}

// TestOrderingBackfill (issue 24 item 3): a backfill of an ordered
// provider's route keeps the entity's order there: its records of one
// entity are called one at a time, in the order the backfill sent them,
// the later ones held behind a head that fails; the sibling route is not
// called.
func TestOrderingBackfill(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
		t.Fatal(err)
	}
	dest := &callLog{fail: map[string]int{"crm/b-1": 2}}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": dest}, procOptions{providersYAML: orderedYAML})
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	keys := []string{"b-1", "b-2", "b-3"}
	for _, key := range keys {
		r := headers.IngestRecord(f.names.Raw, key, "thing.happened", []byte(`{"id":"`+key+`","entity":"b"}`),
			headers.IngestMeta{Provider: "ord", ReceivedAt: time.Now(), RequestID: "r", ContentType: "application/json"})
		r.Partition = 0
		for k, v := range map[string]string{headers.Entity: "b", headers.Origin: headers.OriginBackfill, headers.Route: "crm",
			headers.Backfill: headers.BackfillMissing, headers.ReplayID: "backfill:bf1", headers.Attempt: "1"} {
			headers.Set(r, k, v)
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rt := &retrier{f: f, moved: map[string]bool{}}
	waitFor(t, "b-1..b-3 done on crm", func() bool {
		rt.pass(t)
		out := f.outcomes(t)
		for _, k := range keys {
			if !slices.Contains(outcomeOf(out, k, "crm"), outcome.StatusDone) {
				return false
			}
		}
		return true
	})
	if got, want := dest.of("crm"), []string{"b-1", "b-1", "b-1", "b-2", "b-3"}; !slices.Equal(got, want) {
		t.Errorf("crm calls %v, want %v (b-2 and b-3 behind b-1's two failures, in order)", got, want)
	}
	if got := dest.of("audit"); len(got) != 0 {
		t.Errorf("audit calls %v: a backfill of crm calls no other route", got)
	}
}

// TestOrderingHoldSurvivesRestart: an entity held behind its dead head
// (on_dead: hold) stays held for a processor that restored its state from
// the changelog: its next record is held, not called (the restored
// partition's heldKeys name the entity).
func TestOrderingHoldSurvivesRestart(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
		t.Fatal(err)
	}
	yml := strings.Replace(orderedYAML, `crm: {destination: {url: "http://crm.invalid/", max_inflight: 8}}`,
		`crm: {destination: {url: "http://crm.invalid/", max_inflight: 8}, on_dead: hold}`, 1)
	dest := &callLog{fail: map[string]int{"crm/e7-1": 3}} // every attempt of tiers 1s,2s
	stop := runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": dest}, procOptions{providersYAML: yml})
	f.produceEntity(t, "e7-1", "e7")
	rt := &retrier{f: f, moved: map[string]bool{}}
	waitFor(t, "e7-1 dead on crm", func() bool {
		rt.pass(t)
		return len(f.readCommitted(t, f.names.DLQ)) == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A new processor, its store empty: restored from the changelog.
	after := &callLog{}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": after, "ord/audit": after}, procOptions{providersYAML: yml})
	f.produceEntity(t, "e7-2", "e7")
	waitFor(t, "e7-2 held on crm behind its dead head, after the restart", func() bool {
		rt.pass(t)
		return slices.Contains(outcomeOf(f.outcomes(t), "e7-2", "crm"), outcome.StatusHeld)
	})
	if got := after.of("crm"); len(got) != 0 {
		t.Errorf("crm calls after the restart %v: want none, e7-2 held behind the dead e7-1", got)
	}
	if got := after.of("audit"); !slices.Equal(got, []string{"e7-2"}) {
		t.Errorf("audit calls after the restart %v: want e7-2 (never held)", got)
	}
}
