package loadtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestClosedLoop(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[int]bool{}
	)
	r := ClosedLoop(context.Background(), 4, 200*time.Millisecond, func(_ context.Context, i int) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if seen[i] {
			t.Errorf("call %d made twice", i)
		}
		seen[i] = true
		if i%10 == 9 {
			return errors.New("every tenth fails")
		}
		return nil
	})
	calls := len(r.Lat) + r.Errors
	if calls != len(seen) || calls < 4 || calls > 4*(200/5+1) {
		t.Fatalf("%d latencies + %d errors for %d calls: want them to add up, 4 to 164 of them", len(r.Lat), r.Errors, len(seen))
	}
	for i := 0; i < calls; i++ {
		if !seen[i] {
			t.Fatalf("call %d missing: numbers must run 0..%d", i, calls-1)
		}
	}
	if r.Errors != calls/10 || r.Elapsed < 200*time.Millisecond || r.Pct(50) < 5*time.Millisecond {
		t.Fatalf("errors %d (want %d), elapsed %s, p50 %s", r.Errors, calls/10, r.Elapsed, r.Pct(50))
	}
	if (r.Errors > 0) != (r.First != nil) || (r.First != nil && r.First.Error() != "every tenth fails") {
		t.Errorf("%d errors, first %v: want the calls' own error once any failed", r.Errors, r.First)
	}
}

func TestOpenLoop(t *testing.T) {
	r := OpenLoop(context.Background(), 200, 250*time.Millisecond, func(context.Context, int) error { return nil })
	if len(r.Lat) != 50 || r.Errors != 0 || r.First != nil {
		t.Fatalf("%d calls, %d errors (first %v): want 50 (200/s for 250ms), 0", len(r.Lat), r.Errors, r.First)
	}
}

// TestOpenLoops: two loads on one schedule take calls in turn, each its
// own numbering from 0, and each Result counts its own calls and errors.
func TestOpenLoops(t *testing.T) {
	var mu sync.Mutex
	seen := [2][]int{}
	rs := OpenLoops(context.Background(), 400, 250*time.Millisecond, 2, func(_ context.Context, load, i int) error {
		mu.Lock()
		seen[load] = append(seen[load], i)
		mu.Unlock()
		if load == 1 && i%10 == 0 {
			return errors.New("refused")
		}
		return nil
	})
	for load, got := range seen {
		slices.Sort(got)
		for i, v := range got {
			if v != i {
				t.Fatalf("load %d: calls %v, want 0 to %d once each", load, got, len(got)-1)
			}
		}
	}
	if len(seen[0]) != 50 || len(seen[1]) != 50 {
		t.Fatalf("%d and %d calls, want 50 each (400/s for 250ms, in turn)", len(seen[0]), len(seen[1]))
	}
	if len(rs[0].Lat) != 50 || rs[0].Errors != 0 || len(rs[1].Lat) != 45 || rs[1].Errors != 5 {
		t.Errorf("results %d ok %d errors, %d ok %d errors; want 50/0 and 45/5", len(rs[0].Lat), rs[0].Errors, len(rs[1].Lat), rs[1].Errors)
	}
	if rs[0].First != nil || rs[1].First == nil || rs[1].First.Error() != "refused" {
		t.Errorf("first errors %v and %v, want none and the second load's \"refused\"", rs[0].First, rs[1].First)
	}
	if rs[0].Elapsed <= 0 || rs[0].Elapsed != rs[1].Elapsed {
		t.Errorf("elapsed %s and %s, want the schedule's one time in both", rs[0].Elapsed, rs[1].Elapsed)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {50, 6}, {99, 10}, {100, 10}} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("p%g = %d, want %d", c.p, got, c.want)
		}
	}
	if ds[0] != 5 {
		t.Errorf("Percentile sorted its argument")
	}
	if Percentile(nil, 50) != 0 {
		t.Errorf("p50 of nothing is not 0")
	}
}
