package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/schemas"
)

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Ref
		ok   bool
	}{
		{"0:0", Ref{0, 0}, true},
		{"11:1187", Ref{11, 1187}, true},
		{"2147483647:9223372036854775807", Ref{2147483647, 9223372036854775807}, true},
		{"2147483648:0", Ref{}, false},
		{"01:2", Ref{}, false},
		{"1:02", Ref{}, false},
		{"-1:2", Ref{}, false},
		{"1:+2", Ref{}, false},
		{"1:", Ref{}, false},
		{":1", Ref{}, false},
		{"1", Ref{}, false},
		{"dlq:1:2", Ref{}, false},
		{"1:2:3", Ref{}, false},
		{" 1:2", Ref{}, false},
	} {
		got, err := ParseRef(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseRef(%q) = %v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadRef) {
			t.Errorf("ParseRef(%q) error %v does not wrap ErrBadRef", tc.in, err)
		}
		if err == nil && (got.String() != tc.in || got.ReplayID() != "dlq:"+tc.in) {
			t.Errorf("Ref %v prints as %q, %q", got, got.String(), got.ReplayID())
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"90m", now.Add(-90 * time.Minute)},
		{"36h", now.Add(-36 * time.Hour)},
		{"7d", now.Add(-7 * 24 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"2026-03-01", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{"2026-03-01T10:30", time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)},
		{"2026-03-01T10:30:00+02:00", time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)},
		{"2026-03-01T10:30:00.250Z", time.Date(2026, 3, 1, 10, 30, 0, 250e6, time.UTC)},
	} {
		got, err := ParseSince(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5m", "0s", "d", "5x", "2026-13-01", "7d-1h"} {
		if _, err := ParseSince(bad, now); err == nil {
			t.Errorf("ParseSince(%q) accepted", bad)
		}
	}
}

func TestResolutionFitsSchema(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC)
	for _, res := range []string{Replayed, Ignored, ManualFix} {
		r, err := NewResolution(Ref{4, 1187}, res, "a note", "alice", at)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		if err := schemas.Validate(schemas.DLQStatus, b); err != nil {
			t.Errorf("%s: %v\n%s", res, err, b)
		}
		var back Resolution
		if err := json.Unmarshal(b, &back); err != nil || back.At != at.Truncate(time.Millisecond) || back.ReplayID != r.ReplayID {
			t.Errorf("round trip of %s: %+v %v", b, back, err)
		}
	}
	if _, err := NewResolution(Ref{1, 1}, "deleted", "", "alice", at); err == nil {
		t.Error("unknown resolution accepted")
	}
	if _, err := NewResolution(Ref{1, 1}, Ignored, "", "  ", at); err == nil {
		t.Error("empty by accepted")
	}
}

func entryAt(p int32, o int64, provider, reason string, at time.Time, res *Resolution) *Entry {
	r := &kgo.Record{Partition: p, Offset: o, Key: []byte(provider + ":k"), Timestamp: at}
	headers.Set(r, headers.Provider, provider)
	headers.Set(r, headers.DeadReason, reason)
	return &Entry{Ref: Ref{p, o}, Record: r, Resolution: res}
}

