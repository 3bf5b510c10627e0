package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// TestTrack: the tracker counts what List and Summarise count — committed
// entries only, the latest resolution per ref, tombstones withdrawing one —
// then follows new entries and resolutions without rescanning, and forgets
// entries that retention removed.
func TestTrack(t *testing.T) {
	s, cl, addrs, names, warnings := fakeStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	now := time.Now().Truncate(time.Millisecond)
	produce := func(rs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func(p int32, o int64) {
		t.Helper()
		rs, _ := NewResolution(Ref{p, o}, Ignored, "x", "bob", now)
		if err := s.Resolve(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	txn := kafkatest.Client(t, addrs, kgo.TransactionalID("t-track"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	aborted := func(r *kgo.Record) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	}
	// Before it starts: a@0:0 (oldest, resolved), b@0:1, c@1:0, an aborted
	// write on partition 2, and 1:0 resolved then withdrawn (tombstone).
	produce(deadRec(names.DLQ, 0, "a", now.Add(-time.Hour)), deadRec(names.DLQ, 0, "b", now.Add(-30*time.Minute)),
		deadRec(names.DLQ, 1, "c", now.Add(-20*time.Minute)))
	aborted(deadRec(names.DLQ, 2, "aborted", now.Add(-2*time.Hour)))
	resolve(0, 0)
	resolve(1, 0)
	produce(&kgo.Record{Topic: names.DLQStatus, Key: []byte("1:0"), Value: nil})

	tallies := make(chan Tally, 100)
	done := make(chan error, 1)
	go func() { done <- s.Track(ctx, 100*time.Millisecond, func(tl Tally) { tallies <- tl }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Track: %v", err)
		}
	}()
	// waitFor returns the first tally that satisfies ok within 10 s.
	waitFor := func(what string, ok func(Tally) bool) Tally {
		t.Helper()
		deadline := time.After(10 * time.Second)
		var last Tally
		for {
			select {
			case tl := <-tallies:
				if ok(tl) {
					return tl
				}
				last = tl
			case <-deadline:
				t.Fatalf("no tally with %s; last %+v", what, last)
			}
		}
	}
	first := waitFor("any", func(Tally) bool { return true })
	es, err := s.List(ctx, Filter{}, false)
	if err != nil {
		t.Fatal(err)
	}
	st := Summarise(es, now)
	if first.Entries != 3 || first.Unresolved != 2 || st.Total != 3 || st.Unresolved != 2 {
		t.Fatalf("first tally %+v, stats total %d unresolved %d; want 3 entries, 2 unresolved", first, st.Total, st.Unresolved)
	}
	if !first.OldestUnresolved.Equal(now.Add(-30*time.Minute)) || st.OldestUnresolved.Ref != "0:1" {
		t.Fatalf("oldest unresolved %s (stats: %+v), want b's time %s", first.OldestUnresolved, st.OldestUnresolved, now.Add(-30*time.Minute))
	}

	// Growth and resolutions are followed.
	produce(deadRec(names.DLQ, 2, "d", now.Add(-time.Minute)), deadRec(names.DLQ, 2, "e", now))
	resolve(0, 1)
	tl := waitFor("5 entries, 3 unresolved", func(tl Tally) bool { return tl.Entries == 5 && tl.Unresolved == 3 })
	if !tl.OldestUnresolved.Equal(now.Add(-20 * time.Minute)) {
		t.Fatalf("after resolving 0:1 the oldest unresolved is %s, want c's %s", tl.OldestUnresolved, now.Add(-20*time.Minute))
	}
	resolve(1, 0)
	resolve(2, 2) // the aborted write took 2:0 and its marker 2:1: d is 2:2
	tl = waitFor("1 unresolved", func(tl Tally) bool { return tl.Unresolved == 1 })
	if !tl.OldestUnresolved.Equal(now) {
		t.Fatalf("oldest unresolved %s, want e's %s", tl.OldestUnresolved, now)
	}

	// Retention: records before offset 1 of partition 0 are gone.
	adm := kadm.NewClient(cl)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: names.DLQ, Partition: 0, At: 1})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	waitFor("4 entries after retention", func(tl Tally) bool { return tl.Entries == 4 && tl.Unresolved == 1 })

	// Nothing unresolved: no oldest.
	resolve(2, 3)
	tl = waitFor("0 unresolved", func(tl Tally) bool { return tl.Unresolved == 0 })
	if !tl.OldestUnresolved.IsZero() {
		t.Fatalf("oldest unresolved %s with nothing unresolved", tl.OldestUnresolved)
	}
	if len(*warnings) > 0 {
		t.Fatalf("warnings: %s", strings.Join(*warnings, "; "))
	}
}
