package decide

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
)

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later  = t0.Add(time.Hour) // a live state's expiry
	ingest = Arrival{Origin: headers.OriginIngest, Attempt: 1, Provider: "stripe", Now: t0}
)

func mustSchedule(tb testing.TB, s string) retry.Schedule {
	tb.Helper()
	sch, err := retry.ParseSchedule(s)
	if err != nil {
		tb.Fatal(err)
	}
	return sch
}

func retryAt(n int) Arrival {
	return Arrival{Origin: headers.OriginRetry, Attempt: n, Provider: "stripe", Now: t0}
}

func replayOf(id string) Arrival {
	return Arrival{Origin: headers.OriginReplay, Attempt: 1, ReplayID: id, Provider: "stripe", Now: t0}
}

func backfillOf(id string, again bool) Arrival {
	return Arrival{Origin: headers.OriginBackfill, Attempt: 1, ReplayID: id, Again: again, Provider: "stripe", Now: t0}
}

// TestAdmit covers every cell of the table in DESIGN §6, and the edges around
// it.
func TestAdmit(t *testing.T) {
	states := map[string]*State{
		"none":              nil,
		"expired":           {Status: StatusDead, ExpiresAt: t0}, // expiry is inclusive
		"expired-retrying":  {Status: StatusRetrying, NextAttempt: 2, ExpiresAt: t0.Add(-time.Second)},
		"expired-done":      {Status: StatusDone, ExpiresAt: t0.Add(-time.Hour)},
		"retrying-match":    {Status: StatusRetrying, NextAttempt: 3, ExpiresAt: later},
		"retrying-mismatch": {Status: StatusRetrying, NextAttempt: 2, ExpiresAt: later},
		"done":              {Status: StatusDone, ExpiresAt: later},
		"dead":              {Status: StatusDead, ExpiresAt: later, ReplayIDs: []string{"dlq:0:1"}},
		"dead-seen-replay":  {Status: StatusDead, ExpiresAt: later, ReplayIDs: []string{"dlq:0:1", "dlq:4:7"}},
		"done-backfilled":   {Status: StatusDone, ExpiresAt: later, ReplayIDs: []string{"backfill:b1"}},
		"never-expires":     {Status: StatusDone},
		"bad-status":        {Status: "zombie", ExpiresAt: later},
		"parked":            {Status: StatusParked, NextAttempt: 3, ExpiresAt: later},
		"expired-parked":    {Status: StatusParked, NextAttempt: 3, ExpiresAt: t0},
	}
	replay := replayOf("dlq:4:7")
	backfill, again := backfillOf("backfill:b1", false), backfillOf("backfill:b1", true)
	fromLane := func(a Arrival) Arrival { a.FromLane = true; return a }
	tests := []struct {
		state   string
		a       Arrival
		process bool
		why     string
	}{
		// none (or expired): process every origin.
		{"none", ingest, true, WhyNew},
		{"none", retryAt(3), true, WhyNew},
		{"none", replay, true, WhyNew},
		{"expired", ingest, true, WhyExpired},
		{"expired", retryAt(3), true, WhyExpired},
		{"expired", replay, true, WhyExpired},
		{"expired-retrying", retryAt(3), true, WhyExpired},
		{"expired-done", ingest, true, WhyExpired},
		// retrying, expects n.
		{"retrying-match", ingest, false, WhyDuplicate},
		{"retrying-match", retryAt(3), true, WhyNextAttempt},
		{"retrying-match", replay, false, WhyRetryPending},
		{"retrying-mismatch", ingest, false, WhyDuplicate},
		{"retrying-mismatch", retryAt(3), false, WhyStaleAttempt},
		{"retrying-mismatch", replay, false, WhyRetryPending},
		// parked: everything waits behind the parked copy, which is
		// processed when it comes back from its lane with its attempt.
		{"parked", ingest, false, WhyParkedPending},
		{"parked", retryAt(3), false, WhyParkedPending},
		{"parked", replay, false, WhyParkedPending},
		{"parked", fromLane(retryAt(3)), true, WhyUnparked},
		{"parked", fromLane(retryAt(2)), false, WhyStaleAttempt},
		{"expired-parked", ingest, true, WhyExpired},
		{"expired-parked", fromLane(retryAt(3)), false, WhyParkedPending},
		// a lane copy read again once the state moved on is a skip.
		{"done", fromLane(ingest), false, WhyParkedPending},
		{"none", fromLane(ingest), false, WhyParkedPending},
		// done: skip all.
		{"done", ingest, false, WhyDuplicate},
		{"done", retryAt(3), false, WhyAlreadyDone},
		{"done", replay, false, WhyAlreadyDone},
		{"never-expires", ingest, false, WhyDuplicate},
		// dead: process once per replay id.
		{"dead", ingest, false, WhyDuplicate},
		{"dead", retryAt(3), false, WhyAlreadyDead},
		{"dead", replay, true, WhyReplay},
		{"dead", replayOf(""), false, WhyReplayWithoutID},
		{"dead-seen-replay", ingest, false, WhyDuplicate},
		{"dead-seen-replay", retryAt(3), false, WhyAlreadyDead},
		{"dead-seen-replay", replay, false, WhyReplaySeen},
		// Malformed input is never processed.
		{"none", Arrival{Origin: "Retry", Attempt: 1, Now: t0}, false, WhyUnknownOrigin},
		{"done", Arrival{Attempt: 1, Now: t0}, false, WhyUnknownOrigin},
		{"bad-status", retryAt(3), false, WhyUnknownStatus},
		// backfill: a route without a live state gets it; in mode again a
		// done route gets it once per backfill id; nothing else.
		{"none", backfill, true, WhyNew},
		{"none", again, true, WhyNew},
		{"expired-done", backfill, true, WhyExpired},
		{"done", backfill, false, WhyAlreadyDone},
		{"done", again, true, WhyAgain},
		{"done", backfillOf("", true), false, WhyAlreadyDone},
		{"done-backfilled", again, false, WhyReplaySeen},
		{"done-backfilled", backfillOf("backfill:b2", true), true, WhyAgain},
		{"retrying-match", again, false, WhyRetryPending},
		{"dead", again, false, WhyAlreadyDead},
		{"parked", again, false, WhyParkedPending},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s#%d%s", tt.state, tt.a.Origin, tt.a.Attempt, tt.a.ReplayID), func(t *testing.T) {
			st, ok := states[tt.state]
			if !ok {
				t.Fatalf("no state %q", tt.state)
			}
			process, why := Admit(st, tt.a)
			if process != tt.process || why != tt.why {
				t.Errorf("Admit = %v, %q; want %v, %q", process, why, tt.process, tt.why)
			}
		})
	}
}

