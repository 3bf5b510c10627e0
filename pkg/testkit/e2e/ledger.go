package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/schemas"
)

// Ledger is the account of one run: every key ingest answered 202 for,
// against what the system did with it. After the run, Settle proves the
// promises hookline makes:
//
//   - lost = 0: every accepted key has a terminal outcome (done or dead);
//   - doubled = 0: no key is done twice, and no delivery of a key ends twice
//     (a key ends once from ingest or the retry tiers, plus at most once per
//     replay id);
//   - every dead outcome has its one DLQ entry, and every DLQ entry its dead
//     outcome;
//   - destination calls per key stay within one per processed record plus
//     the repeats a crash is allowed.
//
// It reads webhooks.outcomes and webhooks.dlq read_committed from the start,
// as an analyst would, and the destination's own log of calls.
type Ledger struct {
	sys *System
	cl  *kgo.Client
	adm *kadm.Client

	mu       sync.Mutex
	accepted map[string]int // key -> 202 answers naming it
	keys     map[string]*account
	dupes    int // duplicate outcomes
	outcomes int // outcome records read
	dlq      int // DLQ records read
}

// account is what happened to one key.
type account struct {
	done, dead, retrying, duplicate, parked int
	// ends counts terminal outcomes (done, dead) of deliveries from ingest
	// and their retries; replayEnds those of each replay id and its retries.
	ends       int
	replayEnds map[string]int
	last       string // status of the latest terminal outcome
	dlq        int    // DLQ entries
}

// Ledger returns the system's ledger, started on first use.
func (s *System) Ledger() *Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ledger == nil {
		cl := s.committedReader(s.Names.Outcomes, s.Names.DLQ)
		s.ledger = &Ledger{sys: s, cl: cl, adm: kadm.NewClient(cl), accepted: map[string]int{}, keys: map[string]*account{}}
	}
	return s.ledger
}

// Accept enters keys that ingest answered 202 for.
func (l *Ledger) Accept(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		l.accepted[k]++
	}
}

// Accepted is how many distinct keys were accepted so far.
func (l *Ledger) Accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

func (l *Ledger) account(key string) *account {
	a := l.keys[key]
	if a == nil {
		a = &account{}
		l.keys[key] = a
	}
	return a
}

// poll reads what is committed on outcomes and the DLQ, for at most wait.
func (l *Ledger) poll(tb testing.TB, wait time.Duration) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fs := l.cl.PollFetches(ctx)
	n := 0
	l.mu.Lock()
	defer l.mu.Unlock()
	fs.EachRecord(func(r *kgo.Record) {
		n++
		l.add(tb, r)
	})
	return n
}

// add enters one record of outcomes or the DLQ; l.mu is held.
func (l *Ledger) add(tb testing.TB, r *kgo.Record) {
	if r.Topic == l.sys.Names.DLQ {
		l.dlq++
		l.account(string(r.Key)).dlq++
		if o, _ := headers.Get(r, headers.Origin); o == "" {
			tb.Errorf("DLQ record %d:%d of %s has no %s header", r.Partition, r.Offset, r.Key, headers.Origin)
		}
		return
	}
	l.outcomes++
	if err := schemas.Validate(schemas.Outcome, r.Value); err != nil {
		tb.Errorf("outcome at %d:%d fails its schema: %v\n%s", r.Partition, r.Offset, err, r.Value)
		return
	}
	o, err := outcome.Decode(r.Value)
	if err != nil {
		tb.Errorf("outcome at %d:%d: %v", r.Partition, r.Offset, err)
		return
	}
	a := l.account(o.Key)
	switch o.Status {
	case outcome.StatusDuplicate:
		a.duplicate++
		l.dupes++
		return
	case outcome.StatusRetrying:
		a.retrying++
		return
	case outcome.StatusParked:
		// Waiting in its destination's lane: its lane copy ends it.
		a.parked++
		return
	case outcome.StatusDone:
		a.done++
	case outcome.StatusDead:
		a.dead++
	}
	a.last = o.Status
	// A replayed delivery keeps its replay id through the retry tiers (its
	// origin is then retry), so the id, not the origin, says which
	// delivery ended.
	if o.ReplayID != "" {
		if a.replayEnds == nil {
			a.replayEnds = map[string]int{}
		}
		a.replayEnds[o.ReplayID]++
	} else {
		a.ends++
	}
}

