package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FlowOptions shape a stream of deliveries sent to ingest the way providers
// send them: signed, some of them more than once, retried after a 503 or a
// refused connection.
type FlowOptions struct {
	// Deliveries is how many deliveries are sent, duplicates included, or
	// started before Flow.Stop, which ends a flow sooner.
	Deliveries int
	// Rate is deliveries started per second (open loop); 0 sends as fast as
	// Workers allow. While ingest refuses, workers back off and the rate
	// drops, as a provider's would.
	Rate float64
	// Duplicates is the share of deliveries that re-send an earlier event
	// (same identity, signed afresh).
	Duplicates float64
	// Providers are cycled through; default MixedProviders.
	Providers []string
	// Workers is how many deliveries may be under way at once (default 32).
	Workers int
	// ID prefixes every event id (default "evt"); flows of one system need
	// distinct IDs unless they mean to send the same events.
	ID string
	// GiveUp is how long one delivery is retried before the flow gives up on
	// it (default 3m). A provider retries for hours; a test must stop.
	GiveUp time.Duration
	// EventTypes, when set, are cycled through as the types of new events
	// (NewTypedEvent: stripe, standard, fastpay and slowcrm only), so that
	// routes filtering by type each get their share.
	EventTypes []string
	// OnAccept, when set, is called with the keys of every 202 and the time
	// the answer was read.
	OnAccept func(keys []string, at time.Time)
}

// FlowStats count what a flow sent and what ingest answered.
type FlowStats struct {
	Deliveries int // deliveries started
	Accepted   int // deliveries answered 202
	Duplicates int // deliveries that re-sent an earlier event
	// Replays are the 202s ingest answered "duplicate": re-sends it
	// recognised as replays of what it accepted (nothing produced).
	Replays    int
	Requests   int // HTTP requests, retries included
	Retried    int // requests answered 503/429/5xx or not answered, then sent again
	GaveUp     int // deliveries never accepted within GiveUp
	Refused    int // deliveries answered with a 4xx: the harness's events are valid, so each is a bug
	Mismatched int // 202 answers whose keys differ from the event's
	// Answers counts the status of every request; 0 counts transport errors.
	Answers map[int]int
	Took    time.Duration
}

// String is one line for the test log.
func (st FlowStats) String() string {
	codes := make([]int, 0, len(st.Answers))
	for c := range st.Answers {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "conn-error"
		}
		parts = append(parts, fmt.Sprintf("%s:%d", name, st.Answers[c]))
	}
	return fmt.Sprintf("flow: deliveries=%d accepted=%d resent=%d replays=%d requests=%d retried=%d gave-up=%d refused=%d mismatched=%d in %s (%.0f/s) answers{%s}",
		st.Deliveries, st.Accepted, st.Duplicates, st.Replays, st.Requests, st.Retried, st.GaveUp, st.Refused, st.Mismatched,
		st.Took.Round(time.Millisecond), float64(st.Deliveries)/st.Took.Seconds(), strings.Join(parts, " "))
}

// Flow is a running stream of deliveries. Every key ingest accepts is
// entered in the system's Ledger.
type Flow struct {
	sys      *System
	o        FlowOptions
	started  atomic.Int64
	accepted atomic.Int64
	done     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once

	mu    sync.Mutex
	stats FlowStats
}

// StartFlow starts sending in the background.
func (s *System) StartFlow(o FlowOptions) *Flow {
	if len(o.Providers) == 0 {
		o.Providers = MixedProviders
	}
	if o.Workers == 0 {
		o.Workers = 32
	}
	if o.ID == "" {
		o.ID = "evt"
	}
	if o.GiveUp == 0 {
		o.GiveUp = 3 * time.Minute
	}
	f := &Flow{sys: s, o: o, done: make(chan struct{}), stop: make(chan struct{}), stats: FlowStats{Answers: map[int]int{}}}
	s.Ledger() // readers start before the first delivery
	go f.run()
	return f
}