// The effects of each way a processed record ends (Step's table).
func done() []Effect {
	return []Effect{{Kind: ToChangelog}, {Kind: ToOutcomes, Status: StatusDone}}
}

func toTier(tier, attempt int) []Effect {
	return []Effect{{Kind: ToChangelog}, {Kind: ToTier, Tier: tier, Attempt: attempt}, {Kind: ToOutcomes, Status: StatusRetrying, Tier: tier}}
}

func toDLQ(reason string, attempt int) []Effect {
	return []Effect{{Kind: ToChangelog}, {Kind: ToDLQ, DeadReason: reason, Attempt: attempt}, {Kind: ToOutcomes, Status: StatusDead, DeadReason: reason}}
}

func parked() []Effect {
	return []Effect{{Kind: ToChangelog}, {Kind: ToLane}, {Kind: ToOutcomes, Status: StatusParked}}
}

// stepRow is a row of Step's table (TestStep); TestSettleStepRows takes
// each through a plan and its settle.
type stepRow struct {
	name    string
	st      *State
	a       Arrival
	result  Result
	ttl     time.Duration
	want    State
	effects []Effect
}

// stepSchedule is the schedule of stepRows: 1m 5m 15m 1h 6h.
var stepSchedule = retry.DefaultSchedule()

// stepRows are the rows of Step's table: success, a retry tier, the DLQ
// exhausted or permanent, parking when the destination was not called,
// held, invalid and refused; with the TTL, first-seen and replay-id rules
// around them.
func stepRows() []stepRow {
	const ttl = 24 * time.Hour
	day := t0.Add(ttl)
	firstSeen := t0.Add(-time.Minute)
	week := t0.Add(7 * 24 * time.Hour)
	boom := errors.New("502 bad gateway")
	paused, breakerOpen := errors.New("destination paused by an operator"), errors.New("circuit breaker open")
	dead := &State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen.Add(-time.Hour), UpdatedAt: t0.Add(-time.Minute), ExpiresAt: later, ReplayIDs: []string{"dlq:0:1"}}
	withSeen := func(a Arrival, t time.Time) Arrival { a.FirstSeenAt = t; return a }
	withNow := func(a Arrival, t time.Time) Arrival { a.Now = t; return a }
	return []stepRow{
		{
			name: "success", a: withSeen(ingest, firstSeen), ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: done(),
		},
		{
			name: "first seen defaults to now", a: ingest, ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: t0, UpdatedAt: t0, ExpiresAt: day},
			effects: done(),
		},
		{
			name: "retryable goes to tier n", a: withSeen(ingest, firstSeen), result: Answered(boom, 0), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toTier(1, 2),
		},
		{
			name: "retry-after picks a longer tier", st: &State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, ExpiresAt: later},
			a: retryAt(2), result: Answered(retry.RetryAfter(boom, 10*time.Minute), 0), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 3, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toTier(3, 3),
		},
		{
			name: "last tier", a: withSeen(retryAt(5), firstSeen), result: Answered(boom, 0), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 6, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toTier(5, 6),
		},
		{
			name: "not called: parked expecting the same attempt", st: &State{Status: StatusRetrying, NextAttempt: 4, Provider: "stripe", FirstSeenAt: firstSeen, ExpiresAt: later},
			a: retryAt(4), result: ParkedFor(paused), ttl: ttl,
			want:    State{Status: StatusParked, NextAttempt: 4, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: week},
			effects: parked(),
		},
		{
			name: "breaker refusing the first attempt parks attempt 1", a: withSeen(ingest, firstSeen), result: ParkedFor(breakerOpen), ttl: ttl,
			want:    State{Status: StatusParked, NextAttempt: 1, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: week},
			effects: parked(),
		},
		{
			name: "parked replay expects attempt 1, its id added only when its lane copy is decided", st: dead, a: func() Arrival { a := replayOf("dlq:3:9"); a.Attempt = 5; return a }(), result: ParkedFor(paused), ttl: ttl,
			want:    State{Status: StatusParked, NextAttempt: 1, Provider: "stripe", FirstSeenAt: dead.FirstSeenAt, UpdatedAt: t0, ExpiresAt: week, ReplayIDs: []string{"dlq:0:1"}},
			effects: parked(),
		},
		{
			name: "a ttl longer than the lane's week keeps a parked key as long", a: withSeen(ingest, firstSeen), result: ParkedFor(paused), ttl: 30 * 24 * time.Hour,
			want:    State{Status: StatusParked, NextAttempt: 1, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: t0.Add(30 * 24 * time.Hour)},
			effects: parked(),
		},
		{
			name: "parked from its lane again (breaker still refusing)", st: &State{Status: StatusParked, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, ExpiresAt: later},
			a: func() Arrival { a := retryAt(2); a.FromLane = true; return a }(), result: ParkedFor(breakerOpen), ttl: ttl,
			want:    State{Status: StatusParked, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: week},
			effects: parked(),
		},
		{
			name: "exhausted", a: withSeen(retryAt(6), firstSeen), result: Answered(boom, 0), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toDLQ(headers.DeadExhausted, 6),
		},
		{
			name: "permanent", a: withSeen(ingest, firstSeen), result: Answered(fmt.Errorf("deliver: %w", retry.Permanent(boom)), 0), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toDLQ(headers.DeadPermanent, 1),
		},
		{
			name: "invalid payload: dead without a call, not parked", a: withSeen(ingest, firstSeen), result: InvalidPayload("schema order.json: at '/id': got number, want string"), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toDLQ(headers.DeadInvalidPayload, 1),
		},
		{
			name: "transform failed: dead without a call, on a retry too", a: withSeen(retryAt(2), firstSeen), result: TransformFailed(errors.New("transform t.js: time limit reached (100ms)")), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toDLQ(headers.DeadTransformFailed, 2),
		},
		{
			name: "skipped by its transform: done, nothing called", a: withSeen(ingest, firstSeen), result: Result{Kind: ResultSkipped}, ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: []Effect{{Kind: ToChangelog}, {Kind: ToOutcomes, Status: StatusDone, Skipped: true}},
		},
		{
			name: "refused as a route gone: permanent, dead without a call", a: withSeen(retryAt(3), firstSeen), result: Refused(retry.Permanent(errors.New("route gone"))), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toDLQ(headers.DeadPermanent, 3),
		},
		{
			name: "refused as a provider not known: retried like a failed call", a: withSeen(ingest, firstSeen), result: Refused(errors.New("provider not in the file")), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day},
			effects: toTier(1, 2),
		},
		{
			name: "replay found invalid again: dead, its id added", st: dead, a: replayOf("dlq:3:9"), result: InvalidPayload("still invalid"), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: dead.FirstSeenAt, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"dlq:0:1", "dlq:3:9"}},
			effects: toDLQ(headers.DeadInvalidPayload, 1),
		},
		{
			name: "short ttl outlives the parked retry", a: withSeen(retryAt(5), firstSeen), result: Answered(boom, 0), ttl: time.Hour,
			want:    State{Status: StatusRetrying, NextAttempt: 6, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: t0.Add(12 * time.Hour)},
			effects: toTier(5, 6),
		},
		{
			name: "zero ttl is the default", a: withSeen(ingest, firstSeen),
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: t0.Add(DefaultTTL)},
			effects: done(),
		},
		{
			name: "replay on dead succeeds: first seen kept, id added", st: dead, a: replayOf("dlq:3:9"), ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: dead.FirstSeenAt, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"dlq:0:1", "dlq:3:9"}},
			effects: done(),
		},
		{
			name: "replay on dead fails: attempts start again at 1", st: dead, a: replayOf("dlq:3:9"), result: Answered(boom, 0), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: dead.FirstSeenAt, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"dlq:0:1", "dlq:3:9"}},
			effects: toTier(1, 2),
		},
		{
			name: "replay copying a late attempt header still starts at 1", st: dead, a: func() Arrival { a := replayOf("dlq:3:9"); a.Attempt = 6; return a }(), result: Answered(boom, 0), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: dead.FirstSeenAt, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"dlq:0:1", "dlq:3:9"}},
			effects: toTier(1, 2),
		},
		{
			name: "backfill again of a done key succeeds: its id added", st: &State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, ExpiresAt: later, ReplayIDs: []string{"dlq:0:1"}},
			a: backfillOf("backfill:b1", true), ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"dlq:0:1", "backfill:b1"}},
			effects: done(),
		},
		{
			name: "backfill to a route without state fails: attempt 1, then the first tier", a: withSeen(func() Arrival { a := backfillOf("backfill:b1", false); a.Attempt = 4; return a }(), firstSeen), result: Answered(boom, 0), ttl: ttl,
			want:    State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"backfill:b1"}},
			effects: toTier(1, 2),
		},
		{
			name: "retry of a replay carries the ids", st: &State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: firstSeen, ExpiresAt: later, ReplayIDs: []string{"dlq:3:9"}},
			a: retryAt(2), result: Answered(retry.Permanent(boom), 0), ttl: ttl,
			want:    State{Status: StatusDead, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0, ExpiresAt: day, ReplayIDs: []string{"dlq:3:9"}},
			effects: toDLQ(headers.DeadPermanent, 2),
		},
		{
			name: "expired old state is none", st: dead, a: withSeen(withNow(ingest, later), firstSeen), ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: later, ExpiresAt: later.Add(ttl)},
			effects: done(),
		},
		{
			name: "times in UTC to the millisecond", a: withSeen(withNow(ingest, t0.Add(1500*time.Microsecond).In(time.FixedZone("X", 7200))), firstSeen.Add(time.Nanosecond)), ttl: ttl,
			want:    State{Status: StatusDone, Provider: "stripe", FirstSeenAt: firstSeen, UpdatedAt: t0.Add(time.Millisecond), ExpiresAt: day.Add(time.Millisecond)},
			effects: done(),
		},
	}
}

