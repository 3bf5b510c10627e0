package admission

import (
	"sync"
	"time"
)

// The adaptive concurrency limit of an HTTP destination (docs/processor.md,
// adaptive concurrency): an AIMD limiter as in TCP congestion control.
// Each call's answer is a Signal; the limit grows by one per window of
// calls that succeeded at a steady latency (additive increase), and is cut
// to limitBackoff of itself on an overload answer (429, 503, a timeout, a
// connection error) or a recent latency (an average over about the last
// ten successes) past latencyTolerance times the long-run one (over about
// the last 500), and latencyFloor above it, while the limit is in use
// (multiplicative decrease), at
// most once per window: the calls started before a cut answer on the old limit, so
// their answers do not cut again. Until the first cut the limit doubles
// per window (slow start), from initialLimit.
//
// AIMD rather than a latency gradient: a gradient limiter steers on the
// ratio of the shortest to the current latency, which on a shared machine
// (the processor's own scheduling adds to every call) is noise as often as
// signal; AIMD steers on the receiver's own words (429, 503) and on
// latency only when it doubles, and its sawtooth is bounded and easy to
// state.
const (
	// initialLimit is where a destination's limit starts (at most its
	// max_inflight); slow start doubles it per window.
	initialLimit = 4
	// limitBackoff is the multiplicative decrease: the limit averages
	// about (1+limitBackoff)/2 of a receiver's capacity (0.9), and a small
	// capacity (8) sees about one overload answer per 14 calls, one of 32
	// one per 170 (docs/processor.md).
	limitBackoff = 0.8
	// latencyTolerance: a recent latency this many times the long-run one,
	// and at least latencyFloor above it, counts as overload.
	latencyTolerance = 2.0
	// latencyFloor: a recent latency less than this above the long-run one
	// never counts. A receiver that answers in a millisecond or two
	// doubles its latency with every pause of the processor's own (a
	// collection, a core busy elsewhere, the scheduler): at half load on
	// a quiet machine those cut the limit of a receiver answering at once
	// 20-80 times a second, between 1 and 30 of 64, and records waited for
	// a slot (issue 36, docs/performance.md). A receiver that slows under
	// load by more than this is still cut; one that slows by less is
	// still bounded by max_inflight and cut by its overload answers.
	latencyFloor = 25 * time.Millisecond
	// recentWeight and longWeight are the weights of a success's latency
	// in the recent and the long-run averages (exponentially weighted):
	// about the last 10 and the last 500 successes. One slow call (a pause
	// of the processor itself) does not cut; ten in a row do; a receiver
	// that becomes slower for good moves the long-run average in a few
	// hundred calls and is not cut for ever.
	recentWeight = 0.1
	longWeight   = 0.002
	// minLatencySamples is how many successes the averages need before
	// latency counts at all.
	minLatencySamples = 10
	// HoldRetryAfter is the shortest Retry-After that says a receiver is
	// out for a while rather than busy for a moment: the limit drops to 1
	// and does not grow before the date the receiver named, so the
	// route's other records slow down with the record that was told to
	// wait (one call at a time, the rest park in the lane). A shorter
	// Retry-After is an overload answer like any other.
	HoldRetryAfter = 10 * time.Second
)

// Signal is what one answered call says about the destination's capacity.
type Signal int

const (
	// Neutral says nothing about capacity (a 4xx other than 408 and 429,
	// a 500): no change.
	Neutral Signal = iota
	// Succeeded is a 2xx: the limit may grow if the latency is steady.
	Succeeded
	// Overloaded is a 408, 429 or 503, a timeout or a connection error:
	// the limit is cut.
	Overloaded
)

// Cut is why an answer lowered the limit, if it did.
type Cut int

const (
	// NoCut: the answer did not lower the limit.
	NoCut Cut = iota
	// CutOverload: a 408, 429 or 503, a timeout or a connection error.
	CutOverload
	// CutLatency: the recent latency past latencyTolerance times the
	// long-run one.
	CutLatency
	// CutRetryAfter: a Retry-After of HoldRetryAfter or more (the limit
	// held at 1 until its date).
	CutRetryAfter
)

// Cuts are the causes of a cut, in the order of their values.
var Cuts = []Cut{CutOverload, CutLatency, CutRetryAfter}

// String names the cause as the metrics label it.
func (c Cut) String() string {
	switch c {
	case CutOverload:
		return "overload"
	case CutLatency:
		return "latency"
	case CutRetryAfter:
		return "retry_after"
	}
	return "none"
}

// Sample is one answered call as the limiter sees it.
type Sample struct {
	Signal Signal
	// Took is the call's latency.
	Took time.Duration
	// RetryAfter is the Retry-After of a 429 or 503, 0 without one.
	RetryAfter time.Duration
	// At is when the answer came (the caller's clock; the limiter reads
	// none).
	At time.Time
}

