package deliver

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/retry"
)

// TestBreakerHTTP drives the breaker through an HTTP destination whose
// answer the test switches, on a fake clock.
func TestBreakerHTTP(t *testing.T) {
	var (
		calls atomic.Int32
		code  atomic.Int32
	)
	srv := mustServer(t, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(int(code.Load()))
	})
	clock := newFakeClock()
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, BreakerFailures: 3, BreakerCooldown: 30 * time.Second, Now: clock.Now})
	call := func() error { return h.Handle(t.Context(), testDelivery()) }

	// A permanent 4xx is the destination answering: it resets the count.
	for _, c := range []int{500, 502, 400, 503, 408} {
		code.Store(int32(c))
		_ = call()
	}
	if h.BreakerOpen() {
		t.Fatal("open after 2 failures, a 400 and 2 failures")
	}

	// A 429 is a busy destination answering: it resets the count too.
	code.Store(429)
	_ = call()
	for range 2 {
		code.Store(503)
		_ = call()
	}
	if h.BreakerOpen() {
		t.Fatal("open after a 429 and 2 failures")
	}

	// The third consecutive failure opens the circuit.
	code.Store(503)
	_ = call()
	if !h.BreakerOpen() {
		t.Fatal("closed after 3 consecutive failures")
	}
	if !h.Refusing() {
		t.Fatal("Refusing false while open with cool-down left")
	}
	before := calls.Load()
	clock.Advance(10 * time.Second)
	err := call()
	if !errors.Is(err, ErrCircuitOpen) || calls.Load() != before {
		t.Fatalf("Handle = %v with %d new calls, want ErrCircuitOpen and none", err, calls.Load()-before)
	}
	if d := retry.Classify(err); !d.Retryable || d.After != 20*time.Second {
		t.Errorf("Classify = %+v, want retryable after the 20s of cool-down left", d)
	}
	if want := "destination " + srv.URL + ": circuit open (retry after 20s)"; err.Error() != want {
		t.Errorf("error\n got %q\nwant %q", err, want)
	}

	// After the cool-down a failing probe re-opens it for a full cool-down.
	clock.Advance(20 * time.Second)
	if h.Refusing() {
		t.Fatal("Refusing true once the cool-down is over: the probe could never be made")
	}
	code.Store(500)
	if err := call(); errors.Is(err, ErrCircuitOpen) || calls.Load() != before+1 {
		t.Fatalf("probe: %v, %d new calls, want the destination called once", err, calls.Load()-before)
	}
	if err := call(); retry.Classify(err).After != 30*time.Second {
		t.Errorf("after a failed probe: %v, want ErrCircuitOpen for 30s", err)
	}

	// A succeeding probe closes it.
	clock.Advance(30 * time.Second)
	code.Store(204)
	if err := call(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if h.BreakerOpen() {
		t.Error("open after a successful probe")
	}
	code.Store(500)
	_ = call()
	_ = call()
	if h.BreakerOpen() {
		t.Error("the count was not reset by the successful probe")
	}
}

// TestBreakerHalfOpenSingleProbe: after the cool-down, of many concurrent
// calls exactly one reaches the destination; the others get ErrCircuitOpen
// while it is in flight, and its success closes the circuit.
func TestBreakerHalfOpenSingleProbe(t *testing.T) {
	const n = 16
	var (
		calls   atomic.Int32
		fail    atomic.Bool
		arrived = make(chan struct{}, n)
		release = make(chan struct{})
	)
	fail.Store(true)
	srv := mustServer(t, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		if fail.Load() {
			w.WriteHeader(503)
			return
		}
		arrived <- struct{}{}
		<-release
		w.WriteHeader(204)
	})
	clock := newFakeClock()
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, BreakerFailures: 1, Now: clock.Now})
	_ = h.Handle(t.Context(), testDelivery())
	if !h.BreakerOpen() {
		t.Fatal("closed after a failure with BreakerFailures 1")
	}
	fail.Store(false)
	clock.Advance(DefaultBreakerCooldown)

	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { errs <- h.Handle(t.Context(), testDelivery()) })
	}
	for range n - 1 {
		err := <-errs
		if !errors.Is(err, ErrCircuitOpen) || !retry.Classify(err).Retryable {
			t.Errorf("Handle during the probe = %v, want a retryable ErrCircuitOpen", err)
		}
	}
	<-arrived
	if got := calls.Load(); got != 2 {
		t.Errorf("%d calls reached the destination in all, want the failure and one probe", got)
	}
	if !h.BreakerOpen() {
		t.Error("BreakerOpen false while half-open")
	}
	close(release)
	wg.Wait()
	if err := <-errs; err != nil {
		t.Errorf("probe: %v", err)
	}
	if h.BreakerOpen() {
		t.Error("open after the probe succeeded")
	}
	if err := h.Handle(t.Context(), testDelivery()); err != nil {
		t.Errorf("Handle after closing: %v", err)
	}
}

