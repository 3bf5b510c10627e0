// Package gcpace paces the garbage collector of a service whose live heap
// is small and whose allocation rate is high: ingest keeps a few MB live
// but allocates every request's body, record and answer, so with Go's
// default (a collection each time the heap doubles) it collected a dozen
// times a second under load, each collection's fixed cost (stacks, roots,
// its start and end) paid again and again (docs/performance.md, The
// collector's pace).
//
// Start keeps the collector's heap goal at a floor: a collection comes when
// the heap reaches the floor, or twice the live heap once that is more
// (Go's default). After every collection it reads the live heap and sets
// the collector's percentage (GOGC) to what makes the next goal the
// floor, never under Go's default 100. A memory limit (GOMEMLIMIT) still
// applies: the runtime collects earlier to stay under it.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultPercent is Go's own percentage, the least Start sets: the goal of
// a large live heap is what it would be without the floor.
const DefaultPercent = 100

// heapMinimum is the runtime's least heap goal at Go's default percentage
// (defaultHeapMinimum in runtime/mgcpacer.go, 4 MB): the runtime scales it
// by the percentage, so a percentage over floor/heapMinimum × 100 would
// make the least goal more than the floor.
const heapMinimum = 4 << 20

// liveHeap is the runtime/metrics name of the heap the last collection
// found live.
const liveHeap = "/gc/heap/live:bytes"

// Percent is the percentage that makes the collector's next goal floor for
// a live heap of live bytes (goal = live × (1 + percent/100)): at least
// DefaultPercent (once twice live reaches the floor), and at most what
// keeps the runtime's scaled least goal at the floor (a live heap too
// small to matter: none yet, a service just started).
func Percent(floor, live uint64) int {
	if floor <= 2*live {
		return DefaultPercent
	}
	most := max(floor*100/heapMinimum, DefaultPercent)
	if live == 0 {
		return int(most)
	}
	return int(min((floor-live)*100/live, most))
}

// running is set while a pacer runs: the percentage is the process's, so
// at most one pacer sets it.
var running atomic.Bool

type pacer struct {
	floor   uint64
	sample  []metrics.Sample
	mu      sync.Mutex // percent; the finalizer goroutine and stop
	percent int
	stopped bool
}

// mark is allocated after each collection for the next one to find
// unreachable: its finalizer runs once a collection ended. It holds a
// pointer, so it is never one of the runtime's tiny allocations (whose
// finalizers may not run).
type mark struct{ p *pacer }

// Start paces the collector to floor bytes until stop is called, which
// puts back the percentage it found. With floor 0, or while another pacer
// runs, it does nothing. The operator's GOGC wins: a caller passes 0 when
// GOGC is set in the environment.
func Start(floor uint64) (stop func()) {
	if floor == 0 || !running.CompareAndSwap(false, true) {
		return func() {}
	}
	p := &pacer{floor: floor, sample: []metrics.Sample{{Name: liveHeap}}}
	p.mu.Lock()
	before := p.adjust() // p.percent is 0, which no call sets: it sets one
	p.mu.Unlock()
	p.arm()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.stopped = true
			debug.SetGCPercent(before)
			p.mu.Unlock()
			running.Store(false)
		})
	}
}

// arm allocates the mark the next collection finds.
func (p *pacer) arm() {
	runtime.SetFinalizer(&mark{p: p}, (*mark).collected)
}

// collected runs on the finalizer goroutine after a collection: it sets
// the percentage for the live heap that collection found, and arms the
// next mark.
func (m *mark) collected() {
	p := m.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.adjust()
	p.arm()
}

// adjust sets the percentage for the live heap the last collection found
// when it differs from the one set last, and returns the percentage it
// replaced (p.percent when it changed nothing). p.mu held.
func (p *pacer) adjust() (was int) {
	metrics.Read(p.sample)
	var live uint64
	if p.sample[0].Value.Kind() == metrics.KindUint64 {
		live = p.sample[0].Value.Uint64()
	}
	pct := Percent(p.floor, live)
	if pct == p.percent {
		return p.percent
	}
	was, p.percent = debug.SetGCPercent(pct), pct
	return was
}