// Limiter is one destination's adaptive concurrency limit, between 1 and
// its max_inflight. It is safe for concurrent use; each call costs a
// mutex.
type Limiter struct {
	max int

	mu    sync.Mutex
	limit float64
	// ssthresh is where slow start ends: below it the limit doubles per
	// window, above it grows by one per window.
	ssthresh  float64
	window    uint64 // counts cuts; a call started in an older window does not cut
	inflight  int
	recent    float64   // latency averages, seconds (observe)
	long      float64   //
	samples   int       // successes averaged
	holdUntil time.Time // no growth before (a long Retry-After)
	started   bool      // a call was started (Resume no longer applies)
}

// NewLimiter returns a limiter for a destination of at most max calls in
// flight (maxInflight; below 1 counts as 1).
func NewLimiter(maxInflight int) *Limiter {
	n := max(maxInflight, 1)
	return &Limiter{max: n, limit: float64(min(initialLimit, n)), ssthresh: float64(n)}
}

// Resume starts a limiter that has started no call yet from the limit
// and slow-start threshold it learned before (kept across a restart:
// docs/processor.md), the limit at most its max_inflight and at least 1:
// a limit kept in slow start (threshold 0 or at least max_inflight) goes
// on doubling per window, one kept after a cut grows by one per window up
// from the threshold; the first overload answer cuts either, as any
// limit. Until the first call a later Resume replaces an earlier one (the
// kept reports are read in order, the newest last); a limiter that has
// started a call keeps its own. It returns the limit now.
func (l *Limiter) Resume(kept, threshold int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.limit = float64(min(max(kept, 1), l.max))
		l.ssthresh = float64(l.max)
		if threshold > 0 {
			l.ssthresh = float64(min(max(threshold, 1), l.max))
		}
	}
	return int(l.limit)
}

// Kept is what a restart resumes from (Resume): the limit and the
// slow-start threshold (max_inflight while no cut ended slow start).
func (l *Limiter) Kept() (limit, threshold int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit), int(l.ssthresh)
}

// Ticket is a call's start, given back with its answer.
type Ticket struct{ window uint64 }

// Start counts a call in flight.
func (l *Limiter) Start() Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight++
	l.started = true
	return Ticket{window: l.window}
}

// Abandon ends a call that was not answered (its caller went away): it
// says nothing.
func (l *Limiter) Abandon(Ticket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
}

// Done ends a call with its answer and returns the limit now, and why
// the answer lowered it (NoCut when it did not).
func (l *Limiter) Done(t Ticket, s Sample) (int, Cut) {
	l.mu.Lock()
	defer l.mu.Unlock()
	used := 2*l.inflight >= int(l.limit) // the limit is in use: a receiver that is not asked for more says nothing about more
	l.inflight--
	if s.Signal == Succeeded {
		l.observe(s.Took)
	}
	// A slow answer cuts only while the limit is in use, as growth: the
	// calls in flight then are what the receiver is slow under. Slow
	// answers at a fraction of the limit are the machine's stalls (a
	// pause of the processor's or the receiver's own) or the tail of one
	// (the recent average decays over about ten answers after it), and
	// cutting on them walked the limit down a window at a time while
	// nothing asked for it (issue 36: 3-17 of 64 at 700 events/s, records
	// then waiting for a slot in the next stall).
	slow := s.Signal == Succeeded && l.slow() && used
	switch {
	case s.Signal == Overloaded && s.RetryAfter >= HoldRetryAfter:
		back := max(l.limit*limitBackoff, 1) // slow start back up to there after the date
		if s.At.Before(l.holdUntil) {
			back = l.ssthresh // held already: keep where it was before
		}
		l.cut(1)
		l.ssthresh = back
		l.holdUntil = s.At.Add(s.RetryAfter)
		return int(l.limit), CutRetryAfter
	case s.Signal == Overloaded || slow:
		if t.window == l.window { // once per window
			l.cut(l.limit * limitBackoff)
			if slow {
				return int(l.limit), CutLatency
			}
			return int(l.limit), CutOverload
		}
	case s.Signal == Succeeded && used && !s.At.Before(l.holdUntil):
		if l.limit < l.ssthresh {
			l.limit++
		} else {
			l.limit += 1 / l.limit
		}
		l.limit = min(l.limit, float64(l.max))
	}
	return int(l.limit), NoCut
}

// Limit returns the current limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// cut lowers the limit to to (at least 1), ends slow start there and
// opens a new window.
func (l *Limiter) cut(to float64) {
	l.limit = max(to, 1)
	l.ssthresh = l.limit
	l.window++
}

// observe adds a success's latency to the averages.
func (l *Limiter) observe(took time.Duration) {
	x := took.Seconds()
	if l.samples == 0 {
		l.recent, l.long = x, x
	}
	l.samples++
	l.recent += recentWeight * (x - l.recent)
	l.long += longWeight * (x - l.long)
}

// slow reports whether the recent latency is past the tolerance over the
// long-run one, and by latencyFloor at least.
func (l *Limiter) slow() bool {
	return l.samples >= minLatencySamples && l.recent > latencyTolerance*l.long && l.recent-l.long >= latencyFloor.Seconds()
}
