// Package admission decides which records the processor may hold and
// call: the process-wide bound on the records read and not yet committed
// or dropped (HOOKLINE_MAX_PENDING, HOOKLINE_MAX_PENDING_BYTES; Budget),
// with providers of several priority classes a weighted max-min fair share
// of it per class (docs/processor.md, priority), and each destination's
// lane: its slots, its queue limit and the reasons a record is parked
// before any call (Lane). The processor asks the lanes' admission through
// one interface, Admitter. It knows records only by class and size: no
// Kafka, no I/O.
//
// Each destination's calls in flight are bounded by its slots, or by its
// adaptive limit below them (Limiter, Lane.SetLimit).
//
// Lock order: Budget.mu, a Lane's mu and a Limiter's mu are each taken
// last by their callers and call out of nothing; a Lane's counters are
// atomics.
package admission

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/providers"
)

// classWeight is each priority class's weight when classes compete for the
// budget: under overload critical gets eight times low's share.
var classWeight = [providers.NumPriorities]int64{
	providers.PriorityLow:      1,
	providers.PriorityNormal:   2,
	providers.PriorityHigh:     4,
	providers.PriorityCritical: 8,
}

// classHeadroom is what a class may hold beyond twice what it holds now
// before it competes by weight: a class that holds little is never held
// back, and one that grows may double at each step.
const classHeadroom = 16

// SpanPerRecord bounds the offsets a partition window may hold above its
// committed offset, as a multiple of MaxPending over all windows: a record
// in flight for minutes keeps its window's base while later records
// finish above it. The bound keeps the windows and what a new owner reads
// again after a crash in proportion (finished offsets past the commit
// metadata's room are read again and skipped as duplicates).
const SpanPerRecord = 16

// Budget is the process-wide bound on the records read and not yet
// committed or dropped (MaxPending, MaxPendingBytes), counted per priority
// class.
//
// With providers of one class the reader stops while the budget is spent,
// as backpressure. With several classes a stopped reader would hold a
// critical record behind a low class's backlog, since every class shares
// every raw partition. So the reader reads on, up to twice the budget, and
// a record is *admitted* (let wait for a slot and call its destination)
// only while its class has fewer admitted records than its share: a raw
// record that is not is parked in its lane at once (a produce, gone at the
// next commit), and a lane record waits in the reader. A class's share is
// weighted max-min fair: each class with admitted records asks for twice
// what it has plus classHeadroom; the budget is divided by classWeight
// among the classes asking, and what a class does not ask for goes to the
// others. A class alone may use the whole budget; a low class under a
// critical flood keeps its weighted share, so it still moves.
type Budget struct {
	records int64 // MaxPending
	bytes   int64 // MaxPendingBytes
	classes bool  // providers of more than one class
	gauge   [providers.NumPriorities]prometheus.Gauge

	mu       sync.Mutex
	held     [providers.NumPriorities]int64 // read, not yet committed or dropped
	admitted [providers.NumPriorities]int64 // of those, admitted (classes only)
	body     int64                          // body bytes held
}

// New returns a budget of records and bytes; classes says the providers
// are of more than one priority class (then classes compete for
// admission). pending gets each class's records held, by its label.
func New(records, bytes int64, classes bool, pending *prometheus.GaugeVec) *Budget {
	b := &Budget{records: records, bytes: bytes, classes: classes}
	for c := range b.gauge {
		b.gauge[c] = pending.WithLabelValues(providers.Priority(c).String())
	}
	return b
}

// Classes reports whether classes compete for admission.
func (b *Budget) Classes() bool { return b.classes }

// Hold counts a record read.
func (b *Budget) Hold(c providers.Priority, size int) {
	b.mu.Lock()
	b.held[c]++
	b.body += int64(size)
	n := b.held[c]
	b.mu.Unlock()
	b.gauge[c].Set(float64(n))
}

// Admit admits a held record of class c if c has room for it (always with
// one class).
func (b *Budget) Admit(c providers.Priority) bool {
	if !b.classes {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.admitLocked(c)
}

func (b *Budget) admitLocked(c providers.Priority) bool {
	b.admitted[c]++
	if b.admitted[c] > b.shares()[c] {
		b.admitted[c]--
		return false
	}
	return true
}

// HoldAdmitted holds and admits a lane record of class c if c has room
// for it.
func (b *Budget) HoldAdmitted(c providers.Priority, size int) bool {
	b.mu.Lock()
	if !b.admitLocked(c) {
		b.mu.Unlock()
		return false
	}
	b.held[c]++
	b.body += int64(size)
	n := b.held[c]
	b.mu.Unlock()
	b.gauge[c].Set(float64(n))
	return true
}

// Release counts a record committed or dropped.
func (b *Budget) Release(c providers.Priority, size int, admitted bool) {
	b.mu.Lock()
	b.held[c]--
	if admitted && b.classes {
		b.admitted[c]--
	}
	b.body -= int64(size)
	n := b.held[c]
	b.mu.Unlock()
	b.gauge[c].Set(float64(n))
}

// Full reports whether the reader must wait: the records or bytes held
// reached their bound (twice MaxPending with several classes), or the
// windows hold SpanPerRecord × MaxPending offsets.
func (b *Budget) Full(span int64) bool {
	limit := b.records
	if b.classes {
		limit *= 2
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var total int64
	for _, n := range b.held {
		total += n
	}
	return total >= limit || b.body >= b.bytes || span >= SpanPerRecord*b.records
}

// Held is the records held now, every class: read and not yet committed
// or dropped.
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var total int64
	for _, n := range b.held {
		total += n
	}
	return total
}

// Room reports whether class c could admit one more record now (always
// with one class): its lanes are read only while it could.
func (b *Budget) Room(c providers.Priority) bool {
	if !b.classes {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.admitted[c]++
	ok := b.admitted[c] <= b.shares()[c]
	b.admitted[c]--
	return ok
}

// shares divides the budget among the classes with admitted records
// (weighted max-min fairness, see Budget). b.mu is held.
func (b *Budget) shares() [providers.NumPriorities]int64 {
	var share, ask [providers.NumPriorities]int64
	var asking [providers.NumPriorities]bool
	for c, n := range b.admitted {
		if n > 0 {
			ask[c], asking[c] = 2*n+classHeadroom, true
		}
	}
	left := b.records
	for {
		var weights int64
		for c := range asking {
			if asking[c] {
				weights += classWeight[c]
			}
		}
		if weights == 0 {
			return share
		}
		settled := false
		for c := range asking {
			if asking[c] && ask[c]*weights <= left*classWeight[c] {
				share[c], asking[c], settled = ask[c], false, true
				left -= ask[c]
			}
		}
		if !settled {
			for c := range asking {
				if asking[c] {
					share[c] = left * classWeight[c] / weights
				}
			}
			return share
		}
	}
}
