package consume

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// TestTrialPacing: trials run only while the route is auto-paused, the
// first trial_every after the pause, then one per trial_every counted from
// each start, never two at once; a success marks the route answering again
// until the route is resumed. The clock is the test's.
func TestTrialPacing(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "answering"})
	tr := &trial{every: time.Minute, answering: g}
	type step struct {
		what string
		do   func() bool // its answer, checked against want
		want bool
	}
	steps := []step{
		{"not paused: no trial", func() bool { return tr.due(at(0)) }, false},
		{"not paused: none starts", func() bool { return tr.start(at(0)) }, false},
		{"paused at 0: none due at once", func() bool { tr.set(true, at(0), at(0)); return tr.due(at(59)) }, false},
		{"due a minute after the pause", func() bool { return tr.due(at(60)) }, true},
		{"started at 61", func() bool { return tr.start(at(61)) }, true},
		{"busy while it runs", func() bool { return tr.busy() }, true},
		{"no second trial while one runs", func() bool { return tr.start(at(200)) }, false},
		{"failed: not busy", func() bool { tr.end(trialFailed); return tr.busy() }, false},
		{"not answering after a failure", func() bool { return testutil.ToFloat64(g) == 1 }, false},
		{"next one a minute after the last start, not before", func() bool { return tr.due(at(120)) }, false},
		{"next one at 121", func() bool { return tr.start(at(121)) }, true},
		{"answered: answering again", func() bool { tr.end(trialAnswered); return testutil.ToFloat64(g) == 1 }, true},
		{"reported once, under its pause", func() bool {
			p, a, ok := tr.report()
			_, _, again := tr.report()
			return p.Equal(at(0)) && a && ok && !again
		}, true},
		{"a report not written is said again", func() bool { tr.unwritten(at(0)); _, a, ok := tr.report(); return a && ok }, true},
		{"still paused: trials go on", func() bool { tr.set(true, at(0), at(130)); return tr.due(at(181)) }, true},
		{"a trial not called leaves the mark", func() bool { tr.start(at(181)); tr.end(trialNotCalled); return testutil.ToFloat64(g) == 1 }, true},
		{"a failed trial clears it", func() bool { tr.start(at(241)); tr.end(trialFailed); return testutil.ToFloat64(g) == 1 }, false},
		{"and reports it", func() bool { _, a, ok := tr.report(); return !a && ok }, true},
		{"resumed: no trial", func() bool { tr.set(false, time.Time{}, at(250)); return tr.due(at(1000)) }, false},
		{"a trial ending after the resume marks nothing", func() bool { tr.end(trialAnswered); return testutil.ToFloat64(g) == 0 }, true},
		{"paused again at 300: next trial at 360", func() bool { tr.set(true, at(300), at(300)); return tr.due(at(359)) || !tr.due(at(360)) }, false},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: got %v, want %v", s.what, got, s.want)
		}
	}
}

// downUp is a destination that answers 503 while fail is set, and counts
// the calls by key.
type downUp struct {
	fail  atomic.Bool
	mu    sync.Mutex
	calls map[string]int
	order []string
}

func (f *downUp) Handle(_ context.Context, d deliver.Delivery) error {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[d.Key]++
	f.order = append(f.order, d.Key)
	f.mu.Unlock()
	if f.fail.Load() {
		return &deliver.StatusError{URL: "http://slowcrm.invalid/", StatusCode: 503, Status: "503 Service Unavailable"}
	}
	return nil
}

func (f *downUp) seen() (map[string]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := map[string]int{}
	for k, n := range f.calls {
		c[k] = n
	}
	return c, append([]string(nil), f.order...)
}