// KeyOutcomes counts the outcomes read so far for one key, by status.
type KeyOutcomes struct {
	Done, Dead, Retrying, Duplicate, Parked int
}

// Parked counts the parked outcomes read so far, every key.
func (l *Ledger) Parked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.keys {
		n += a.parked
	}
	return n
}

// Outcomes returns what the ledger has read for key so far (call it after
// Settle for the whole account).
func (l *Ledger) Outcomes(key string) KeyOutcomes {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.keys[key]
	if a == nil {
		return KeyOutcomes{}
	}
	return KeyOutcomes{Done: a.done, Dead: a.dead, Retrying: a.retrying, Duplicate: a.duplicate, Parked: a.parked}
}

// Keys returns every accepted key so far, sorted.
func (l *Ledger) Keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.accepted))
}

// Tally is the ledger's verdict.
type Tally struct {
	Accepted   int // distinct keys answered 202
	Done       int // accepted keys whose latest end is done
	Dead       int // accepted keys whose latest end is dead
	Duplicates int // duplicate outcomes: deliveries dropped by the dedup table
	Lost       int // accepted keys with no end
	Doubled    int // keys done twice, or a delivery that ended twice
	DLQ        int // DLQ entries
	DLQWrong   int // keys whose DLQ entries do not match their dead outcomes one to one
	Calls      int // destination calls
	ExtraCalls int // calls beyond one per processed record (done, dead, retrying)
	Uncalled   int // keys done with a destination that was never called
	Unasked    int // keys with outcomes that no 202 named (a 503'd request that still got written)
	// Examples name a few keys of each kind of failure.
	Examples []string
	// Settled is when Settle first saw every accepted key ended and raw
	// consumed (to within its one-second polls); zero when it never did.
	Settled time.Time
}

// String is the ledger's one line.
func (t Tally) String() string {
	return fmt.Sprintf("ledger: accepted=%d done=%d dead=%d duplicates=%d lost=%d doubled=%d | dlq=%d dlq-mismatch=%d calls=%d extra-calls=%d uncalled=%d unasked=%d",
		t.Accepted, t.Done, t.Dead, t.Duplicates, t.Lost, t.Doubled, t.DLQ, t.DLQWrong, t.Calls, t.ExtraCalls, t.Uncalled, t.Unasked)
}

// SettleOptions say how long to wait and what a run may allow itself.
type SettleOptions struct {
	// Timeout bounds the wait for every accepted key to end (default 3m).
	Timeout time.Duration
	// ExtraCalls is how many destination calls beyond one per processed
	// record the run may make: a processor killed mid-batch repeats the
	// calls of its open transaction (HOOKLINE_BATCH_MAX_RECORDS per kill).
	ExtraCalls int
	// AllDone requires every accepted key to end done (after a replay fixed
	// what was dead).
	AllDone bool
}

