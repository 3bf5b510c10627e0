package trace

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/badgerdb"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/topics"
)

func mustIndex(t *testing.T, names topics.Names) *Index {
	t.Helper()
	ix, err := Open(Options{InMemory: true, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func outcomeRecord(names topics.Names, key, status string, attempt int, at time.Time, extra string) *kgo.Record {
	return &kgo.Record{Topic: names.Outcomes, Key: []byte(key), Timestamp: at,
		Value: fmt.Appendf(nil, `{"key":%q,"provider":"stripe","event_type":"x","status":%q,"attempt":%d,"origin":"ingest","duration_ms":1,"time":%q%s}`,
			key, status, attempt, headers.FormatTime(at), extra)}
}

// TestTraceFolds: the steps of a key in time order whatever order the
// topics were read in, where it stands after each kind of last step, the
// counts, a DLQ entry's resolution, positions, and an unknown key.
func TestTraceFolds(t *testing.T) {
	names := topics.NewNames("t.", []string{"1s", "1h"})
	ix := mustIndex(t, names)
	key := "stripe:evt_1"
	t0 := time.Now().UTC().Truncate(time.Second).Add(-24 * time.Hour)
	due := headers.FormatTime(t0.Add(time.Hour))
	raw := headers.IngestRecord(names.Raw, key, "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: t0, RequestID: "req-1"})
	raw.Timestamp = t0
	tier := &kgo.Record{Topic: names.Retry[1], Key: []byte(key), Timestamp: t0.Add(2 * time.Millisecond), Partition: 1, Offset: 7}
	headers.Set(tier, headers.Provider, "stripe")
	headers.SetAttempt(tier, 2)
	headers.Set(tier, headers.DueAt, due)
	headers.Set(tier, headers.RetryAfter, due) // the destination named the tier's time
	headers.SetErrors(tier, []headers.ErrorEntry{{Attempt: 1, At: t0, Error: "HTTP 503", Retryable: true}})
	retrying := outcomeRecord(names, key, "retrying", 1, t0.Add(time.Millisecond), `,"tier":"1h","error":"HTTP 503"`)

	// Read out of order: the tier first, then outcomes, then raw.
	if err := ix.Apply([]*kgo.Record{tier, retrying, raw}, []Position{{Topic: names.Raw, Partition: 0, Next: 1}}); err != nil {
		t.Fatal(err)
	}
	tr, err := ix.Trace(key)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range tr.Steps {
		kinds = append(kinds, s.Kind)
	}
	if fmt.Sprint(kinds) != "[accepted outcome waiting]" {
		t.Fatalf("steps %v, want accepted, outcome, waiting", kinds)
	}
	if tr.Now.State != StateWaiting || tr.Now.Tier != "1h" || tr.Now.DueAt != due || tr.Now.NextAttempt != 2 || tr.Now.RetryAfter != due {
		t.Fatalf("now %+v, want waiting in 1h until its due time, attempt 2, for the destination's Retry-After", tr.Now)
	}
	if tr.Steps[0].RequestID != "req-1" || tr.Steps[1].Error != "HTTP 503" || tr.Steps[2].Errors != 1 {
		t.Fatalf("steps lack request id or errors: %+v", tr.Steps)
	}

	// Dead, then resolved; a duplicate changes nothing.
	dlq := &kgo.Record{Topic: names.DLQ, Key: []byte(key), Timestamp: t0.Add(time.Hour + 5*time.Millisecond), Partition: 3, Offset: 9}
	headers.Set(dlq, headers.Provider, "stripe")
	headers.Set(dlq, headers.DeadReason, headers.DeadExhausted)
	rs, _ := store.NewResolution(store.Ref{Partition: 3, Offset: 9}, store.Ignored, "n", "alice", t0.Add(2*time.Hour))
	status := &kgo.Record{Topic: names.DLQStatus, Key: []byte("3:9"), Timestamp: t0.Add(2 * time.Hour), Value: mustJSON(t, rs)}
	recs := []*kgo.Record{
		outcomeRecord(names, key, "dead", 2, t0.Add(time.Hour+4*time.Millisecond), `,"dead_reason":"exhausted","error":"HTTP 503"`),
		dlq, status,
		outcomeRecord(names, key, "duplicate", 1, t0.Add(3*time.Hour), ""),
	}
	if err := ix.Apply(recs, nil); err != nil {
		t.Fatal(err)
	}
	tr, _ = ix.Trace(key)
	if tr.Now.State != StateDead || tr.Now.Ref != "3:9" || tr.Now.Resolution == nil || tr.Now.Resolution.By != "alice" {
		t.Fatalf("now %+v, want dead at 3:9 resolved by alice", tr.Now)
	}
	if tr.Accepted != 1 || tr.Attempts != 2 || tr.Duplicates != 1 || tr.DeadLetters != 1 {
		t.Fatalf("counts accepted %d attempts %d duplicates %d dead letters %d, want 1 2 1 1", tr.Accepted, tr.Attempts, tr.Duplicates, tr.DeadLetters)
	}
	dl, ok, err := ix.DeadLetter("3:9")
	if err != nil || !ok || dl.Key != key || dl.Reason != headers.DeadExhausted {
		t.Fatalf("dead letter 3:9: %+v %v %v", dl, ok, err)
	}
	// A tombstone withdraws the resolution.
	if err := ix.Apply([]*kgo.Record{{Topic: names.DLQStatus, Key: []byte("3:9"), Timestamp: t0.Add(3 * time.Hour)}}, nil); err != nil {
		t.Fatal(err)
	}
	if rs, _ := ix.Resolution("3:9"); rs != nil {
		t.Fatalf("resolution after a tombstone: %+v", rs)
	}

	// Parked in a lane, then done from it.
	if err := ix.Apply([]*kgo.Record{outcomeRecord(names, key, "parked", 1, t0.Add(4*time.Hour), `,"lane":"t.webhooks.lane.stripe"`)}, nil); err != nil {
		t.Fatal(err)
	}
	if tr, _ = ix.Trace(key); tr.Now.State != StateParked || tr.Now.Lane != "t.webhooks.lane.stripe" {
		t.Fatalf("now %+v, want parked in the lane", tr.Now)
	}
	if err := ix.Apply([]*kgo.Record{outcomeRecord(names, key, "done", 1, t0.Add(5*time.Hour), `,"lane":"t.webhooks.lane.stripe"`)}, nil); err != nil {
		t.Fatal(err)
	}
	if tr, _ = ix.Trace(key); tr.Now.State != StateDone {
		t.Fatalf("now %+v, want done", tr.Now)
	}

	// Reading a record twice writes the same entry.
	if err := ix.Apply([]*kgo.Record{raw}, nil); err != nil {
		t.Fatal(err)
	}
	if tr2, _ := ix.Trace(key); len(tr2.Steps) != len(tr.Steps) {
		t.Fatalf("a record read twice gave %d steps, want %d", len(tr2.Steps), len(tr.Steps))
	}
	pos, err := ix.Positions()
	if err != nil || pos[names.Raw][0] != 1 {
		t.Fatalf("positions %v %v, want raw[0] at 1", pos, err)
	}
	if _, err := ix.Trace("stripe:evt_other"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	// A key that is a prefix of another is its own.
	if _, err := ix.Trace("stripe:evt_"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("prefix of a key: %v, want unknown", err)
	}
}

func mustJSON(t *testing.T, rs store.Resolution) []byte {
	t.Helper()
	b, err := rs.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRetention: a record older than the retention is not indexed.
func TestRetention(t *testing.T) {
	names := topics.NewNames("t.", nil)
	ix := mustIndex(t, names)
	old := headers.IngestRecord(names.Raw, "stripe:old", "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: time.Now()})
	old.Timestamp = time.Now().Add(-DefaultRetention - time.Hour)
	if err := ix.Apply([]*kgo.Record{old}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Trace("stripe:old"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("record past the retention: %v, want unknown", err)
	}
}

// TestTraceStepsBounded: a key re-sent more than MaxSteps times keeps its
// last MaxSteps steps, says how many earlier ones it left out, and counts
// them all (issue 25: one key re-sent 200 times made a 24.1 MB answer).
func TestTraceStepsBounded(t *testing.T) {
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var evs []Event
	for i := range MaxSteps + 250 {
		evs = append(evs, Event{At: at.Add(time.Duration(i) * time.Second), Kind: KindAccepted, Provider: "stripe", Offset: int64(i)})
		if i == 0 {
			evs = append(evs, Event{At: at, Kind: KindOutcome, Status: "done", Provider: "stripe"})
			continue
		}
		evs = append(evs, Event{At: at.Add(time.Duration(i) * time.Second), Kind: KindOutcome, Status: "duplicate", Provider: "stripe"})
	}
	tr := build("stripe:evt_resent", evs)
	if len(tr.Steps) != MaxSteps || tr.StepsOmitted != len(evs)-MaxSteps {
		t.Fatalf("%d steps, %d omitted; want %d and %d", len(tr.Steps), tr.StepsOmitted, MaxSteps, len(evs)-MaxSteps)
	}
	if first := tr.Steps[0]; first.At != evs[len(evs)-MaxSteps].At || first.Kind != evs[len(evs)-MaxSteps].Kind {
		t.Fatalf("first step %+v: want event %d, the first of the last %d", first, len(evs)-MaxSteps, MaxSteps)
	}
	if tr.Accepted != MaxSteps+250 || tr.Duplicates != MaxSteps+249 || tr.Attempts != 1 || tr.Now.State != StateDone {
		t.Fatalf("counts accepted %d, duplicates %d, attempts %d, state %s: want every event counted and done", tr.Accepted, tr.Duplicates, tr.Attempts, tr.Now.State)
	}
	if short := build("k", evs[:10]); short.StepsOmitted != 0 || len(short.Steps) != 10 {
		t.Fatalf("a short trace: %d steps, %d omitted", len(short.Steps), short.StepsOmitted)
	}
}

// TestOpenHeld: a directory an open index holds (dlq serve's) is
// badgerdb.ErrHeld to a second Open (dlq trace then asks dlq serve).
func TestOpenHeld(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the held probe is an flock (unix)")
	}
	dir := t.TempDir()
	ix, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, badgerdb.ErrHeld) {
		t.Errorf("second open of %s: %v, want badgerdb.ErrHeld", dir, err)
	}
}

// TestTraceSuppressed: a key whose only step is ingest's suppressed
// outcome stands suppressed as a replay of the key it repeated; the first
// key's trace is untouched; a key accepted later (sent again after the
// window) stands where its delivery stands, the suppression still
// counted.
func TestTraceSuppressed(t *testing.T) {
	names := topics.NewNames("t.", []string{"1s"})
	ix := mustIndex(t, names)
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	first, second := "github:a", "github:b"
	rawFirst := headers.IngestRecord(names.Raw, first, "org_block", nil, headers.IngestMeta{Provider: "github", ReceivedAt: t0})
	rawFirst.Timestamp = t0
	sup := &kgo.Record{Topic: names.Outcomes, Key: []byte(second), Timestamp: t0.Add(time.Second), Partition: 1, Offset: 4,
		Value: outcome.Suppressed(second, "github", "org_block", first, headers.FormatTime(t0.Add(time.Second)))}
	if err := ix.Apply([]*kgo.Record{rawFirst, sup}, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := ix.Trace(second)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Now.State != StateSuppressed || tr.Now.ReplayOf != first || tr.Suppressed != 1 || tr.Accepted != 0 || len(tr.Routes) != 0 ||
		len(tr.Steps) != 1 || tr.Steps[0].Status != outcome.StatusSuppressed || tr.Steps[0].ReplayOf != first || tr.Steps[0].Route != "" {
		t.Fatalf("trace of the suppressed key: %+v", tr)
	}
	if tr, err := ix.Trace(first); err != nil || tr.Now.State != StatePending || tr.Suppressed != 0 {
		t.Fatalf("trace of the first key: %+v, %v; want pending, nothing suppressed", tr, err)
	}
	// Sent again after the window: accepted, then done on its route.
	rawAgain := headers.IngestRecord(names.Raw, second, "org_block", nil, headers.IngestMeta{Provider: "github", ReceivedAt: t0.Add(2 * time.Hour)})
	rawAgain.Timestamp = t0.Add(2 * time.Hour)
	done := outcomeRecord(names, second, "done", 1, t0.Add(2*time.Hour+time.Millisecond), `,"route":"default"`)
	if err := ix.Apply([]*kgo.Record{rawAgain, done}, nil); err != nil {
		t.Fatal(err)
	}
	if tr, err := ix.Trace(second); err != nil || tr.Now.State != StateDone || tr.Suppressed != 1 || tr.Accepted != 1 {
		t.Fatalf("after the key was sent again and delivered: %+v, %v; want done, 1 suppressed, 1 accepted", tr, err)
	}
}

// TestIdleCompactors: an index nobody uses has Badger's compactors
// stopped; records applied and keys traced after each quiet spell, by
// several goroutines at once, are all there.
func TestIdleCompactors(t *testing.T) {
	names := topics.NewNames("t.", nil)
	ix, err := Open(Options{Dir: t.TempDir(), Names: names, compactCheck: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	at := time.Now().UTC().Add(-time.Hour)
	for round := range 3 {
		for deadline := time.Now().Add(10 * time.Second); !ix.idle.Stopped(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: compactors not stopped within 10 s of the last use", round)
			}
		}
		errs := make(chan error, 4)
		for g := range 4 {
			go func() {
				key := fmt.Sprintf("stripe:evt_%d_%d", round, g)
				raw := headers.IngestRecord(names.Raw, key, "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: at})
				raw.Timestamp = at
				if err := ix.Apply([]*kgo.Record{raw, outcomeRecord(names, key, "delivered", 1, at.Add(time.Millisecond), "")}, nil); err != nil {
					errs <- err
					return
				}
				tr, err := ix.Trace(key)
				if err == nil && len(tr.Steps) != 2 {
					err = fmt.Errorf("%s: %d steps, want 2 (accepted, outcome)", key, len(tr.Steps))
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}
