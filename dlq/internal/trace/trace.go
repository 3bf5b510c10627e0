package trace

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/outcome"
)

// ErrUnknownKey is returned for a key the index holds nothing of.
var ErrUnknownKey = errors.New("no record of this key in the topics")

// Trace is a key's whole path: `dlq trace KEY --json`'s last line and GET
// /events/{key}'s answer.
type Trace struct {
	Key      string `json:"key"`
	Provider string `json:"provider"`
	// Now is where the key stands: with one route, where that route
	// stands; with several, where the one furthest from done stands (dead,
	// then waiting, parked, pending), named by Now.Route, or done when
	// every route is; unrouted when the key matched no route; suppressed
	// when ingest took its delivery for a replay (ReplayOf) and nothing
	// else happened to the key; pending before any outcome.
	Now Now `json:"now"`
	// Routes is where each route of the key stands, by route name: every
	// route a step names (an outcome, a tier record, a DLQ entry, a
	// replay). A key that waits for its first outcome has none yet.
	Routes []RouteTrace `json:"routes"`
	// Steps are the events in time order: every one, or the last
	// MaxSteps when there are more (StepsOmitted says how many earlier
	// ones are left out; the counts below count them all).
	Steps        []Event `json:"steps"`
	StepsOmitted int     `json:"steps_omitted,omitempty"`
	// Accepted counts deliveries ingest accepted (the provider's sends and
	// re-sends); Attempts the destination calls made, every route's
	// (outcomes other than duplicate, unrouted and parked); Duplicates the
	// records skipped as duplicates and Unrouted the deliveries that
	// matched no route (both decided for the key, not a route); Replays
	// the replays put on webhooks.raw; DeadLetters the DLQ entries.
	Accepted   int `json:"accepted"`
	Attempts   int `json:"attempts"`
	Duplicates int `json:"duplicates"`
	Unrouted   int `json:"unrouted,omitempty"`
	// Suppressed counts the deliveries of the key ingest suppressed as
	// replays (outcomes suppressed).
	Suppressed  int `json:"suppressed,omitempty"`
	Replays     int `json:"replays"`
	DeadLetters int `json:"dead_letters"`
}

// RouteTrace is where one route of a key stands, and its counts.
type RouteTrace struct {
	Route string `json:"route"`
	// Now is where the route stands after its last step (Now.Route is
	// not set: it is this route).
	Now Now `json:"now"`
	// LastOutcome is the route's latest outcome step (absent before its
	// first).
	LastOutcome *Event `json:"last_outcome,omitempty"`
	Attempts    int    `json:"attempts"`
	Replays     int    `json:"replays"`
	DeadLetters int    `json:"dead_letters"`
}

// Now is where a key, or one route of it, stands after its last step.
type Now struct {
	// State: pending (accepted, no outcome yet), waiting (in a retry tier
	// until DueAt), parked (in its destination's lane, until it has room),
	// done, dead (in the DLQ: Ref, with its Resolution if any), unrouted
	// (the key matched no route: nothing to deliver).
	State string `json:"state"`
	// Route names the route a key's Now is taken from (Trace.Now).
	Route string `json:"route,omitempty"`
	Tier  string `json:"tier,omitempty"`
	DueAt string `json:"due_at,omitempty"`
	// RetryAfter, when waiting: the date the destination's Retry-After
	// named, the reason for the wait (Event.RetryAfter).
	RetryAfter string `json:"retry_after,omitempty"`
	Lane       string `json:"lane,omitempty"`
	// NextAttempt is the attempt a waiting or parked record will be.
	NextAttempt int    `json:"next_attempt,omitempty"`
	Ref         string `json:"ref,omitempty"`
	Since       string `json:"since,omitempty"`
	// Resolution of the DLQ entry, when dead.
	Resolution *store.Resolution `json:"resolution,omitempty"`
	// ReplayOf, when suppressed: the key of the delivery whose signed
	// bytes the key's delivery repeated.
	ReplayOf string `json:"replay_of,omitempty"`
}

// Now states: pending and waiting are the trace's own; the others are the
// outcome statuses of pkg/outcome, the same words.
const (
	StatePending  = "pending"
	StateWaiting  = "waiting"
	StateParked   = outcome.StatusParked
	StateDone     = outcome.StatusDone
	StateDead     = outcome.StatusDead
	StateUnrouted = outcome.StatusUnrouted
	// StateSuppressed: ingest took the key's delivery for a replay of
	// Now.ReplayOf's (the same signed bytes within its provider's
	// replay_window) and produced nothing.
	StateSuppressed = outcome.StatusSuppressed
	// StateHeld: an ordered entity's record waits behind the entity's head
	// on the route (its last outcome's error names the head).
	StateHeld = outcome.StatusHeld
)

// MaxSteps bounds the steps of one trace: a provider re-sending one key
// adds a step each time, and 200 re-sends of a key with a 60 KB event type
// made one answer 24.1 MB (issue 25). The first steps are the ones left
// out: where a key stands is decided by its last.
const MaxSteps = 500

