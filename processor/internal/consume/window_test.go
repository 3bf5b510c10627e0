package consume

import (
	"slices"
	"strings"
	"testing"
)

func TestWindowLowWaterMark(t *testing.T) {
	w := newWindow(100, "")
	for _, o := range []int64{100, 101, 102, 104, 105} { // 103: a marker
		if !w.accept(o) {
			t.Fatalf("accept(%d) = false", o)
		}
	}
	if w.accept(101) {
		t.Fatal("a record read again (the session rewound) was accepted twice")
	}
	// 100 is slow; 101, 102 and 105 finish and go into a transaction.
	w.mark([]int64{101, 102, 105}, slotInTxn)
	off, meta := w.commitPoint()
	if off != 100 {
		t.Fatalf("commit offset %d, want 100 (the slow record)", off)
	}
	runs := decodeDone(meta)
	want := []run{{1, 4}, {5, 6}} // 101-103 (103 holds no record), 105
	if len(runs) != len(want) || runs[0] != want[0] || runs[1] != want[1] {
		t.Fatalf("metadata %q = %v, want %v", meta, runs, want)
	}
	w.committed([]int64{101, 102, 105}, off, meta)
	if w.base != 100 || w.span() != 6 {
		t.Fatalf("after commit: %v, want base 100 holding 6", w)
	}
	// The slow one and 104 finish: everything up to next is committed.
	w.mark([]int64{100, 104}, slotInTxn)
	off, meta = w.commitPoint()
	if off != 106 || meta != "" {
		t.Fatalf("commit point %d %q, want 106 and no metadata", off, meta)
	}
	w.committed([]int64{100, 104}, off, meta)
	if w.base != 106 || w.span() != 0 || len(w.slots) != 0 {
		t.Fatalf("after the slow one: %v slots %d, want base 106, empty", w, len(w.slots))
	}
}

func TestWindowAbortKeepsRecordsRunning(t *testing.T) {
	w := newWindow(0, "")
	w.accept(0)
	w.accept(1)
	w.mark([]int64{1}, slotInTxn)
	w.mark([]int64{1}, slotRunning) // the transaction aborted
	if off, meta := w.commitPoint(); off != 0 || meta != "" {
		t.Fatalf("after abort: %d %q, want 0 and nothing finished", off, meta)
	}
}

// A new owner starts from the committed offset and metadata and skips what
// the previous owner finished above it.
func TestWindowSkipsFinishedAfterRestart(t *testing.T) {
	old := newWindow(10, "")
	for o := int64(10); o < 16; o++ {
		old.accept(o)
	}
	old.mark([]int64{11, 13, 14}, slotInTxn)
	off, meta := old.commitPoint()

	w := newWindow(off, meta)
	var run []int64
	for o := int64(10); o < 17; o++ {
		if w.accept(o) {
			run = append(run, o)
		}
	}
	if !slices.Equal(run, []int64{10, 12, 15, 16}) {
		t.Fatalf("new owner runs %v, want 10,12,15,16", run)
	}
	if off, meta := w.commitPoint(); off != 10 || !strings.HasPrefix(meta, metaPrefix) {
		t.Fatalf("new owner's commit point %d %q: want 10 with the restored offsets", off, meta)
	}
}

func TestDoneMetadataCodec(t *testing.T) {
	for _, bad := range []string{"", "kgo-member-1234", "hl1:", "hl1:1", "hl1:z.-1", "hl1:1.0", "hl1:x!.1"} {
		if runs := decodeDone(bad); runs != nil {
			t.Errorf("decodeDone(%q) = %v, want none", bad, runs)
		}
	}
	// Alternating finished and running offsets: the metadata stays under
	// the broker's limit, keeping the lowest runs.
	var runs []run
	for i := int64(0); i < 5000; i++ {
		runs = append(runs, run{2*i + 1, 2*i + 2})
	}
	meta := encodeDone(runs)
	if len(meta) > maxMeta {
		t.Fatalf("metadata of %d bytes, over %d", len(meta), maxMeta)
	}
	got := decodeDone(meta)
	if len(got) < 100 || got[0] != runs[0] || got[len(got)-1] != runs[len(got)-1] {
		t.Fatalf("round trip kept %d runs, first %v", len(got), got[:1])
	}
}