func TestFilterSortAndSummarise(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	ign := &Resolution{Resolution: Ignored}
	es := []*Entry{
		entryAt(0, 5, "stripe", headers.DeadPermanent, now.Add(-3*time.Hour), nil),
		entryAt(1, 2, "github", headers.DeadExhausted, now.Add(-time.Hour), ign),
		entryAt(2, 9, "stripe", headers.DeadExhausted, now.Add(-time.Hour), nil),
		entryAt(0, 6, "stripe", "", now.Add(-2*time.Hour), nil),
	}
	SortNewestFirst(es)
	var order []string
	for _, e := range es {
		order = append(order, e.Ref.String())
	}
	if strings.Join(order, " ") != "2:9 1:2 0:6 0:5" {
		t.Fatalf("newest first: %v", order)
	}
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{}, 4},
		{Filter{Provider: "stripe"}, 3},
		{Filter{Reason: headers.DeadExhausted}, 2},
		{Filter{Unresolved: true}, 3},
		{Filter{Since: now.Add(-90 * time.Minute)}, 2},
		{Filter{Key: "github:k"}, 1},
		{Filter{Provider: "stripe", Reason: headers.DeadExhausted, Unresolved: true}, 1},
	} {
		n := 0
		for _, e := range es {
			if tc.f.Match(e) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("%+v matches %d, want %d", tc.f, n, tc.want)
		}
	}
	st := Summarise(es, now)
	if st.Total != 4 || st.Unresolved != 3 || st.Resolved != 1 || st.ByResolution[Ignored] != 1 ||
		st.ByProvider["stripe"] != (Count{3, 3}) || st.ByProvider["github"] != (Count{1, 0}) || st.ByReason["(none)"] != (Count{1, 1}) {
		t.Fatalf("stats %+v", st)
	}
	if st.Oldest.Ref != "0:5" || st.Oldest.AgeSeconds != 3*3600 || st.OldestUnresolved.Ref != "0:5" {
		t.Fatalf("oldest %+v / %+v", st.Oldest, st.OldestUnresolved)
	}
	if empty := Summarise(nil, now); empty.Oldest != nil || empty.Total != 0 {
		t.Fatalf("empty stats %+v", empty)
	}
}

// fakeStore is a Store over a kfake cluster with the DLQ topics, and a
// client that produces to the partition each record names.
func fakeStore(t *testing.T) (*Store, *kgo.Client, []string, topics.Names, *[]string) {
	t.Helper()
	names := topics.NewNames("", nil)
	addrs := kafkatest.Fake(t, kfake.SeedTopics(3, names.DLQ, names.DLQStatus))
	newClient := kafkatest.NewClient(addrs)
	cl := kafkatest.Client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var warnings []string
	s := New(Config{Names: names, NewClient: newClient, Client: cl, Stall: 3 * time.Second, Warn: func(w string) { warnings = append(warnings, w) }})
	return s, cl, addrs, names, &warnings
}

func deadRec(topic string, p int32, key string, at time.Time) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(`{"id":"` + key + `"}`), Timestamp: at}
	headers.Set(r, headers.Provider, "stripe")
	headers.Set(r, headers.DeadReason, headers.DeadPermanent)
	return r
}

