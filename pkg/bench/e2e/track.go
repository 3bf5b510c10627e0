package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// event is one posted key's timeline.
type event struct {
	ph        *phase
	accepted  time.Time // 202 read by the poster
	processed time.Time // the outcome's own time field: the processor took it up
	visible   time.Time // the outcome read by the read_committed consumer
	produced  time.Time // the outcome record's timestamp: the processor's producer took it
	readable  time.Time // the outcome read by the read_uncommitted consumer
	outcomes  int       // ends: every outcome but parked
	parked    int
	status    string // of the first end
}

// phase counts one load phase's keys.
type phase struct {
	name      string
	provider  string    // posted to; "" is stripe
	iso       string    // the isolation phase its keys count in, if any
	ents      *entities // an ordered phase's entities (ordering.go); nil: none
	posted    int
	accepted  int
	seen      int // accepted keys with at least one outcome
	firstPost time.Time
	lastSeen  time.Time
}

// tracker joins what the posters and the outcome reader saw, by key.
type tracker struct {
	mu      sync.Mutex
	events  map[string]*event
	strays  []string // outcomes of keys this run never posted
	readErr error    // why the reader stopped, if it did
	parked  int      // parked outcomes read, every key
}

func newTracker() *tracker { return &tracker{events: map[string]*event{}} }

// posting registers key before its POST is sent, so an outcome can never
// arrive for a key the tracker does not know.
func (t *tracker) posting(ph *phase, key string, now time.Time) *event {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ph.posted == 0 || now.Before(ph.firstPost) {
		ph.firstPost = now
	}
	ph.posted++
	e := &event{ph: ph}
	t.events[key] = e
	return e
}

// accept records the 202.
func (t *tracker) accept(e *event, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.accepted = now
	e.ph.accepted++
	if e.outcomes > 0 {
		e.ph.seen++ // the outcome was read before the poster got to run
	}
}

// outcome records one outcome record read at now. A parked, retrying or
// held outcome is not an end: the record waits in its destination's lane
// or a retry tier, and the outcome of its copy ends it (the latency counts
// to that one).
func (t *tracker) outcome(key, status string, processed, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.events[key]
	if !ok {
		t.strays = append(t.strays, key)
		return
	}
	switch status {
	case "parked":
		e.parked++
		t.parked++
		return
	case "retrying", "held":
		return
	}
	e.outcomes++
	if e.outcomes > 1 {
		return
	}
	e.status, e.processed, e.visible = status, processed, now
	if !e.accepted.IsZero() {
		e.ph.seen++
	}
	if now.After(e.ph.lastSeen) {
		e.ph.lastSeen = now
	}
}

// ends reports whether status ends its key (outcome says which do not).
func ends(status string) bool { return status != "parked" && status != "retrying" && status != "held" }

// stamp records, for key's first end, when the processor produced its
// outcome record (at) and, from the read_uncommitted consumer, when it
// was first readable before its transaction committed (readable, zero
// from the read_committed one).
func (t *tracker) stamp(key, status string, at, readable time.Time) {
	if !ends(status) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.events[key]
	if !ok {
		return
	}
	if e.produced.IsZero() {
		e.produced = at
	}
	if e.readable.IsZero() {
		e.readable = readable
	}
}

// read consumes the outcomes topic into t until ctx ends; the receive time
// of a record is when its fetch returned.
func (t *tracker) read(ctx context.Context, cl *kgo.Client) { t.readAs(ctx, cl, false) }

// readUncommitted consumes the outcomes topic read_uncommitted: when each
// end's record could first be read, its transaction still open.
func (t *tracker) readUncommitted(ctx context.Context, cl *kgo.Client) { t.readAs(ctx, cl, true) }

