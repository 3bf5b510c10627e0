// Package capacity is an HTTP receiver with a hidden capacity, for tests
// and benchmarks of adaptive delivery (issue 34): it takes at most C calls
// at a time and refuses the others at once (429 with Retry-After, or 503),
// its latency rises as the calls in flight near C, and C can be changed
// while it runs. A sender that knows nothing of C finds it only from the
// answers.
//
// Latency of a call taken with n calls in flight (itself included):
// Base × (1 + Rise × (n/C)²). With Rise below 1 the receiver's throughput
// n/latency still grows up to n = C, so the best a sender can get is
// Allows() = C / (Base × (1 + Rise)) answers a second.
package capacity

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Options shape a Receiver; the zero value of each field but Capacity is a
// usable default.
type Options struct {
	// Capacity is C, the calls taken at once (SetCapacity changes it).
	Capacity int
	// Base is the latency of a call alone; default 50ms.
	Base time.Duration
	// Rise is how much slower a call is at capacity, as a fraction of
	// Base; default 0.5 (1.5 × Base at C).
	Rise float64
	// Refuse is the status of a refused call, 429 (default) or 503.
	Refuse int
	// RetryAfter is the Retry-After of a refusal, as sent ("1", or an
	// HTTP date); "" sends none. Default "1".
	RetryAfter *string
}

// Receiver is the hidden-capacity receiver; an http.Handler safe for
// concurrent use. Each call costs a mutex twice and a sleep.
type Receiver struct {
	base       time.Duration
	rise       float64
	refuse     int
	retryAfter string
	start      time.Time

	mu       sync.Mutex
	capacity int
	inflight int
	// ok and refused count answers by second since start.
	ok, refused []int

	calls atomic.Int64
	// hold, when set (tests), replaces the sleep: a taken call waits for
	// it to close.
	hold chan struct{}
}

// New returns a receiver; its clock for Series starts now.
func New(o Options) *Receiver {
	ra := "1"
	if o.RetryAfter != nil {
		ra = *o.RetryAfter
	}
	r := &Receiver{
		base:       o.Base,
		rise:       o.Rise,
		refuse:     o.Refuse,
		retryAfter: ra,
		start:      time.Now(),
		capacity:   o.Capacity,
	}
	if r.base <= 0 {
		r.base = 50 * time.Millisecond
	}
	if r.rise <= 0 {
		r.rise = 0.5
	}
	if r.refuse == 0 {
		r.refuse = http.StatusTooManyRequests
	}
	return r
}

// SetCapacity changes C; calls in flight above it finish.
func (r *Receiver) SetCapacity(c int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.capacity = c
}

// Allows is the most answers a second the receiver gives at capacity c:
// c / (Base × (1 + Rise)).
func (r *Receiver) Allows(c int) float64 {
	return float64(c) / (r.base.Seconds() * (1 + r.rise))
}

// ServeHTTP takes the call if fewer than C are in flight (204 after its
// latency), else refuses it at once.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r.calls.Add(1)
	r.mu.Lock()
	if r.inflight >= r.capacity {
		r.count(&r.refused)
		r.mu.Unlock()
		if r.retryAfter != "" {
			w.Header().Set("Retry-After", r.retryAfter)
		}
		w.WriteHeader(r.refuse)
		return
	}
	r.inflight++
	x := float64(r.inflight) / float64(r.capacity)
	r.mu.Unlock()

	if r.hold != nil {
		<-r.hold
	} else {
		time.Sleep(time.Duration(float64(r.base) * (1 + r.rise*x*x)))
	}

	r.mu.Lock()
	r.inflight--
	r.count(&r.ok)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// count adds one to this second's bucket of s; r.mu held.
func (r *Receiver) count(s *[]int) {
	i := int(time.Since(r.start) / time.Second)
	for len(*s) <= i {
		*s = append(*s, 0)
	}
	(*s)[i]++
}

// Stats are the receiver's answers so far.
type Stats struct {
	Calls, OK, Refused int
	InFlight           int
}

// Stats returns the answers so far.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Calls: int(r.calls.Load()), InFlight: r.inflight}
	for _, n := range r.ok {
		s.OK += n
	}
	for _, n := range r.refused {
		s.Refused += n
	}
	return s
}

// Series returns the answers by second since New: taken (2xx) and
// refused, of equal length.
func (r *Receiver) Series() (ok, refused []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := max(len(r.ok), len(r.refused))
	ok, refused = make([]int, n), make([]int, n)
	copy(ok, r.ok)
	copy(refused, r.refused)
	return ok, refused
}

// Since returns how long ago New was called: the clock of Series.
func (r *Receiver) Since() time.Duration { return time.Since(r.start) }
