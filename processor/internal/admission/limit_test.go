package admission

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// step is one call through a limiter: started with n others in flight,
// answered with s; want is the limit after its answer.
type step struct {
	name string
	s    Sample
	want int
}

// runSteps starts and answers each step's call while the limit is in use
// (as many calls in flight as the limit, one of them the step's).
func runSteps(t *testing.T, l *Limiter, steps []step) {
	t.Helper()
	for _, st := range steps {
		others := make([]Ticket, l.Limit()-1)
		for i := range others {
			others[i] = l.Start()
		}
		got, _ := l.Done(l.Start(), st.s)
		for _, o := range others {
			l.Abandon(o)
		}
		if got != st.want {
			t.Fatalf("%s: limit %d, want %d", st.name, got, st.want)
		}
	}
}

func ok(took time.Duration) Sample { return Sample{Signal: Succeeded, Took: took, At: t0} }

// TestLimiterAIMD: slow start from initialLimit doubles the limit per
// window of successes, an overload answer cuts it to limitBackoff of
// itself, then it grows by one per window; never above max_inflight,
// never below 1; a neutral answer changes nothing.
func TestLimiterAIMD(t *testing.T) {
	l := NewLimiter(12)
	ms := time.Millisecond
	runSteps(t, l, []step{
		{"first success", ok(10 * ms), 5},
		{"slow start", ok(10 * ms), 6},
		{"slow start", ok(10 * ms), 7},
		{"neutral", Sample{Signal: Neutral, At: t0}, 7},
		{"slow start", ok(10 * ms), 8},
		{"429", Sample{Signal: Overloaded, Took: ms, At: t0}, 6}, // 8 × 0.8 = 6.4
		{"additive", ok(10 * ms), 6},                             // 6.4 + 1/6.4 = 6.56
		{"additive", ok(10 * ms), 6},                             // 6.71
		{"additive", ok(10 * ms), 6},                             // 6.86
		{"additive", ok(10 * ms), 7},                             // 7.01
	})
	for range 200 {
		l.Done(l.Start(), ok(10*time.Millisecond))
	}
	if got := NewLimiter(12); got.Limit() != initialLimit {
		t.Fatalf("a new limiter starts at %d, want %d", got.Limit(), initialLimit)
	}
	// Growth needs the limit in use: 200 lone calls do not raise a limit of 7.
	if got := l.Limit(); got != 7 {
		t.Fatalf("after calls that did not use the limit: %d, want 7", got)
	}
	for range 400 {
		runSteps(t, l, []step{{"grow", ok(10 * time.Millisecond), l.limitAfterSuccess()}})
	}
	if got := l.Limit(); got != 12 {
		t.Fatalf("grown: %d, want max_inflight 12", got)
	}
	for range 20 {
		l.Done(l.Start(), Sample{Signal: Overloaded, At: t0})
	}
	if got := l.Limit(); got != 1 {
		t.Fatalf("after cuts: %d, want 1", got)
	}
	if got := NewLimiter(0).Limit(); got != 1 {
		t.Fatalf("max_inflight 0: %d, want 1", got)
	}
}

// limitAfterSuccess is what Done returns after one more success in use
// (for the growth loop only: the rule under test is in TestLimiterAIMD's
// table).
func (l *Limiter) limitAfterSuccess() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.limit + 1/l.limit
	if l.limit < l.ssthresh {
		next = l.limit + 1
	}
	return int(min(next, float64(l.max)))
}

