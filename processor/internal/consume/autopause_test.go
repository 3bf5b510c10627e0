package consume

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/providers"
)

// TestDeadRoute: a route is due for its auto-pause once every call failed
// for its auto_pause_after, once; a success starts the span again; a
// resume (reset) needs another span; auto_pause_after: 0 has no tracker.
func TestDeadRoute(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	down := errors.New("connection refused")
	type step struct {
		at    time.Duration // after t0
		call  bool          // a call answered at at (err: fails)
		err   error
		reset bool
		due   bool // due(at) says pause
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"failures past the setting", []step{
			{at: 0, call: true, err: down},
			{at: 30 * time.Second, call: true, err: down, due: false},
			{at: 59 * time.Second},
			{at: time.Minute, due: true},
			{at: 2 * time.Minute}, // once
		}},
		{"no call, no span", []step{
			{at: 10 * time.Minute},
		}},
		{"a success resets", []step{
			{at: 0, call: true, err: down},
			{at: 50 * time.Second, call: true},
			{at: 55 * time.Second, call: true, err: down},
			{at: time.Minute},
			{at: 114 * time.Second},
			{at: 115 * time.Second, due: true},
		}},
		{"a resume needs another span", []step{
			{at: 0, call: true, err: down},
			{at: time.Minute, due: true},
			{at: 61 * time.Second, reset: true},
			{at: 2 * time.Minute},
			{at: 2 * time.Minute, call: true, err: down},
			{at: 3 * time.Minute, due: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &deadRoute{after: time.Minute}
			for i, s := range tc.steps {
				at := t0.Add(s.at)
				switch {
				case s.reset:
					d.reset()
				case s.call:
					d.observe(at, s.err)
				}
				since, lastErr, due := d.due(at)
				if due != s.due {
					t.Fatalf("step %d (%v): due %v, want %v", i, s.at, due, s.due)
				}
				if due && (since.After(at.Add(-time.Minute)) || !strings.Contains(lastErr, "refused")) {
					t.Fatalf("step %d: due since %v, last error %q", i, since, lastErr)
				}
			}
		})
	}
}

// TestAutoPauseOff: a destination with auto_pause_after: 0 has no
// tracker; one with the setting has it.
func TestAutoPauseOff(t *testing.T) {
	m := newLaneMetrics(prometheus.NewRegistry())
	for _, after := range []time.Duration{0, time.Hour} {
		r := &providers.Route{Name: "default", Destination: &providers.Destination{URL: "http://x", AutoPauseAfter: after}}
		ln := newLane(Config{MaxInflight: 4, MaxPending: 8}, m, "acme", r, nil)
		if (ln.dead != nil) != (after > 0) {
			t.Errorf("auto_pause_after %v: tracker %v", after, ln.dead)
		}
	}
}