// TestScanWithTransactions: the bounded scan reads what is committed, skips
// aborted writes, passes a transaction marker at the end of a partition
// without waiting, and attaches the latest resolution of each ref.
func TestScanWithTransactions(t *testing.T) {
	s, cl, addrs, names, warnings := fakeStore(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	produce := func(cl *kgo.Client, rs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txn := kafkatest.Client(t, addrs, kgo.TransactionalID("t1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inTxn := func(commit kgo.TransactionEndTry, r *kgo.Record) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(txn, r)
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	// Partition 0: a@0 b@1, plain. Partition 1: c@0 committed, marker@1,
	// an aborted write @2 and its marker @3 at the end. Partition 2: d@0
	// committed, marker@1, late@2 plain.
	produce(cl, deadRec(names.DLQ, 0, "a", now.Add(-3*time.Minute)), deadRec(names.DLQ, 0, "b", now.Add(-2*time.Minute)))
	inTxn(kgo.TryCommit, deadRec(names.DLQ, 1, "c", now.Add(-time.Minute)))
	inTxn(kgo.TryAbort, deadRec(names.DLQ, 1, "aborted", now))
	inTxn(kgo.TryCommit, deadRec(names.DLQ, 2, "d", now.Add(-90*time.Second)))
	produce(cl, deadRec(names.DLQ, 2, "late", now))
	rs, _ := NewResolution(Ref{0, 0}, Ignored, "old", "bob", now)
	rs2, _ := NewResolution(Ref{0, 0}, ManualFix, "new", "bob", now.Add(time.Second))
	for _, r := range []Resolution{rs, rs2} {
		if err := s.Resolve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	es, err := s.List(ctx, Filter{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("List took %s: it waited at a transaction marker", took)
	}
	var keys []string
	for _, e := range es {
		keys = append(keys, e.Key())
		if e.Record.Value != nil || e.BodyBytes == 0 {
			t.Errorf("%s: body kept (%q) or not counted (%d)", e.Ref, e.Record.Value, e.BodyBytes)
		}
	}
	if strings.Join(keys, " ") != "late c d b a" {
		t.Fatalf("listed %v, want late c d b a (newest first, no aborted write)", keys)
	}
	if len(*warnings) > 0 {
		t.Fatalf("warnings: %v", *warnings)
	}
	e, err := s.Get(ctx, Ref{0, 0})
	if err != nil || e.Key() != "a" || string(e.Record.Value) != `{"id":"a"}` || e.Resolution == nil || e.Resolution.Resolution != ManualFix {
		t.Fatalf("Get(0:0) = %+v, %v", e, err)
	}
	unres, err := s.List(ctx, Filter{Unresolved: true}, true)
	if err != nil || len(unres) != 4 || unres[0].Record.Value == nil {
		t.Fatalf("unresolved: %d entries, %v", len(unres), err)
	}
	// What is not a committed DLQ record is not found.
	for _, ref := range []Ref{{1, 1}, {1, 2}, {1, 3}, {2, 1}, {0, 99}, {7, 0}} {
		if _, err := s.Get(ctx, ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) = %v, want ErrNotFound", ref, err)
		}
	}
	sel, err := s.Select(ctx, Selection{Refs: []Ref{{1, 0}, {0, 1}, {0, 1}}})
	if err != nil || len(sel) != 2 || sel[0].Ref != (Ref{0, 1}) {
		t.Fatalf("Select refs: %v %v", sel, err)
	}
	if _, err := s.Select(ctx, Selection{Refs: []Ref{{0, 1}, {0, 50}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Select with a missing ref: %v", err)
	}
	sel, err = s.Select(ctx, Selection{Filter: Filter{Provider: "stripe"}})
	if err != nil || len(sel) != 4 || sel[0].Ref != (Ref{0, 1}) || sel[3].Ref != (Ref{2, 2}) {
		t.Fatalf("Select unresolved stripe entries: %v %v", sel, err)
	}
}

func TestMissingTopic(t *testing.T) {
	names := topics.NewNames("nothing.", nil)
	addrs := kafkatest.Fake(t)
	cl := kafkatest.Client(t, addrs)
	s := New(Config{Names: names, NewClient: kafkatest.NewClient(addrs), Client: cl})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.List(ctx, Filter{}, false); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("List on a missing topic: %v, want ErrNoTopic", err)
	}
}

// TestScanStall: a partition that never shows its last offset (here an end
// past what it holds, as when the last writes before the stable offset
// were aborted) ends the scan after the stall time, with a warning naming
// it, and what was read is kept.
func TestScanStall(t *testing.T) {
	s, cl, _, names, warnings := fakeStore(t)
	s.stall = 300 * time.Millisecond
	now := time.Now()
	if err := cl.ProduceSync(t.Context(), deadRec(names.DLQ, 1, "a", now), deadRec(names.DLQ, 1, "b", now)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	start := time.Now()
	err := s.scan(t.Context(), names.DLQ, map[int32]span{1: {start: 0, end: 5}}, func(r *kgo.Record) { got = append(got, string(r.Key)) })
	if err != nil || strings.Join(got, " ") != "a b" {
		t.Fatalf("scan read %v, %v", got, err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("scan took %s to give up", took)
	}
	if len(*warnings) != 1 || !strings.Contains((*warnings)[0], "partitions 1 (read up to offset 2 of 5)") {
		t.Fatalf("warnings %v", *warnings)
	}
}