// TestLimiterResume: a limiter restarted from a kept limit starts there
// (within 1 and max_inflight): kept after a cut (its threshold) it grows by
// one per window, kept in slow start it goes on doubling; the first
// overload answer cuts it, as a stale limit must be. Before its first
// call a newer kept limit replaces an older one; a limiter that made a
// call keeps its own.
func TestLimiterResume(t *testing.T) {
	ms := time.Millisecond
	l := NewLimiter(200)
	if got := l.Resume(60, 60); got != 60 {
		t.Fatalf("resumed at 60: limit %d, want 60", got)
	}
	if got := l.Resume(120, 120); got != 120 || l.Limit() != 120 {
		t.Fatalf("resumed at 60, then at 120 (a newer report) before any call: limit %d (%d), want 120", got, l.Limit())
	}
	runSteps(t, l, []step{
		{"additive past its threshold", ok(10 * ms), 120}, // 120 + 1/120
		{"503 of a receiver that takes less now", Sample{Signal: Overloaded, Took: ms, At: t0}, 96},
	})
	if lim, th := l.Kept(); lim != 96 || th != 96 {
		t.Errorf("kept %d, %d after the cut; want 96, 96", lim, th)
	}
	ramp := NewLimiter(200)
	if lim, th := ramp.Kept(); lim != initialLimit || th != 200 {
		t.Errorf("a new limiter keeps %d, %d; want %d and max_inflight 200 (slow start)", lim, th, initialLimit)
	}
	ramp.Resume(16, 200)
	runSteps(t, ramp, []step{
		{"slow start goes on", ok(10 * ms), 17},
		{"slow start goes on", ok(10 * ms), 18},
	})
	for _, tc := range []struct {
		max, kept, threshold, want int
	}{
		{200, 500, 0, 200}, // max_inflight lowered in the file since
		{200, 0, 0, 1},
		{2, 1, 1, 1},
	} {
		if got := NewLimiter(tc.max).Resume(tc.kept, tc.threshold); got != tc.want {
			t.Errorf("max %d resumed at %d: limit %d, want %d", tc.max, tc.kept, got, tc.want)
		}
	}
	used := NewLimiter(200)
	used.Done(used.Start(), ok(10*ms))
	if got := used.Resume(120, 120); got != initialLimit {
		t.Errorf("a limiter that made a call resumed at 120: limit %d, want its own %d", got, initialLimit)
	}
}

// TestLimiterOncePerWindow: the calls in flight when the limit was cut
// answer on the old limit; their overload answers do not cut again, a
// call started after the cut does.
func TestLimiterOncePerWindow(t *testing.T) {
	l := NewLimiter(64)
	l.limit, l.ssthresh = 20, 20
	var before [10]Ticket
	for i := range before {
		before[i] = l.Start()
	}
	if got, cut := l.Done(before[0], Sample{Signal: Overloaded, At: t0}); got != 16 || cut != CutOverload {
		t.Fatalf("first 429: %d (%v), want 16 (overload)", got, cut)
	}
	for _, tk := range before[1:] {
		if got, cut := l.Done(tk, Sample{Signal: Overloaded, At: t0}); got != 16 || cut != NoCut {
			t.Fatalf("429 of a call started before the cut: %d (%v), want 16 (none)", got, cut)
		}
	}
	if got, cut := l.Done(l.Start(), Sample{Signal: Overloaded, At: t0}); got != 12 || cut != CutOverload {
		t.Fatalf("429 of a call started after the cut: %d (%v), want 12 (overload)", got, cut)
	}
}

// TestLimiterLatency: once minLatencySamples successes are averaged, one
// slow success does not cut (a pause of the processor's own), a run of
// them that takes the recent average past latencyTolerance times the
// long-run one, and latencyFloor above it, does, once, while the limit is
// in use (half of it in flight); the same run at one call in flight does
// not, nor a fast receiver's run that stays under the floor.
func TestLimiterLatency(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name       string
		held       int // calls kept in flight beside the run
		base, slow time.Duration
		wantCut    bool
	}{
		{"limit in use", 10, 50 * ms, 200 * ms, true},
		{"one call in flight", 0, 50 * ms, 200 * ms, false},
		{"a fast receiver 8x slower, under the floor", 10, ms, 8 * ms, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimiter(64)
			l.limit, l.ssthresh = 20, 20
			for range tc.held - 1 { // with the run's own call: tc.held in flight
				l.Start()
			}
			for range minLatencySamples {
				l.Done(l.Start(), ok(tc.base))
			}
			if got, cut := l.Done(l.Start(), ok(tc.slow)); got != 20 || cut != NoCut {
				t.Fatalf("one call %v after %v: %d (%v), want 20 (none)", tc.slow, tc.base, got, cut)
			}
			cuts := 0
			for range 10 {
				if got, cut := l.Done(l.Start(), ok(tc.slow)); cut != NoCut {
					if got != 16 || cut != CutLatency {
						t.Fatalf("a run of calls of %v after %v: limit %d (%v), want no cut or one to 16 (latency)", tc.slow, tc.base, got, cut)
					}
					cuts++
					break
				}
			}
			if got := cuts == 1; got != tc.wantCut {
				t.Fatalf("ten calls of %v after %v in a row with %d in flight: cut %v, want %v", tc.slow, tc.base, max(tc.held, 1), got, tc.wantCut)
			}
		})
	}
}

