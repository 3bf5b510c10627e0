package offsets

import (
	"slices"
	"strings"
	"testing"
)

func TestWindowLowWaterMark(t *testing.T) {
	w := New(100, "")
	for _, o := range []int64{100, 101, 102, 104, 105} { // 103: a marker
		if !w.Accept(o) {
			t.Fatalf("accept(%d) = false", o)
		}
	}
	if w.Accept(101) {
		t.Fatal("a record read again (the session rewound) was accepted twice")
	}
	// 100 is slow; 101, 102 and 105 finish and go into a transaction.
	w.Mark([]int64{101, 102, 105}, InTxn)
	off, meta := w.CommitPoint()
	if off != 100 {
		t.Fatalf("commit offset %d, want 100 (the slow record)", off)
	}
	runs := DecodeDone(meta)
	want := []Run{{1, 4}, {5, 6}} // 101-103 (103 holds no record), 105
	if len(runs) != len(want) || runs[0] != want[0] || runs[1] != want[1] {
		t.Fatalf("metadata %q = %v, want %v", meta, runs, want)
	}
	w.Committed([]int64{101, 102, 105}, off, meta)
	if w.base != 100 || w.Span() != 6 {
		t.Fatalf("after commit: %v, want base 100 holding 6", w)
	}
	// The slow one and 104 finish: everything up to next is committed.
	w.Mark([]int64{100, 104}, InTxn)
	off, meta = w.CommitPoint()
	if off != 106 || meta != "" {
		t.Fatalf("commit point %d %q, want 106 and no metadata", off, meta)
	}
	w.Committed([]int64{100, 104}, off, meta)
	if w.base != 106 || w.Span() != 0 || len(w.slots) != 0 {
		t.Fatalf("after the slow one: %v slots %d, want base 106, empty", w, len(w.slots))
	}
}

func TestWindowAbortKeepsRecordsRunning(t *testing.T) {
	w := New(0, "")
	w.Accept(0)
	w.Accept(1)
	w.Mark([]int64{1}, InTxn)
	w.Mark([]int64{1}, Running) // the transaction aborted
	if off, meta := w.CommitPoint(); off != 0 || meta != "" {
		t.Fatalf("after abort: %d %q, want 0 and nothing finished", off, meta)
	}
}

// A new owner starts from the committed offset and metadata and skips what
// the previous owner finished above it.
func TestWindowSkipsFinishedAfterRestart(t *testing.T) {
	old := New(10, "")
	for o := int64(10); o < 16; o++ {
		old.Accept(o)
	}
	old.Mark([]int64{11, 13, 14}, InTxn)
	off, meta := old.CommitPoint()

	w := New(off, meta)
	var run []int64
	for o := int64(10); o < 17; o++ {
		if w.Accept(o) {
			run = append(run, o)
		}
	}
	if !slices.Equal(run, []int64{10, 12, 15, 16}) {
		t.Fatalf("new owner runs %v, want 10,12,15,16", run)
	}
	if off, meta := w.CommitPoint(); off != 10 || !strings.HasPrefix(meta, MetaPrefix) {
		t.Fatalf("new owner's commit point %d %q: want 10 with the restored offsets", off, meta)
	}
}

func TestDoneMetadataCodec(t *testing.T) {
	for _, bad := range []string{"", "kgo-member-1234", "hl1:", "hl1:1", "hl1:z.-1", "hl1:1.0", "hl1:x!.1"} {
		if runs := DecodeDone(bad); runs != nil {
			t.Errorf("DecodeDone(%q) = %v, want none", bad, runs)
		}
	}
	// Alternating finished and running offsets: the metadata stays under
	// the broker's limit, keeping the lowest runs.
	var runs []Run
	for i := int64(0); i < 5000; i++ {
		runs = append(runs, Run{2*i + 1, 2*i + 2})
	}
	meta := EncodeDone(runs)
	if len(meta) > MaxMeta {
		t.Fatalf("metadata of %d bytes, over %d", len(meta), MaxMeta)
	}
	got := DecodeDone(meta)
	if len(got) < 100 || got[0] != runs[0] || got[len(got)-1] != runs[len(got)-1] {
		t.Fatalf("round trip kept %d runs, first %v", len(got), got[:1])
	}
}

func TestWindowUnread(t *testing.T) {
	w := New(10, "")
	for _, o := range []int64{10, 12} { // 11: a marker
		if !w.Accept(o) {
			t.Fatalf("accept(%d) = false", o)
		}
	}
	if w.Unread(10) {
		t.Fatal("unread 10, which is not the last record accepted")
	}
	if !w.Unread(12) {
		t.Fatal("unread 12, the last record accepted, refused")
	}
	if off, _ := w.CommitPoint(); off != 10 {
		t.Fatalf("commit point %d, want 10 (10 still running)", off)
	}
	w.Mark([]int64{10}, InTxn)
	if off, meta := w.CommitPoint(); off != 12 || meta != "" {
		t.Fatalf("commit point %d %q, want 12: the record taken back is not finished", off, meta)
	}
	if !w.Accept(12) {
		t.Fatal("12 read again after its unread was not accepted")
	}
	if !w.Unread(12) || w.Unread(12) {
		t.Fatal("unread twice")
	}
}
