// Package offsets is the processor's bookkeeping of the offsets it reads
// (docs/processor.md): per partition and topic a Window between the
// committed offset and the next to read, which finishes out of order,
// commits its low-water mark, and names the finished offsets above it in
// the commit's metadata. Pure: no Kafka, no clock, no locks.
package offsets

import (
	"strconv"
	"strings"
)

// Slot is what the processor knows about one offset of a partition it
// reads: a raw partition, or the same-numbered partition of a lane.
type Slot uint8

const (
	Unknown  Slot = iota // not read yet
	Running              // read, its effect not yet in a transaction
	InTxn                // its effect is in the transaction being ended
	Finished             // committed, or an offset that holds no record (a marker, an aborted record)
)

// Window tracks the offsets of one partition it reads (raw or a lane: an
// owned partition has one window per topic) between its committed
// offset and the next offset to read. Records finish out of order (a slow
// destination call stays in flight while later records commit), so the
// offset committed for the partition is its low-water mark, the lowest
// offset not finished, and the finished offsets above it travel in the
// commit's metadata (EncodeDone) so that a new owner skips them instead of
// running them again.
//
// A Window is not safe for concurrent use: its owner serializes the calls
// (consume's ownership lock).
type Window struct {
	base  int64  // every offset below base is finished and committed
	next  int64  // the next offset expected from the fetch
	slots []Slot // slots[i] is offset base+i
	// sent is the offset and metadata of the last commit, so an unchanged
	// partition is left out of the next one.
	sent     int64
	sentMeta string
}

// Base is the window's committed offset: every offset below it is finished
// and committed.
func (w *Window) Base() int64 { return w.base }

// Sent is the offset and metadata of the last commit (at New: the ones the
// window started from), so an unchanged partition is left out of the next
// commit.
func (w *Window) Sent() (offset int64, meta string) { return w.sent, w.sentMeta }

// New starts a window at a committed offset and the metadata
// committed with it (done offsets above it; unreadable metadata counts as
// none, which is safe: the dedup state then turns a re-read into a skip).
func New(committed int64, meta string) *Window {
	w := &Window{base: committed, next: committed, sent: committed, sentMeta: meta}
	for _, r := range DecodeDone(meta) {
		for o := r.From; o < r.To; o++ {
			w.set(committed+o, Finished)
		}
	}
	return w
}

func (w *Window) set(offset int64, s Slot) {
	i := int(offset - w.base)
	for len(w.slots) <= i {
		w.slots = append(w.slots, Unknown)
	}
	w.slots[i] = s
}

func (w *Window) get(offset int64) Slot {
	i := offset - w.base
	if i < 0 {
		return Finished
	}
	if i >= int64(len(w.slots)) {
		return Unknown
	}
	return w.slots[i]
}

// Accept takes the record read at offset. It returns false when the record
// is not to be run: read before (a fetch rewound by the session), or
// finished before this owner took the partition (committed metadata).
// Offsets skipped between reads hold no record and are finished.
func (w *Window) Accept(offset int64) bool {
	if offset < w.next {
		return false
	}
	for o := w.next; o < offset; o++ {
		if w.get(o) == Unknown {
			w.set(o, Finished)
		}
	}
	w.next = offset + 1
	if w.get(offset) == Finished {
		return false
	}
	w.set(offset, Running)
	return true
}

// Unread takes back the last record accepted, at offset, as if it had
// not been read: the fetch is rewound to it and the next Accept of offset
// runs it again (a trial call that failed leaves its record at the head of
// its lane). False, and nothing changed, when offset is not the last
// accepted or is no longer running.
func (w *Window) Unread(offset int64) bool {
	if offset != w.next-1 || w.get(offset) != Running {
		return false
	}
	w.set(offset, Unknown)
	w.next = offset
	return true
}

// Span is how many offsets the window holds above the committed offset
// (bounded process-wide by consume's budget).
func (w *Window) Span() int64 { return w.next - w.base }

// CommitPoint is the offset to commit (the lowest offset not finished and
// not in the transaction, never beyond next) and the metadata naming the
// finished offsets above it.
func (w *Window) CommitPoint() (int64, string) {
	lwm := w.base
	for lwm < w.next {
		if s := w.get(lwm); s != Finished && s != InTxn {
			break
		}
		lwm++
	}
	var runs []Run
	in := false
	for o := lwm; o < w.base+int64(len(w.slots)); o++ {
		s := w.get(o)
		done := s == Finished || s == InTxn
		if o >= w.next && s != Finished {
			done = false
		}
		switch {
		case done && !in:
			runs = append(runs, Run{From: o - lwm, To: o - lwm + 1})
			in = true
		case done:
			runs[len(runs)-1].To++
		default:
			in = false
		}
	}
	return lwm, EncodeDone(runs)
}

// Committed marks the transaction's offsets finished, records what was
// sent, and drops the finished prefix.
func (w *Window) Committed(offsets []int64, sent int64, meta string) {
	for _, o := range offsets {
		if w.get(o) == InTxn {
			w.set(o, Finished)
		}
	}
	w.sent, w.sentMeta = sent, meta
	k := 0
	for k < len(w.slots) && w.base+int64(k) < w.next && w.slots[k] == Finished {
		k++
	}
	w.base += int64(k)
	w.slots = w.slots[k:]
	if len(w.slots) == 0 {
		w.slots = nil
	} else if cap(w.slots) > 1024 && len(w.slots) < cap(w.slots)/4 {
		w.slots = append([]Slot(nil), w.slots...)
	}
}

// Mark sets offsets to s (a transaction begins: InTxn; it aborted:
// Running).
func (w *Window) Mark(offsets []int64, s Slot) {
	for _, o := range offsets {
		if o >= w.base {
			w.set(o, s)
		}
	}
}

// Run is a range [from, to) of offsets relative to a committed offset.
type Run struct{ From, To int64 }

// MetaPrefix marks hookline's commit metadata; anything else (an older
// processor's member id) reads as no finished offsets.
const MetaPrefix = "hl1:"

// MaxMeta keeps the metadata under the broker's offset.metadata.max.bytes
// (4096 by default). Finished offsets past it are left out: after a crash
// they are read again, and the dedup state makes each a skip (a second
// duplicate outcome, never a second destination call).
const MaxMeta = 3000

// EncodeDone writes runs as alternating gap and length in base 36:
// "hl1:<gap>.<len>.<gap>.<len>...", each gap counted from the end of the
// previous run.
func EncodeDone(runs []Run) string {
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(MetaPrefix)
	var end int64
	for i, r := range runs {
		part := strconv.FormatInt(r.From-end, 36) + "." + strconv.FormatInt(r.To-r.From, 36)
		if b.Len()+len(part)+1 > MaxMeta {
			break
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
		end = r.To
	}
	return b.String()
}

// DecodeDone reads EncodeDone's form; anything unreadable is no runs.
func DecodeDone(meta string) []Run {
	rest, ok := strings.CutPrefix(meta, MetaPrefix)
	if !ok || rest == "" {
		return nil
	}
	fields := strings.Split(rest, ".")
	if len(fields)%2 != 0 {
		return nil
	}
	var runs []Run
	var end int64
	for i := 0; i < len(fields); i += 2 {
		gap, err1 := strconv.ParseInt(fields[i], 36, 64)
		n, err2 := strconv.ParseInt(fields[i+1], 36, 64)
		if err1 != nil || err2 != nil || gap < 0 || n <= 0 || n > 1<<24 {
			return nil
		}
		r := Run{From: end + gap, To: end + gap + n}
		runs = append(runs, r)
		end = r.To
	}
	return runs
}
