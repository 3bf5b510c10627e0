package isolation

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// timeline builds a timeline in which every fastpay key of a phase is
// called after the given latencies.
func timeline(alone, together []time.Duration) *Timeline {
	tl := NewTimeline()
	t0 := time.Unix(1000, 0)
	for phase, lats := range map[string][]time.Duration{Alone: alone, Together: together} {
		for i, d := range lats {
			k := fmt.Sprintf("%s:%s_%d", Fast, phase, i)
			tl.Accepted(phase, t0, k)
			tl.Called(k, t0.Add(d))
		}
	}
	return tl
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestIsolated(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name            string
		alone, together []time.Duration
		want            string // "" when isolated, else part of the error
	}{
		{"same latency", repeat(20*ms, 100), repeat(20*ms, 100), ""},
		{"3x is still isolated", repeat(200*ms, 100), repeat(600*ms, 100), ""},
		{"under 300 ms whatever the ratio", repeat(5*ms, 100), repeat(290*ms, 100), ""},
		{"slowed down by the slow destination", repeat(20*ms, 100), repeat(3*time.Second, 100), "ratio 150.0"},
		{"no keys alone", nil, repeat(20*ms, 10), "no fastpay keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := timeline(c.alone, c.together).Report(Default()).Isolated()
			if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Isolated() = %v, want %q", err, c.want)
			}
		})
	}
}

// The priority scenario's floor is half of slowcrm's call: a p99 of a
// call's time (a record held back) at 5 ms alone fails it, 490 ms passes.
func TestPriorityFloor(t *testing.T) {
	err := timeline(repeat(5*time.Millisecond, 100), repeat(time.Second, 100)).Report(Priority()).Isolated()
	if err == nil || !strings.Contains(err.Error(), "priority: fastpay p99 1000.0 ms") || !strings.Contains(err.Error(), "or 500.0 ms") {
		t.Fatalf("Isolated() = %v, want a failure naming the 500 ms floor", err)
	}
	if err := timeline(repeat(5*time.Millisecond, 100), repeat(490*time.Millisecond, 100)).Report(Priority()).Isolated(); err != nil {
		t.Fatalf("Isolated() = %v for a p99 of 490 ms, want it passed", err)
	}
	p := Priority().Providers("http://127.0.0.1:1/hooks", "SECRET")
	for _, want := range []string{"priority: critical", "priority: low", "max_inflight: 2000"} {
		if !strings.Contains(p, want) {
			t.Errorf("providers entries lack %q:\n%s", want, p)
		}
	}
	if got := Priority().ProcessorEnv()["HOOKLINE_MAX_PENDING"]; got != "500" {
		t.Errorf("processor env HOOKLINE_MAX_PENDING %q, want 500", got)
	}
}

// TestUncalledKey: a fastpay key never called fails the verdict, and the
// report counts keys, calls and repeats per phase.
func TestUncalledKey(t *testing.T) {
	tl := timeline(repeat(time.Millisecond, 10), repeat(time.Millisecond, 10))
	now := time.Now()
	tl.Accepted(Together, now, Fast+":late")
	tl.Accepted(Together, now, Slow+":a")
	tl.Called(Slow+":a", now.Add(3*time.Second))
	tl.Called(Slow+":a", now.Add(6*time.Second))
	tl.Accepted(Together, now.Add(time.Second), Slow+":a") // a re-send keeps the first 202
	r := tl.Report(Default())
	if err := r.Isolated(); err == nil || !strings.Contains(err.Error(), "never called: 0 of 10 alone, 1 of 11 together") {
		t.Fatalf("Isolated() = %v, want the uncalled key named", err)
	}
	if r.Slow.Keys != 1 || r.Slow.Called != 1 || r.Slow.Calls != 2 || r.Slow.P50 != 3*time.Second {
		t.Fatalf("slowcrm summary %+v, want 1 key, 1 called, 2 calls, 3s", r.Slow)
	}
	if got := tl.Keys(Together, Slow); len(got) != 1 || got[0] != Slow+":a" {
		t.Fatalf("Keys = %v", got)
	}
}

func TestProvidersDelay(t *testing.T) {
	s := Default()
	p := s.Providers("http://127.0.0.1:1/hooks", "SECRET")
	for _, want := range []string{"fastpay:", "slowcrm:", "timeout: 10s, max_inflight: 200", "idempotency_key: {json: /id}"} {
		if !strings.Contains(p, want) {
			t.Errorf("providers entries lack %q:\n%s", want, p)
		}
	}
	if s.Delay(Slow+":x") != 3*time.Second || s.Delay(Fast+":x") != 0 || s.Delay("stripe:x") != 0 {
		t.Errorf("Delay: slowcrm %s, fastpay %s", s.Delay(Slow+":x"), s.Delay(Fast+":x"))
	}
}
