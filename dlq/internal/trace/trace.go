package trace

import (
	"errors"
	"fmt"
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
	// Now is where the key stands.
	Now Now `json:"now"`
	// Steps are the events in time order: every one, or the last
	// MaxSteps when there are more (StepsOmitted says how many earlier
	// ones are left out; the counts below count them all).
	Steps        []Event `json:"steps"`
	StepsOmitted int     `json:"steps_omitted,omitempty"`
	// Accepted counts deliveries ingest accepted (the provider's sends and
	// re-sends); Attempts the destination calls made (outcomes other than
	// duplicate and parked); Duplicates the records skipped as duplicates;
	// Replays the replays put on webhooks.raw; DeadLetters the DLQ entries.
	Accepted    int `json:"accepted"`
	Attempts    int `json:"attempts"`
	Duplicates  int `json:"duplicates"`
	Replays     int `json:"replays"`
	DeadLetters int `json:"dead_letters"`
}

// Now is where a key stands after its last step.
type Now struct {
	// State: pending (accepted, no outcome yet), waiting (in a retry tier
	// until DueAt), parked (in its destination's lane, until it has room),
	// done, dead (in the DLQ: Ref, with its Resolution if any).
	State string `json:"state"`
	Tier  string `json:"tier,omitempty"`
	DueAt string `json:"due_at,omitempty"`
	Lane  string `json:"lane,omitempty"`
	// NextAttempt is the attempt a waiting or parked record will be.
	NextAttempt int    `json:"next_attempt,omitempty"`
	Ref         string `json:"ref,omitempty"`
	Since       string `json:"since,omitempty"`
	// Resolution of the DLQ entry, when dead.
	Resolution *store.Resolution `json:"resolution,omitempty"`
}

// Now states.
const (
	StatePending = "pending"
	StateWaiting = "waiting"
	StateParked  = "parked"
	StateDone    = "done"
	StateDead    = "dead"
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

// build folds the events (in time order) into a trace.
func build(key string, evs []Event) Trace {
	t := Trace{Key: key, Steps: evs, Now: Now{State: StatePending}}
	var lastWaiting, lastDead *Event
	stamp := func(ev Event) string { return ev.At.UTC().Format(time.RFC3339Nano) }
	for i := range evs {
		ev := &evs[i]
		if t.Provider == "" {
			t.Provider = ev.Provider
		}
		switch ev.Kind {
		case KindAccepted:
			t.Accepted++
		case KindReplayed:
			t.Replays++
		case KindWaiting:
			lastWaiting = ev
		case KindDeadLetter:
			t.DeadLetters++
			lastDead = ev
			// An entry written without its outcome (by hand, or the
			// outcome past the retention): dead all the same.
			if t.Now.State != StateDead {
				t.Now = Now{State: StateDead, Since: stamp(*ev)}
			}
		case KindOutcome:
			switch ev.Status {
			case outcome.StatusDuplicate:
				t.Duplicates++
				continue // a duplicate changes nothing of where the key is
			case outcome.StatusParked:
				t.Now = Now{State: StateParked, Lane: ev.Lane, NextAttempt: ev.Attempt, Since: stamp(*ev)}
				continue
			case outcome.StatusDone:
				t.Now = Now{State: StateDone, Since: stamp(*ev)}
			case outcome.StatusRetrying:
				t.Now = Now{State: StateWaiting, Tier: ev.Tier, Since: stamp(*ev)}
			case outcome.StatusDead:
				t.Now = Now{State: StateDead, Since: stamp(*ev)}
			}
			t.Attempts++
		}
	}
	switch t.Now.State {
	case StateWaiting:
		if lastWaiting != nil && lastWaiting.Tier == t.Now.Tier {
			t.Now.DueAt, t.Now.NextAttempt = lastWaiting.DueAt, lastWaiting.Attempt
		}
	case StateDead:
		if lastDead != nil {
			t.Now.Ref = lastDead.Ref
			t.Now.Resolution = lastDead.Resolution
		}
	}
	if n := len(t.Steps) - MaxSteps; n > 0 {
		t.Steps, t.StepsOmitted = t.Steps[n:], n
	}
	return t
}