// Trace reads key's path. A key with no entry is ErrUnknownKey.
func (ix *Index) Trace(key string) (Trace, error) {
	evs, err := ix.Events(key)
	if err != nil {
		return Trace{}, err
	}
	if len(evs) == 0 {
		return Trace{}, fmt.Errorf("%q: %w", key, ErrUnknownKey)
	}
	return build(key, evs), nil
}

func stamp(ev Event) string { return ev.At.UTC().Format(time.RFC3339Nano) }

// build folds the events (in time order; each gets its route as
// Event.Route says) into a trace: the steps of the whole key into its counts, each route's
// into that route's place, and those into the key's.
func build(key string, evs []Event) Trace {
	t := Trace{Key: key, Steps: evs, Now: Now{State: StatePending}, Routes: []RouteTrace{}}
	byRoute := map[string][]Event{}
	var lastUnrouted, lastSuppressed *Event
	for i := range evs {
		ev := &evs[i]
		ev.routed()
		if t.Provider == "" {
			t.Provider = ev.Provider
		}
		if ev.Route != "" {
			byRoute[ev.Route] = append(byRoute[ev.Route], *ev)
			continue
		}
		switch {
		case ev.Kind == KindAccepted:
			t.Accepted++
		case ev.Status == outcome.StatusDuplicate:
			t.Duplicates++
		case ev.Status == outcome.StatusUnrouted:
			t.Unrouted++
			lastUnrouted = ev
		case ev.Status == outcome.StatusSuppressed:
			t.Suppressed++
			lastSuppressed = ev
		case ev.Kind == KindOutcome: // unreadable: a call may have been made
			t.Attempts++
		}
	}
	for _, r := range slices.Sorted(maps.Keys(byRoute)) {
		rt := foldRoute(r, byRoute[r])
		t.Routes = append(t.Routes, rt)
		t.Attempts += rt.Attempts
		t.Replays += rt.Replays
		t.DeadLetters += rt.DeadLetters
	}
	switch {
	case len(t.Routes) > 0:
		worst := t.Routes[0]
		for _, rt := range t.Routes[1:] {
			if urgency(rt.Now.State) < urgency(worst.Now.State) {
				worst = rt
			}
		}
		t.Now = worst.Now
		t.Now.Route = worst.Route
	case lastUnrouted != nil:
		t.Now = Now{State: StateUnrouted, Since: stamp(*lastUnrouted)}
	case lastSuppressed != nil && t.Accepted == 0:
		t.Now = Now{State: StateSuppressed, Since: stamp(*lastSuppressed), ReplayOf: lastSuppressed.ReplayOf}
	}
	if n := len(t.Steps) - MaxSteps; n > 0 {
		t.Steps, t.StepsOmitted = t.Steps[n:], n
	}
	return t
}

// urgency orders route states for the key's Now: the state furthest from
// done first (dead needs an operator; done only when every route is).
func urgency(state string) int {
	switch state {
	case StateDead:
		return 0
	case StateWaiting:
		return 1
	case StateParked:
		return 2
	case StatePending:
		return 3
	}
	return 4
}

// foldRoute folds one route's events (in time order) into where it stands.
func foldRoute(route string, evs []Event) RouteTrace {
	rt := RouteTrace{Route: route, Now: Now{State: StatePending}}
	var lastWaiting, lastDead *Event
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case KindReplayed:
			rt.Replays++
		case KindWaiting:
			lastWaiting = ev
		case KindDeadLetter:
			rt.DeadLetters++
			lastDead = ev
			// An entry written without its outcome (by hand, or the
			// outcome past the retention): dead all the same.
			if rt.Now.State != StateDead {
				rt.Now = Now{State: StateDead, Since: stamp(*ev)}
			}
		case KindOutcome:
			last := *ev
			rt.LastOutcome = &last
			switch ev.Status {
			case outcome.StatusParked:
				rt.Now = Now{State: StateParked, Lane: ev.Lane, NextAttempt: ev.Attempt, Since: stamp(*ev)}
				continue
			case outcome.StatusHeld: // no attempt made
				rt.Now = Now{State: StateHeld, Tier: ev.Tier, Since: stamp(*ev)}
				continue
			case outcome.StatusDone:
				rt.Now = Now{State: StateDone, Since: stamp(*ev)}
			case outcome.StatusRetrying:
				rt.Now = Now{State: StateWaiting, Tier: ev.Tier, Since: stamp(*ev)}
			case outcome.StatusDead:
				rt.Now = Now{State: StateDead, Since: stamp(*ev)}
			}
			rt.Attempts++
		}
	}
	switch rt.Now.State {
	case StateWaiting:
		if lastWaiting != nil && lastWaiting.Tier == rt.Now.Tier {
			rt.Now.DueAt, rt.Now.NextAttempt, rt.Now.RetryAfter = lastWaiting.DueAt, lastWaiting.Attempt, lastWaiting.RetryAfter
		}
	case StateDead:
		if lastDead != nil {
			rt.Now.Ref = lastDead.Ref
			rt.Now.Resolution = lastDead.Resolution
		}
	}
	return rt
}