func (t *tracker) readAs(ctx context.Context, cl *kgo.Client, uncommitted bool) {
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
		})
		if ferr != nil {
			t.mu.Lock()
			t.readErr = ferr
			t.mu.Unlock()
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			var o struct {
				Key    string `json:"key"`
				Status string `json:"status"`
				Time   string `json:"time"`
			}
			if err := json.Unmarshal(r.Value, &o); err != nil {
				if !uncommitted {
					t.outcome(string(r.Key), "unreadable", time.Time{}, now)
				}
				return
			}
			if uncommitted {
				t.stamp(o.Key, o.Status, r.Timestamp, now)
				return
			}
			at, _ := headers.ParseTime(o.Time)
			t.stamp(o.Key, o.Status, r.Timestamp, time.Time{})
			t.outcome(o.Key, o.Status, at, now)
		})
	}
}

// wait returns once every accepted key of ph has an outcome, or fails after
// timeout (or when the reader stopped).
func (t *tracker) wait(ctx context.Context, ph *phase, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		seen, accepted, rerr := ph.seen, ph.accepted, t.readErr
		t.mu.Unlock()
		switch {
		case rerr != nil:
			return fmt.Errorf("outcome reader: %w", rerr)
		case seen >= accepted:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%s: %d of %d accepted keys have an outcome %s after the last POST", ph.name, seen, accepted, timeout)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// latencies of ph's keys: 202 -> outcome visible, 202 -> processor took
// it up, taken up -> visible.
func (t *tracker) latencies(ph *phase) (total, pickup, commit []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.events {
		if e.ph != ph || e.outcomes == 0 || e.accepted.IsZero() {
			continue
		}
		total = append(total, e.visible.Sub(e.accepted))
		if !e.processed.IsZero() {
			pickup = append(pickup, e.processed.Sub(e.accepted))
			commit = append(commit, e.visible.Sub(e.processed))
		}
	}
	return total, pickup, commit
}

// splits of ph's keys' 202 -> visible: 202 -> taken up, taken up -> their
// outcome produced, produced -> readable uncommitted, readable -> visible
// committed (keys the read_uncommitted consumer saw); index i is one key
// in all four.
func (t *tracker) splits(ph *phase) (taken, produce, readable, committed []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.events {
		if e.ph != ph || e.outcomes == 0 || e.accepted.IsZero() || e.processed.IsZero() || e.produced.IsZero() || e.readable.IsZero() {
			continue
		}
		taken = append(taken, e.processed.Sub(e.accepted))
		produce = append(produce, e.produced.Sub(e.processed))
		readable = append(readable, e.readable.Sub(e.produced))
		committed = append(committed, e.visible.Sub(e.readable))
	}
	return taken, produce, readable, committed
}

// verify checks that every key posted was accepted and has exactly one
// outcome, `done`, and that no outcome names a key this run did not post.
func (t *tracker) verify() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var bad []string
	for k, e := range t.events {
		switch {
		case e.accepted.IsZero():
			bad = append(bad, fmt.Sprintf("%s: posted, never accepted (%d outcomes)", k, e.outcomes))
		case e.outcomes != 1:
			bad = append(bad, fmt.Sprintf("%s: %d outcomes, want exactly 1", k, e.outcomes))
		case e.status != "done":
			bad = append(bad, fmt.Sprintf("%s: outcome %q, want done", k, e.status))
		}
	}
	for _, k := range t.strays {
		bad = append(bad, fmt.Sprintf("%s: outcome of a key this run never posted", k))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return 0, fmt.Errorf("%d keys break exactly-once (first %d):\n  %s", len(bad), min(len(bad), 10), strings.Join(bad[:min(len(bad), 10)], "\n  "))
	}
	return len(t.events), nil
}

// parkedCount is how many parked outcomes were read.
func (t *tracker) parkedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.parked
}

// keys lists every key posted.
func (t *tracker) keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.events))
	for k := range t.events {
		out = append(out, k)
	}
	return out
}

// readUncommitted reads the outcomes read_uncommitted beside readOutcomes:
// when each could be read before its transaction committed, which splits
// taken up -> visible into the processor's part and the commit's.
func (b *bench) readUncommitted(ctx context.Context) (stop func(), err error) {
	return b.followOutcomes(ctx, b.track.readUncommitted)
}