// TestStep covers every row of Step's table (stepRows).
func TestStep(t *testing.T) {
	for _, tt := range stepRows() {
		t.Run(tt.name, func(t *testing.T) {
			got, effects := Step(tt.st, tt.a, tt.result, Policy{Schedule: stepSchedule, TTL: tt.ttl})
			if b, err := Encode(got); err != nil {
				t.Errorf("Apply made a state the changelog refuses: %v", err)
			} else if back, err := Decode(b); err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("state does not survive Encode/Decode: %+v, %v", back, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("state\n got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(effects, tt.effects) {
				t.Errorf("effects\n got %+v\nwant %+v", effects, tt.effects)
			}
		})
	}
}

func TestStepDoesNotAliasReplayIDs(t *testing.T) {
	old := &State{Status: StatusDead, Provider: "stripe", ExpiresAt: later, ReplayIDs: make([]string, 1, 8)}
	old.ReplayIDs[0] = "dlq:0:1"
	a, _ := Step(old, replayOf("dlq:0:2"), Answered(nil, 0), Policy{Schedule: retry.DefaultSchedule(), TTL: time.Hour})
	b, _ := Step(old, replayOf("dlq:0:3"), Answered(nil, 0), Policy{Schedule: retry.DefaultSchedule(), TTL: time.Hour})
	if a.ReplayIDs[1] != "dlq:0:2" || b.ReplayIDs[1] != "dlq:0:3" || len(old.ReplayIDs) != 1 {
		t.Errorf("states share replay ids: %v %v %v", a.ReplayIDs, b.ReplayIDs, old.ReplayIDs)
	}
}

func TestReplayIDBound(t *testing.T) {
	st := &State{Status: StatusDead, Provider: "stripe", ExpiresAt: later}
	for i := range MaxReplayIDs {
		st.ReplayIDs = append(st.ReplayIDs, fmt.Sprintf("dlq:0:%d", i))
	}
	newest := replayOf("dlq:1:0")
	if process, _ := Admit(st, newest); !process {
		t.Fatal("a new replay id on a dead key must be processed")
	}
	next, _ := Step(st, newest, Answered(retry.Permanent(errors.New("still broken")), 0), Policy{Schedule: retry.DefaultSchedule(), TTL: time.Hour})
	if len(next.ReplayIDs) != MaxReplayIDs || next.ReplayIDs[0] != "dlq:0:1" || next.ReplayIDs[MaxReplayIDs-1] != "dlq:1:0" {
		t.Fatalf("replay ids = %v, want the last %d with the newest at the end", next.ReplayIDs, MaxReplayIDs)
	}
	// What the bound costs: the oldest id is forgotten, so replaying it again
	// is processed again; a recent one is still refused.
	if process, why := Admit(&next, replayOf("dlq:0:0")); !process {
		t.Errorf("dropped id: Admit = %v, %q; want processed", process, why)
	}
	if process, why := Admit(&next, replayOf("dlq:0:1")); process || why != WhyReplaySeen {
		t.Errorf("kept id: Admit = %v, %q; want skipped as %q", process, why, WhyReplaySeen)
	}
	// An id already present is not added twice.
	again, _ := Step(&next, replayOf("dlq:1:0"), Answered(nil, 0), Policy{Schedule: retry.DefaultSchedule(), TTL: time.Hour})
	if !slices.Equal(again.ReplayIDs, next.ReplayIDs) {
		t.Errorf("replay ids changed on a seen id: %v", again.ReplayIDs)
	}
}

func TestExpiry(t *testing.T) {
	st, _ := Step(nil, ingest, Answered(nil, 0), Policy{Schedule: retry.DefaultSchedule(), TTL: time.Hour})
	for _, tt := range []struct {
		at      time.Time
		process bool
	}{
		{t0.Add(time.Hour - time.Millisecond), false},
		{t0.Add(time.Hour), true},
		{t0.Add(48 * time.Hour), true},
	} {
		a := ingest
		a.Now = tt.at
		if process, _ := Admit(&st, a); process != tt.process {
			t.Errorf("ingest at %v: process = %v, want %v", tt.at, process, tt.process)
		}
	}
}

func TestPark(t *testing.T) {
	dead := &State{Status: StatusDead, Provider: "stripe", FirstSeenAt: t0.Add(-time.Hour), ExpiresAt: later, ReplayIDs: []string{"dlq:0:1"}}
	a := replayOf("dlq:4:7")
	a.Attempt = 5
	st, effects := Step(dead, a, ParkedFor(errors.New("destination paused by an operator")), Policy{TTL: time.Hour})
	if !reflect.DeepEqual(effects, parked()) {
		t.Fatalf("parked effects %+v", effects)
	}
	if st.Status != StatusParked || st.NextAttempt != 1 || !st.FirstSeenAt.Equal(dead.FirstSeenAt) ||
		!slices.Equal(st.ReplayIDs, []string{"dlq:0:1"}) || st.ExpiresAt.Before(a.Now.Add(7*24*time.Hour)) {
		t.Fatalf("Park = %+v: want parked expecting attempt 1 (a replay), first seen and replay ids kept, kept at least 7 days", st)
	}
	if _, err := Encode(st); err != nil {
		t.Fatalf("a parked state must encode: %v", err)
	}
	lane := a
	lane.FromLane = true
	if process, why := Admit(&st, lane); !process || why != WhyUnparked {
		t.Fatalf("its lane copy: Admit = %v %s, want processed", process, why)
	}
	next, effects := Step(&st, lane, Answered(nil, 0), Policy{Schedule: mustSchedule(t, "1s"), TTL: time.Hour})
	if next.Status != StatusDone || !reflect.DeepEqual(effects, done()) || !slices.Equal(next.ReplayIDs, []string{"dlq:0:1", "dlq:4:7"}) {
		t.Fatalf("after the lane copy succeeded: %+v %+v", next, effects)
	}
}

// TestChain runs records of several keys through the table, as the
// processor's chains do: every decision sees the state the earlier records
// of its key left, although nothing is committed yet.
func TestChain(t *testing.T) {
	sched := mustSchedule(t, "1s,2s")
	states := map[string]*State{
		"github:abc": {Status: StatusDone, Provider: "github", ExpiresAt: later},
	}
	boom := errors.New("503")
	steps := []struct {
		key     string
		a       Arrival
		result  error // the handler's answer when processed
		process bool
		why     string
		effects []Effect
		status  Status // the key's state after the step
	}{
		{"stripe:evt_1", ingest, boom, true, WhyNew, toTier(1, 2), StatusRetrying},
		{"stripe:evt_1", ingest, nil, false, WhyDuplicate, nil, StatusRetrying},
		{"github:abc", ingest, nil, false, WhyDuplicate, nil, StatusDone},
		{"stripe:evt_1", retryAt(2), boom, true, WhyNextAttempt, toTier(2, 3), StatusRetrying},
		{"github:new", ingest, nil, true, WhyNew, done(), StatusDone},
		{"stripe:evt_1", retryAt(2), nil, false, WhyStaleAttempt, nil, StatusRetrying},
		{"stripe:evt_1", retryAt(3), boom, true, WhyNextAttempt, toDLQ(headers.DeadExhausted, 3), StatusDead},
		{"stripe:evt_1", replayOf("dlq:2:40"), nil, true, WhyReplay, done(), StatusDone},
		{"stripe:evt_1", replayOf("dlq:2:40"), nil, false, WhyAlreadyDone, nil, StatusDone},
		{"github:new", ingest, nil, false, WhyDuplicate, nil, StatusDone},
	}
	for i, s := range steps {
		st := states[s.key]
		process, why := Admit(st, s.a)
		if process != s.process || why != s.why {
			t.Fatalf("step %d (%s %s): Admit = %v, %q; want %v, %q", i, s.key, s.a.Origin, process, why, s.process, s.why)
		}
		if process {
			next, effects := Step(st, s.a, Answered(s.result, 0), Policy{Schedule: sched, TTL: time.Hour})
			if !reflect.DeepEqual(effects, s.effects) {
				t.Fatalf("step %d: effects = %+v, want %+v", i, effects, s.effects)
			}
			states[s.key] = &next
		}
		if st := states[s.key]; st.Status != s.status {
			t.Fatalf("step %d: state %s, want %s", i, st.Status, s.status)
		}
	}
	if got := states["stripe:evt_1"]; !slices.Equal(got.ReplayIDs, []string{"dlq:2:40"}) {
		t.Errorf("final replay ids = %v", got.ReplayIDs)
	}
}

// TestStepWithProviderTiers: a schedule restricted to a provider's
// retry.tiers (5m, 1h of the default) routes attempt 1 to tier 2 and attempt
// 2 to tier 4, numbered in the whole schedule so the caller's topic and
// due-time lookups stay right, keeps the state long enough for that tier,
// and sends attempt 3 to the DLQ as exhausted.
func TestStepWithProviderTiers(t *testing.T) {
	sched, err := retry.DefaultSchedule().Only([]time.Duration{5 * time.Minute, time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("503 unavailable")
	for _, tt := range []struct {
		attempt     int
		wantEffects []Effect
		wantState   Status
	}{
		{1, toTier(2, 2), StatusRetrying},
		{2, toTier(4, 3), StatusRetrying},
		{3, toDLQ(headers.DeadExhausted, 3), StatusDead},
	} {
		a := retryAt(tt.attempt)
		if tt.attempt == 1 {
			a = ingest
		}
		st, effects := Step(nil, a, Answered(boom, 0), Policy{Schedule: sched, TTL: time.Minute})
		if !reflect.DeepEqual(effects, tt.wantEffects) || st.Status != tt.wantState {
			t.Fatalf("attempt %d: effects %+v state %s, want %+v %s", tt.attempt, effects, st.Status, tt.wantEffects, tt.wantState)
		}
		if tier := effects[1].Tier; effects[1].Kind == ToTier && st.ExpiresAt.Before(a.Now.Add(2*sched.Tier(tier))) {
			t.Fatalf("attempt %d: state expires at %s, before twice tier %d's delay", tt.attempt, st.ExpiresAt, tier)
		}
	}
}

// TestRetryAfterSchedule: where a 429 or 503 with Retry-After sends the
// record's next attempt. The date the destination named is its answer's
// time plus the wait (the call took time after Arrival.Now): the first
// tier at least as long as the wait is chosen and the copy is due no
// earlier than the date (NotBefore); with no tier that long, the last
// tier's delay caps the wait and the date is only reported (RetryAfter);
// a Retry-After never uses up attempts and never dead-letters a record
// that has tiers left.
func TestRetryAfterSchedule(t *testing.T) {
	whole := mustSchedule(t, "1m,5m,15m,1h,6h")
	short, err := whole.Only([]time.Duration{time.Minute, 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	answered := t0.Add(2 * time.Second) // the answer came 2s after the decision's Now
	busy := func(after time.Duration) error {
		return &retry.RetryAfterError{Err: errors.New("HTTP 429"), After: after, Until: answered.Add(after)}
	}
	for _, tt := range []struct {
		name      string
		sch       retry.Schedule
		attempt   int
		err       error
		tier      int // 0: DLQ
		notBefore bool
	}{
		{"no Retry-After: tier = attempt", whole, 1, errors.New("HTTP 503"), 1, false},
		{"Retry-After 1s: tier 1m", whole, 1, busy(time.Second), 1, true},
		{"Retry-After 1m exactly: tier 1m, due no earlier than the date", whole, 1, busy(time.Minute), 1, true},
		{"Retry-After 61s: tier 5m", whole, 1, busy(61 * time.Second), 2, true},
		{"Retry-After 20m: tier 1h", whole, 1, busy(20 * time.Minute), 4, true},
		{"Retry-After 1h (the default cap): tier 1h", whole, 2, busy(time.Hour), 4, true},
		{"Retry-After shorter than the attempt's tier: the attempt's", whole, 3, busy(time.Minute), 3, true},
		{"route tiers 1m,5m, Retry-After 20m: the last, capped", short, 1, busy(20 * time.Minute), 2, false},
		{"last attempt: DLQ exhausted whatever it asks", short, 3, busy(time.Second), 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := retryAt(tt.attempt)
			_, effects := Step(nil, a, Answered(tt.err, 2*time.Second), Policy{Schedule: tt.sch, TTL: time.Hour})
			var tc *Effect
			for i := range effects {
				if effects[i].Kind == ToTier {
					tc = &effects[i]
				}
			}
			if tt.tier == 0 {
				if tc != nil {
					t.Fatalf("effects %+v, want the DLQ", effects)
				}
				return
			}
			if tc == nil || tc.Tier != tt.tier || tc.Attempt != tt.attempt+1 {
				t.Fatalf("effects %+v, want tier %d, attempt %d", effects, tt.tier, tt.attempt+1)
			}
			d := retry.Classify(tt.err)
			if !tc.RetryAfter.Equal(d.Until) {
				t.Fatalf("RetryAfter %s, want the date named %s", tc.RetryAfter, d.Until)
			}
			if got := !tc.NotBefore.IsZero(); got != tt.notBefore || tt.notBefore && !tc.NotBefore.Equal(d.Until) {
				t.Fatalf("NotBefore %s, want it set (to %s): %v", tc.NotBefore, d.Until, tt.notBefore)
			}
			due := retry.NotBefore(tt.sch.DueAt(a.Now, tc.Tier, 0, nil), tc.NotBefore)
			if tt.notBefore && due.Before(d.Until) {
				t.Fatalf("due %s, before the date named %s", due, d.Until)
			}
		})
	}
}