func TestBreakerDisabled(t *testing.T) {
	var calls atomic.Int32
	srv := mustServer(t, func(w http.ResponseWriter, _ *http.Request) { calls.Add(1); w.WriteHeader(500) })
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, BreakerFailures: -1})
	for range 10 {
		if err := h.Handle(t.Context(), testDelivery()); errors.Is(err, ErrCircuitOpen) {
			t.Fatal("ErrCircuitOpen with the breaker disabled")
		}
	}
	if calls.Load() != 10 || h.BreakerOpen() {
		t.Errorf("%d calls, open %v; want 10 and closed", calls.Load(), h.BreakerOpen())
	}
}

// TestBreakerTransitions tests the state machine alone.
func TestBreakerTransitions(t *testing.T) {
	t0 := newFakeClock().Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mustAllow := func(t *testing.T, b *breaker, now time.Time) ticket {
		t.Helper()
		tk, wait, ok := b.allow(now)
		if !ok {
			t.Fatalf("refused (wait %s), want admitted", wait)
		}
		return tk
	}
	mustRefuse := func(t *testing.T, b *breaker, now time.Time, want time.Duration) {
		t.Helper()
		if w, refused := b.refuses(now); !refused || w != want {
			t.Fatalf("refuses = %s %v, want %s true", w, refused, want)
		}
		if _, wait, ok := b.allow(now); ok || wait != want {
			t.Fatalf("allow = %s %v, want refused with %s", wait, ok, want)
		}
	}

	t.Run("stale result ignored", func(t *testing.T) {
		b := newBreaker(2, 10*time.Second)
		slow := mustAllow(t, b, at(0)) // admitted while closed
		b.done(mustAllow(t, b, at(0)), failed, at(0))
		b.done(mustAllow(t, b, at(0)), failed, at(0))
		mustRefuse(t, b, at(1), 9*time.Second)
		b.done(slow, succeeded, at(2)) // finishes after the circuit opened
		mustRefuse(t, b, at(2), 8*time.Second)
	})
	t.Run("ignored probe lets the next call probe", func(t *testing.T) {
		b := newBreaker(1, 10*time.Second)
		b.done(mustAllow(t, b, at(0)), failed, at(0))
		probe := mustAllow(t, b, at(10))
		if !probe.probe {
			t.Fatal("first call after the cool-down is not a probe")
		}
		mustRefuse(t, b, at(10), 0)
		b.done(probe, ignored, at(11)) // caller cancelled
		if tk := mustAllow(t, b, at(11)); !tk.probe {
			t.Error("next call after an ignored probe is not a probe")
		}
	})
	t.Run("refuses changes nothing", func(t *testing.T) {
		b := newBreaker(1, 10*time.Second)
		b.done(mustAllow(t, b, at(0)), failed, at(0))
		if _, refused := b.refuses(at(10)); refused {
			t.Fatal("refuses after the cool-down")
		}
		if tk := mustAllow(t, b, at(10)); !tk.probe {
			t.Error("refuses took the probe")
		}
	})
	t.Run("nil is disabled", func(t *testing.T) {
		var b *breaker
		for range 3 {
			b.done(mustAllow(t, b, at(0)), failed, at(0))
		}
		if b.isOpen() {
			t.Error("nil breaker open")
		}
	})
}
