package deliver

import (
	"sync"
	"time"
)

// breakerState is where a circuit breaker stands.
type breakerState int8

const (
	closed   breakerState = iota // calls go through; consecutive failures are counted
	open                         // calls are refused until the cool-down ends
	halfOpen                     // one probe call goes through; the others are refused
)

// outcome is what a call tells the breaker.
type outcome int8

const (
	ignored   outcome = iota // the call says nothing about the destination (caller cancelled)
	succeeded                // the destination answered (2xx, 429, or a permanent 3xx/4xx)
	failed                   // retryable failure: timeout, connection error, 408, 5xx
)

// ticket is what allow hands to an admitted call, for done. gen ties the
// result to the state it was admitted in: a result from an older state (a
// slow call admitted before the circuit opened) is ignored, so only the probe
// decides a half-open circuit.
type ticket struct {
	gen   uint64
	probe bool
}

// breaker is a consecutive-failure circuit breaker. A nil *breaker is
// disabled: it admits every call. All methods cost one uncontended mutex.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	state    breakerState
	failures int       // consecutive failures while closed
	until    time.Time // end of the cool-down while open
	gen      uint64    // bumped on every state change
	probing  bool      // half-open: the probe is in flight
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	if threshold < 0 {
		return nil
	}
	return &breaker{threshold: threshold, cooldown: cooldown}
}

// allow admits a call, or refuses it with the cool-down left (0 while a
// half-open probe is in flight). Every admitted call must be followed by one
// done with its ticket.
func (b *breaker) allow(now time.Time) (t ticket, wait time.Duration, ok bool) {
	if b == nil {
		return ticket{}, 0, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case closed:
		return ticket{gen: b.gen}, 0, true
	case open:
		if now.Before(b.until) {
			return ticket{}, b.until.Sub(now), false
		}
		b.set(halfOpen)
	}
	if b.probing {
		return ticket{}, 0, false
	}
	b.probing = true
	return ticket{gen: b.gen, probe: true}, 0, true
}

// refuses reports, changing nothing, whether allow would refuse a call at
// now, and the cool-down left.
func (b *breaker) refuses(now time.Time) (wait time.Duration, refused bool) {
	if b == nil {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case open:
		if now.Before(b.until) {
			return b.until.Sub(now), true
		}
	case halfOpen:
		return 0, b.probing
	}
	return 0, false
}

// done records the outcome of a call admitted with t.
func (b *breaker) done(t ticket, o outcome, now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return
	}
	if t.probe {
		b.probing = false
	}
	switch o {
	case succeeded:
		b.failures = 0
		if b.state != closed {
			b.set(closed)
		}
	case failed:
		b.failures++
		if b.state == halfOpen || b.failures >= b.threshold {
			b.until = now.Add(b.cooldown)
			b.set(open)
		}
	}
}

// set moves to state s, starting a new generation. Callers hold mu.
func (b *breaker) set(s breakerState) {
	b.state = s
	b.gen++
	b.failures = 0
	b.probing = false
}

// isOpen reports whether the breaker is anything but closed.
func (b *breaker) isOpen() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state != closed
}
