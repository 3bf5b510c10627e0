package consume

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/processor/internal/decide"
)

// trial paces the trial calls of a route while it is auto-paused
// (docs/processor.md, "The trial call"): one every destination.trial_every,
// the first one trial_every after the pause. A trial is the head record of
// the route's lane, sent for real through the admission chain: a success
// is that record's delivery, written once like any other and marking the
// route answering again; any other end takes the record back to the head
// of its lane (session.unread) with no attempt spent. Only the pause of
// auto-pause gets trials: an operator's pause promises that nothing calls
// the receiver. It is safe for concurrent use.
type trial struct {
	every time.Duration // > 0
	// answering is 1 while the last trial since the route's pause was
	// answered.
	answering prometheus.Gauge

	mu      sync.Mutex
	on      bool      // the route is auto-paused (set)
	pause   time.Time // the auto-pause's At (control.Setting)
	next    time.Time // the next trial may start then
	running bool      // a trial record is taken (start) and not ended
	// answered says the last trial called was answered; unreported that
	// this changed since the last report (report).
	answered, unreported bool
}

// set says whether the route is auto-paused now, by the auto-pause
// written at pause. Trials start trial_every after the pause and go on
// until it ends (each one that succeeds delivers one record); anything
// else (a resume, an operator's pause, another pause) stops them or starts
// again, and forgets an answer.
func (t *trial) set(auto bool, pause, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if auto == t.on && (!auto || pause.Equal(t.pause)) {
		return
	}
	t.on, t.pause, t.answered, t.unreported = auto, pause, false, false
	t.next = now.Add(t.every)
	t.answering.Set(0)
}

// due says whether a trial may start now: the route is auto-paused, no
// trial runs and trial_every passed since the last one started.
func (t *trial) due(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.on && !t.running && !now.Before(t.next)
}

// busy says whether a trial record is taken and not ended: its lane is
// not read meanwhile, so the record can go back to its head.
func (t *trial) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// start takes the trial due now for a record read from the lane; false
// when none is due.
func (t *trial) start(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on || t.running || now.Before(t.next) {
		return false
	}
	t.running, t.next = true, now.Add(t.every)
	return true
}

// trialEnd is how a trial ended.
type trialEnd int

const (
	trialNotCalled trialEnd = iota // no call made (parked by admission, the breaker refusing, not run)
	trialFailed                    // called, and the call failed
	trialAnswered                  // called, and the call succeeded
)

// end ends the trial started. An answer marks the route answering again
// and a failed call unmarks it: the mark is what the last trial called
// found.
func (t *trial) end(e trialEnd) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = false
	if !t.on || e == trialNotCalled {
		return
	}
	if answered := e == trialAnswered; answered != t.answered {
		t.answered, t.unreported = answered, true
		t.answering.Set(map[bool]float64{true: 1, false: 0}[answered])
	}
}

// report says what to write on the control topic (control.Trial) when the
// mark changed since the last report; ok false when it did not. A report
// not written is handed back with unwritten.
func (t *trial) report() (pause time.Time, answering, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on || !t.unreported {
		return time.Time{}, false, false
	}
	t.unreported = false
	return t.pause, t.answered, true
}

// unwritten takes back a report that could not be written: the next
// report says it again, unless the pause changed meanwhile.
func (t *trial) unwritten(pause time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on && t.pause.Equal(pause) {
		t.unreported = true
	}
}

// trialCommits says whether a trial's record leaves a result, and how the
// trial ended: its call succeeded (a delivery like any other), or its
// plan made no call (a record the plan settles itself, as it would after
// a resume). A call that failed or was not made (parked by the admission
// chain, the breaker refusing) leaves none: the record goes back to the
// head of its lane and no attempt is spent.
func trialCommits(pl decide.Plan, results []decide.Result) (bool, trialEnd) {
	e := trialNotCalled
	for i, st := range pl.Steps {
		if st.Action != decide.ActCall {
			continue
		}
		switch r := results[i]; {
		case r.Kind != decide.ResultCalled:
			return false, trialNotCalled
		case r.Err != nil:
			return false, trialFailed
		}
		e = trialAnswered
	}
	return true, e
}