// TestTrialCallSpendsNoAttempt: slowcrm's route is auto-paused with its
// records parked in its lane. Its trial calls, while the receiver answers
// 503, all send the lane's head record (it stays at the head), spend no
// attempt (no retry tier, no outcome but its park) and write nothing; the
// first trial the receiver answers delivers that record once (outcome
// done, attempt 1) and marks the route answering again, without resuming
// it (later trials deliver one record each). Resumed, the others are delivered and
// the head is not called again.
func TestTrialCallSpendsNoAttempt(t *testing.T) {
	f := newFakeKafka(t)
	cl := f.client(t)
	set := func(s control.Setting) {
		t.Helper()
		if err := control.Write(context.Background(), cl, f.names.Control, s); err != nil {
			t.Fatal(err)
		}
	}
	set(control.Setting{Provider: "slowcrm", Route: "default", Paused: true, By: control.AutoPauseBy, Why: "test", At: time.Now()})
	dst := &downUp{}
	dst.fail.Store(true)
	reg := prometheus.NewRegistry()
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"slowcrm": dst}, procOptions{metrics: reg, providersYAML: `providers:
  slowcrm: {preset: stripe, secret_env: [S], destination: {url: "http://slowcrm.invalid/", max_inflight: 4, auto_pause_after: 1h, trial_every: 100ms}}
`})
	keys := []string{"s0", "s1", "s2"}
	f.produce(t, "slowcrm", keys...)
	waitFor(t, "three trial calls, the receiver answering 503", func() bool {
		_, order := dst.seen()
		return len(order) >= 3
	})
	calls, order := dst.seen()
	if len(calls) != 1 {
		t.Fatalf("trial calls sent %v (in order %v), want every one the lane's head record", calls, order)
	}
	head := order[0]
	for _, k := range keys {
		o := f.outcomes(t)[k]
		if len(o) != 1 || o[0].Status != outcome.StatusParked || o[0].Attempt != 1 {
			t.Fatalf("%s: outcomes %+v after failed trials, want its park alone (attempt 1)", k, o)
		}
	}
	for _, topic := range f.names.Retry {
		if recs := f.readCommitted(t, topic); len(recs) != 0 {
			t.Fatalf("%d records in retry tier %s after failed trials, want none: a trial spends no attempt", len(recs), topic)
		}
	}
	if gaugeOf(t, reg, "hookline_processor_route_answering_again", "slowcrm") == 1 {
		t.Fatal("answering again after failed trials only")
	}
	dst.fail.Store(false)
	waitFor(t, "the head record delivered by a trial", func() bool {
		o := f.outcomes(t)[head]
		return len(o) == 2 && o[1].Status == outcome.StatusDone
	})
	if o := f.outcomes(t)[head][1]; o.Attempt != 1 {
		t.Fatalf("the trial's delivery has attempt %d, want 1: failed trials spend none", o.Attempt)
	}
	waitFor(t, "answering again", func() bool { return gaugeOf(t, reg, "hookline_processor_route_answering_again", "slowcrm") == 1 })
	waitFor(t, "the trial's report on the control topic", func() bool {
		for _, r := range f.readCommitted(t, f.names.Control) {
			if tr, ok, err := control.DecodeTrial(r); ok && err == nil && tr.Answering && tr.Route == "default" {
				return true
			}
		}
		return false
	})
	if gaugeOf(t, reg, "hookline_processor_route_auto_paused", "slowcrm") != 1 {
		t.Fatal("the route is no longer auto-paused after its trial answered: a trial does not resume it")
	}
	set(control.Setting{Provider: "slowcrm", Route: "default", At: time.Now()})
	waitFor(t, "every record delivered once after the resume", func() bool {
		seen := f.outcomes(t)
		for _, k := range keys {
			o := seen[k]
			if len(o) == 0 || o[len(o)-1].Status != outcome.StatusDone {
				return false
			}
		}
		return true
	})
	calls, order = dst.seen()
	if fails := len(order) - len(keys); calls[head] != 1+fails {
		t.Fatalf("calls %v (in order %v): want the head called once per failed trial plus its delivery, the others once", calls, order)
	}
	for _, k := range keys {
		if k != head && calls[k] != 1 {
			t.Fatalf("%s called %d times, want once", k, calls[k])
		}
		done := 0
		for _, o := range f.outcomes(t)[k] {
			if o.Status == outcome.StatusDone {
				done++
			}
		}
		if done != 1 {
			t.Fatalf("%s: %d outcomes done, want 1", k, done)
		}
	}
	if gaugeOf(t, reg, "hookline_processor_route_answering_again", "slowcrm") == 1 {
		t.Fatal("still answering again after the resume")
	}
}

// gaugeOf is the value of gauge name's series of provider in reg (-1
// when it has none).
func gaugeOf(t *testing.T, reg *prometheus.Registry, name, provider string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "provider" && lp.GetValue() == provider {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