// TestLimiterHold: a Retry-After of HoldRetryAfter or more drops the
// limit to 1 and holds it there until the date; then it slow-starts back
// to limitBackoff of where it was.
func TestLimiterHold(t *testing.T) {
	l := NewLimiter(64)
	l.limit, l.ssthresh = 40, 40
	if got, cut := l.Done(l.Start(), Sample{Signal: Overloaded, RetryAfter: time.Minute, At: t0}); got != 1 || cut != CutRetryAfter {
		t.Fatalf("Retry-After 1m: %d (%v), want 1 (retry_after)", got, cut)
	}
	early := Sample{Signal: Succeeded, Took: time.Millisecond, At: t0.Add(59 * time.Second)}
	if got, _ := l.Done(l.Start(), early); got != 1 {
		t.Fatalf("before the date: %d, want 1", got)
	}
	late := Sample{Signal: Succeeded, Took: time.Millisecond, At: t0.Add(time.Minute)}
	for want := 2; want <= 32; want++ {
		runSteps(t, l, []step{{"slow start after the date", late, want}})
	}
	runSteps(t, l, []step{{"additive above 32", late, 32}})

	short := NewLimiter(64)
	short.limit, short.ssthresh = 40, 40
	if got, cut := short.Done(short.Start(), Sample{Signal: Overloaded, RetryAfter: time.Second, At: t0}); got != 32 || cut != CutOverload {
		t.Fatalf("Retry-After 1s: %d (%v), want an ordinary cut to 32 (overload)", got, cut)
	}
}

// TestLaneLimit: a lane lets Limit calls in flight; a lower limit waits
// for calls to end, a higher one frees slots at once; Room counts the
// limit.
func TestLaneLimit(t *testing.T) {
	ln := testLane(4, nil)
	b := testBudget(100, false)
	ctx := context.Background()
	for range 4 {
		if err := b.Wait(ctx, ln, false); err != nil {
			t.Fatalf("wait with free slots: %v", err)
		}
	}
	ln.SetLimit(2) // 4 in flight: the lane owes 2
	b.Free(ln)
	b.Free(ln)
	if got := len(ln.slots); got != 4 {
		t.Fatalf("two calls ended while 2 owed: %d of 4 slots taken, want 4 (2 calls, 2 withheld)", got)
	}
	b.Free(ln)
	if got := len(ln.slots); got != 3 {
		t.Fatalf("one more ended: %d taken, want 3", got)
	}
	if err := b.Wait(ctx, ln, false); err != nil {
		t.Fatalf("second call under limit 2: %v", err)
	}
	ln.SetLimit(3)
	if err := b.Wait(ctx, ln, false); err != nil {
		t.Fatalf("third call under limit 3: %v", err)
	}
	ln.SetLimit(9) // above Slots: Slots
	if got := ln.Limit(); got != 4 {
		t.Fatalf("limit above the slots: %d, want 4", got)
	}
	ln.SetLimit(0)
	if got := ln.Limit(); got != 1 {
		t.Fatalf("limit 0: %d, want 1", got)
	}
	ln.waitN.Store(1)
	if ln.Room() {
		t.Fatal("one record waits and the limit is 1: Room")
	}
	ln.SetLimit(2)
	if !ln.Room() {
		t.Fatal("one record waits and the limit is 2: no Room")
	}
}
