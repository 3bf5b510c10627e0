// Package runners runs functions on goroutines that are kept, not started
// anew, so that a goroutine whose work goes deep keeps the stack it grew.
//
// The processor runs each chain of records on its own goroutine (consume,
// session.queue), and a chain's run goes deep: the admission chain, the
// decision, the destination's HTTP client. A new goroutine starts on a small
// stack and grows it by copying as the run goes deeper, twice a record at
// 3,200 events/s: 6 % of the processor's CPU in a pprof profile of bench-e2e's
// half load (docs/performance.md, issue 36). A Pool's goroutine that finished
// its function waits for the next one instead of exiting, with the stack it
// has. The garbage collector still halves the stack of a goroutine that uses
// little of it, so a runner idle for a while grows once more, not every time.
//
// A burst of records wider than the idle runners still starts goroutines:
// a backlog's fetch hands thousands at once. So a new runner first grows
// its stack to stackBytes, while it has one frame to copy, instead of
// doubling it twice or three times deep in its first run, copying every
// frame above (franz-go's request and response workers do the same). In
// pprof profiles of bench-processor's fan-out, stack growth fell from
// 11.4-15.9 % of the processor's CPU to 5.5-8.6 %, all of it in grow
// (docs/performance.md, "A new runner's stack"). A reused runner does not
// grow again: at 1,000 events/s no runner's stack grew in a profile, and
// clearing grow's frame before each function cost more than that (0.4 %
// of the CPU).
package runners

import (
	"sync"
	"sync/atomic"
)

// Pool hands functions to idle runners, or to a new goroutine when none is
// idle. At most maxIdle runners wait; a runner finding that many waiting
// exits. Idle runners cost nothing but their stacks: they wait on a channel,
// with no timer.
type Pool struct {
	next    chan func()
	stop    chan struct{}
	once    sync.Once
	maxIdle int32
	idle    atomic.Int32 // runners waiting, or on their way to wait
	started atomic.Int64 // goroutines started (the tests read it)
}

// New returns a Pool keeping at most maxIdle idle runners (at least 1).
func New(maxIdle int) *Pool {
	return &Pool{next: make(chan func()), stop: make(chan struct{}), maxIdle: int32(max(maxIdle, 1))}
}

// Go runs f on an idle runner, or on a new goroutine if none is waiting.
// It does not wait for f. After Close, f runs on a new goroutine that then
// exits.
func (p *Pool) Go(f func()) {
	for {
		n := p.idle.Load()
		if n == 0 {
			break
		}
		if p.idle.CompareAndSwap(n, n-1) {
			// A runner counted idle is at, or on its way to, the receive.
			select {
			case p.next <- f:
				return
			case <-p.stop:
			}
			break
		}
	}
	p.started.Add(1)
	go p.run(f)
}

// run runs f, then the functions handed to it while it waits, until the
// Pool is closed or maxIdle others are waiting.
func (p *Pool) run(f func()) {
	grow()
	for {
		f()
		if !p.wait() {
			return
		}
		select {
		case f = <-p.next:
		case <-p.stop:
			return
		}
	}
}

// wait counts the runner idle unless maxIdle are; the one who hands it a
// function takes it off the count.
func (p *Pool) wait() bool {
	for {
		n := p.idle.Load()
		if n >= p.maxIdle {
			return false
		}
		if p.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Close makes the idle runners exit, and the busy ones once their function
// returns. Functions already handed over still run to the end.
func (p *Pool) Close() { p.once.Do(func() { close(p.stop) }) }

// stackBytes is the stack a new runner has when its first function
// starts: in the fan-out's profile, a chain's run (the decision, the state
// store's read, the records of three topic routes) grew no stack past it.
const stackBytes = 16 << 10

// grow makes the calling goroutine's stack at least stackBytes: its frame
// of growFrame bytes does not fit in a stack of half that, so the runtime
// doubles a smaller stack up to stackBytes, copying only the few frames
// below grow.
//
//go:noinline
func grow() {
	var frame [growFrame]byte
	keep(frame[:])
}

// growFrame is grow's frame: three quarters of stackBytes, more than half
// of it, with room left for the runner's frames below and the runtime's
// guard.
const growFrame = stackBytes * 3 / 4

// keep stops the compiler from dropping grow's frame.
//
//go:noinline
func keep(b []byte) { b[len(b)-1] = 1 }
