package consume

import (
	"strconv"
	"strings"
)

// slot is what the processor knows about one offset of a partition it
// reads: a raw partition, or the same-numbered partition of a lane.
type slot uint8

const (
	slotUnknown  slot = iota // not read yet
	slotRunning              // read, its effect not yet in a transaction
	slotInTxn                // its effect is in the transaction being ended
	slotFinished             // committed, or an offset that holds no record (a marker, an aborted record)
)

// window tracks the offsets of one partition it reads (raw or a lane: an
// owned partition has one window per topic) between its committed
// offset and the next offset to read. Records finish out of order (a slow
// destination call stays in flight while later records commit), so the
// offset committed for the partition is its low-water mark, the lowest
// offset not finished, and the finished offsets above it travel in the
// commit's metadata (encodeDone) so that a new owner skips them instead of
// running them again.
//
// A window is used by one goroutine at a time (ownership's lock).
type window struct {
	base  int64  // every offset below base is finished and committed
	next  int64  // the next offset expected from the fetch
	slots []slot // slots[i] is offset base+i
	// sent is the offset and metadata of the last commit, so an unchanged
	// partition is left out of the next one.
	sent     int64
	sentMeta string
}

// newWindow starts a window at a committed offset and the metadata
// committed with it (done offsets above it; unreadable metadata counts as
// none, which is safe: the dedup state then turns a re-read into a skip).
func newWindow(committed int64, meta string) *window {
	w := &window{base: committed, next: committed, sent: committed, sentMeta: meta}
	for _, r := range decodeDone(meta) {
		for o := r.from; o < r.to; o++ {
			w.set(committed+o, slotFinished)
		}
	}
	return w
}

func (w *window) set(offset int64, s slot) {
	i := int(offset - w.base)
	for len(w.slots) <= i {
		w.slots = append(w.slots, slotUnknown)
	}
	w.slots[i] = s
}

func (w *window) get(offset int64) slot {
	i := offset - w.base
	if i < 0 {
		return slotFinished
	}
	if i >= int64(len(w.slots)) {
		return slotUnknown
	}
	return w.slots[i]
}

// accept takes the record read at offset. It returns false when the record
// is not to be run: read before (a fetch rewound by the session), or
// finished before this owner took the partition (committed metadata).
// Offsets skipped between reads hold no record and are finished.
func (w *window) accept(offset int64) bool {
	if offset < w.next {
		return false
	}
	for o := w.next; o < offset; o++ {
		if w.get(o) == slotUnknown {
			w.set(o, slotFinished)
		}
	}
	w.next = offset + 1
	if w.get(offset) == slotFinished {
		return false
	}
	w.set(offset, slotRunning)
	return true
}

// span is how many offsets the window holds above the committed offset
// (bounded process-wide, see spanPerRecord).
func (w *window) span() int64 { return w.next - w.base }

// commitPoint is the offset to commit (the lowest offset not finished and
// not in the transaction, never beyond next) and the metadata naming the
// finished offsets above it.
func (w *window) commitPoint() (int64, string) {
	lwm := w.base
	for lwm < w.next {
		if s := w.get(lwm); s != slotFinished && s != slotInTxn {
			break
		}
		lwm++
	}
	var runs []run
	in := false
	for o := lwm; o < w.base+int64(len(w.slots)); o++ {
		s := w.get(o)
		done := s == slotFinished || s == slotInTxn
		if o >= w.next && s != slotFinished {
			done = false
		}
		switch {
		case done && !in:
			runs = append(runs, run{from: o - lwm, to: o - lwm + 1})
			in = true
		case done:
			runs[len(runs)-1].to++
		default:
			in = false
		}
	}
	return lwm, encodeDone(runs)
}

// committed marks the transaction's offsets finished, records what was
// sent, and drops the finished prefix.
func (w *window) committed(offsets []int64, sent int64, meta string) {
	for _, o := range offsets {
		if w.get(o) == slotInTxn {
			w.set(o, slotFinished)
		}
	}
	w.sent, w.sentMeta = sent, meta
	k := 0
	for k < len(w.slots) && w.base+int64(k) < w.next && w.slots[k] == slotFinished {
		k++
	}
	w.base += int64(k)
	w.slots = w.slots[k:]
	if len(w.slots) == 0 {
		w.slots = nil
	} else if cap(w.slots) > 1024 && len(w.slots) < cap(w.slots)/4 {
		w.slots = append([]slot(nil), w.slots...)
	}
}

// mark sets offsets to s (a transaction begins: slotInTxn; it aborted:
// slotRunning).
func (w *window) mark(offsets []int64, s slot) {
	for _, o := range offsets {
		if o >= w.base {
			w.set(o, s)
		}
	}
}

// run is a range [from, to) of offsets relative to a committed offset.
type run struct{ from, to int64 }

// metaPrefix marks hookline's commit metadata; anything else (an older
// processor's member id) reads as no finished offsets.
const metaPrefix = "hl1:"

// maxMeta keeps the metadata under the broker's offset.metadata.max.bytes
// (4096 by default). Finished offsets past it are left out: after a crash
// they are read again, and the dedup state makes each a skip (a second
// duplicate outcome, never a second destination call).
const maxMeta = 3000

// encodeDone writes runs as alternating gap and length in base 36:
// "hl1:<gap>.<len>.<gap>.<len>...", each gap counted from the end of the
// previous run.
func encodeDone(runs []run) string {
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(metaPrefix)
	var end int64
	for i, r := range runs {
		part := strconv.FormatInt(r.from-end, 36) + "." + strconv.FormatInt(r.to-r.from, 36)
		if b.Len()+len(part)+1 > maxMeta {
			break
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
		end = r.to
	}
	return b.String()
}

// decodeDone reads encodeDone's form; anything unreadable is no runs.
func decodeDone(meta string) []run {
	rest, ok := strings.CutPrefix(meta, metaPrefix)
	if !ok || rest == "" {
		return nil
	}
	fields := strings.Split(rest, ".")
	if len(fields)%2 != 0 {
		return nil
	}
	var runs []run
	var end int64
	for i := 0; i < len(fields); i += 2 {
		gap, err1 := strconv.ParseInt(fields[i], 36, 64)
		n, err2 := strconv.ParseInt(fields[i+1], 36, 64)
		if err1 != nil || err2 != nil || gap < 0 || n <= 0 || n > 1<<24 {
			return nil
		}
		r := run{from: end + gap, to: end + gap + n}
		runs = append(runs, r)
		end = r.to
	}
	return runs
}