// Settle waits until every accepted key has ended and the processor has
// consumed all of webhooks.raw, then checks the ledger, logs its line and
// fails the test on any loss, double, DLQ mismatch or call over the bound.
func (l *Ledger) Settle(tb testing.TB, o SettleOptions) Tally {
	tb.Helper()
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	start := time.Now()
	deadline, report := start.Add(o.Timeout), start.Add(10*time.Second)
	settled, at := false, time.Time{}
	for !settled && time.Now().Before(deadline) {
		l.poll(tb, time.Second)
		pending, lag := l.pending(o.AllDone), l.rawLag()
		settled = pending == 0 && lag == 0
		if settled {
			at = time.Now()
		}
		if !settled && time.Now().After(report) {
			tb.Logf("ledger: %s: %d of %d accepted keys not ended yet, raw lag %d, %d outcomes read",
				time.Since(start).Round(time.Second), pending, l.Accepted(), lag, l.outcomeCount())
			report = time.Now().Add(10 * time.Second)
		}
	}
	if settled {
		// The processor commits its offsets in the transaction that writes
		// the outcomes: with no lag, everything is committed. Read on until
		// a poll brings nothing new.
		for l.poll(tb, time.Second) > 0 {
		}
	}
	t := l.tally(o)
	t.Settled = at
	tb.Log(t.String())
	if !settled {
		tb.Errorf("ledger: not settled within %s (raw lag %d)", o.Timeout, l.rawLag())
	}
	if t.Lost > 0 || t.Doubled > 0 || t.DLQWrong > 0 || t.Uncalled > 0 || t.ExtraCalls > o.ExtraCalls {
		tb.Errorf("ledger: lost=%d doubled=%d dlq-mismatch=%d uncalled=%d extra-calls=%d (bound %d); want 0 and within the bound; e.g. %s",
			t.Lost, t.Doubled, t.DLQWrong, t.Uncalled, t.ExtraCalls, o.ExtraCalls, strings.Join(t.Examples, ", "))
	}
	return t
}

// pending counts the accepted keys without a terminal outcome (without
// done, when allDone).
func (l *Ledger) pending(allDone bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k := range l.accepted {
		a := l.keys[k]
		if a == nil || a.last == "" || (allDone && a.last != "done") {
			n++
		}
	}
	return n
}

func (l *Ledger) outcomeCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcomes
}

// rawLag is what the processor group has yet to commit on webhooks.raw
// (-1 when it cannot be read).
func (l *Ledger) rawLag() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw := l.sys.Names.Raw
	l.cl.PurgeTopicsFromClient(raw)
	ends, err := l.adm.ListEndOffsets(ctx, raw)
	if err != nil || ends.Error() != nil {
		return -1
	}
	commits, err := l.adm.FetchOffsets(ctx, l.sys.Names.Group(topics.GroupProcessor))
	if err != nil {
		return -1
	}
	var lag int64
	ends.Each(func(e kadm.ListedOffset) {
		c, ok := commits.Lookup(raw, e.Partition)
		if !ok || c.Err != nil {
			lag += e.Offset
			return
		}
		lag += max(0, e.Offset-c.At)
	})
	return lag
}

func (l *Ledger) tally(o SettleOptions) Tally {
	calls := l.sys.Dest.AllCalls()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := Tally{Accepted: len(l.accepted), Duplicates: l.dupes, DLQ: l.dlq}
	example := func(kind, key string) {
		if len(t.Examples) < 8 {
			t.Examples = append(t.Examples, kind+" "+key)
		}
	}
	keys := make([]string, 0, len(l.keys)+len(l.accepted))
	for k := range l.keys {
		keys = append(keys, k)
	}
	for k := range l.accepted {
		if l.keys[k] == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := l.keys[k]
		if a == nil {
			a = &account{}
		}
		if l.accepted[k] == 0 {
			t.Unasked++
		}
		switch {
		case a.last == "" && l.accepted[k] > 0:
			t.Lost++
			example("lost", k)
		case a.last == "done" && l.accepted[k] > 0:
			t.Done++
		case a.last == "dead" && l.accepted[k] > 0:
			t.Dead++
		}
		doubled := a.done > 1 || a.ends > 1
		for _, n := range a.replayEnds {
			doubled = doubled || n > 1
		}
		if doubled {
			t.Doubled++
			example("doubled", k)
		}
		if a.dlq != a.dead {
			t.DLQWrong++
			example(fmt.Sprintf("dlq-mismatch (%d entries, %d dead)", a.dlq, a.dead), k)
		}
		c := calls[k]
		t.Calls += c
		t.ExtraCalls += max(0, c-(a.done+a.dead+a.retrying))
		if a.done > 0 && c == 0 && !strings.HasPrefix(k, "outcomes:") {
			t.Uncalled++
			example("uncalled", k)
		}
	}
	return t
}