func (f *Flow) run() {
	defer close(f.done)
	start := time.Now()
	jobs := make(chan Event)
	var wg sync.WaitGroup
	for w := 0; w < f.o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range jobs {
				f.deliver(ev)
			}
		}()
	}
	// One goroutine decides what is sent and when, so the sequence of events
	// and duplicates is a plain loop.
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 7))
	var sent []Event
	for i := 0; i < f.o.Deliveries && !f.stopped(); i++ {
		if f.o.Rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / f.o.Rate * float64(time.Second)))); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-f.stop:
					t.Stop()
					continue // the loop's condition ends it
				}
			}
		}
		var ev Event
		if len(sent) > 0 && rng.Float64() < f.o.Duplicates {
			ev = sent[rng.IntN(len(sent))]
			f.mu.Lock()
			f.stats.Duplicates++
			f.mu.Unlock()
		} else {
			p := f.o.Providers[len(sent)%len(f.o.Providers)]
			typ := ""
			if len(f.o.EventTypes) > 0 {
				typ = f.o.EventTypes[len(sent)%len(f.o.EventTypes)]
			}
			ev = NewTypedEvent(p, fmt.Sprintf("%s_%d", f.o.ID, len(sent)), typ)
			sent = append(sent, ev)
		}
		f.started.Add(1)
		jobs <- ev
	}
	close(jobs)
	wg.Wait()
	f.mu.Lock()
	f.stats.Deliveries = int(f.started.Load())
	f.stats.Took = time.Since(start)
	f.mu.Unlock()
}

// deliver sends ev until ingest accepts or refuses it, or GiveUp passes.
func (f *Flow) deliver(ev Event) {
	deadline := time.Now().Add(f.o.GiveUp)
	backoff := 50 * time.Millisecond
	for {
		a, err := f.sys.Send(ev)
		f.mu.Lock()
		f.stats.Requests++
		f.stats.Answers[a.Status]++ // 0 when nothing answered
		f.mu.Unlock()
		switch {
		case err == nil && a.Status == 202:
			if f.o.OnAccept != nil {
				f.o.OnAccept(a.Keys, time.Now())
			}
			if a.ReplayOf == "" { // a suppressed replay's keys are never delivered
				f.sys.Ledger().acceptEvent(ev, a.Keys)
			}
			f.accepted.Add(1)
			f.mu.Lock()
			f.stats.Accepted++
			if a.Duplicate || a.ReplayOf != "" {
				f.stats.Replays++
			}
			if !slices.Equal(a.Keys, ev.Keys) {
				f.stats.Mismatched++
			}
			f.mu.Unlock()
			return
		case err == nil && a.Status >= 400 && a.Status < 500 && a.Status != 429 && a.Status != 408:
			f.mu.Lock()
			f.stats.Refused++
			f.mu.Unlock()
			f.sys.tb.Logf("flow: %s %v refused: %d %s", ev.Provider, ev.Keys, a.Status, a.Error)
			return
		}
		if time.Now().After(deadline) {
			f.mu.Lock()
			f.stats.GaveUp++
			f.mu.Unlock()
			return
		}
		f.mu.Lock()
		f.stats.Retried++
		f.mu.Unlock()
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// Stop starts no more deliveries; the ones under way go on until each is
// accepted, refused or given up, as always. A scenario whose steps take as
// long as they take (a broker restart, a service's start on a loaded
// machine) runs its flow with a generous Deliveries and stops it after its
// last step, so its steps always fall under flow.
func (f *Flow) Stop() { f.stopOnce.Do(func() { close(f.stop) }) }

func (f *Flow) stopped() bool {
	select {
	case <-f.stop:
		return true
	default:
		return false
	}
}

// Started is how many deliveries have been started so far.
func (f *Flow) Started() int { return int(f.started.Load()) }

// Accepted is how many deliveries ingest has accepted so far.
func (f *Flow) Accepted() int { return int(f.accepted.Load()) }

// Done is closed when every delivery was accepted, refused or given up.
func (f *Flow) Done() <-chan struct{} { return f.done }

// Wait waits for the flow to finish, logs its stats and fails the test if a
// delivery was refused, given up or answered with the wrong keys.
func (f *Flow) Wait() FlowStats {
	f.sys.tb.Helper()
	<-f.done
	f.mu.Lock()
	st := f.stats
	f.mu.Unlock()
	f.sys.tb.Log(st.String())
	if st.Refused > 0 || st.GaveUp > 0 || st.Mismatched > 0 {
		f.sys.tb.Errorf("flow: %d refused, %d given up, %d answered with other keys: want none", st.Refused, st.GaveUp, st.Mismatched)
	}
	return st
}
