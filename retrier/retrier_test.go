package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/schemas"
)

// maxLate is the lateness allowed per hop in these tests: from a record's
// due-at to the destination call (or to its arrival in webhooks.raw).
const maxLate = time.Second

// noBreaker turns the processor's circuit breaker off: these tests make the
// destination fail on purpose and count its calls and attempts exactly; an
// open circuit would defer records to tier 1 without a call.
var noBreaker = map[string]string{"HOOKLINE_BREAKER_FAILURES": "-1"}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binaries against a broker")
	}
}

// calls remembers when the destination was called, per key, in call order.
type calls struct {
	mu sync.Mutex
	at map[string][]time.Time
}

// recordCalls makes the destination answer status(key, n) to the n-th call
// (1-based) of key, and remember when each call came.
func recordCalls(sys *e2e.System, status func(key string, n int) int) *calls {
	c := &calls{at: map[string][]time.Time{}}
	sys.Dest.Behave(func(key string, n int) int {
		now := time.Now()
		c.mu.Lock()
		c.at[key] = append(c.at[key], now)
		c.mu.Unlock()
		return status(key, n)
	})
	return c
}

func (c *calls) of(key string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.at[key]...)
}

// dues maps key and attempt to the due-at of the tier record that carried
// that attempt, read from every tier topic.
func dues(t *testing.T, recs []*kgo.Record) map[string]map[int]time.Time {
	t.Helper()
	out := map[string]map[int]time.Time{}
	for _, r := range recs {
		n, err := headers.GetAttempt(r)
		if err != nil {
			t.Fatalf("tier record %s: %v", r.Key, err)
		}
		due, err := headers.GetTime(r, headers.DueAt)
		if err != nil {
			t.Fatalf("tier record %s: %v", r.Key, err)
		}
		if out[string(r.Key)] == nil {
			out[string(r.Key)] = map[int]time.Time{}
		}
		if prev, ok := out[string(r.Key)][n]; ok && !prev.Equal(due) {
			t.Fatalf("%s attempt %d parked twice with different due times", r.Key, n)
		}
		out[string(r.Key)][n] = due
	}
	return out
}

// topicLog reads topics from the start, read_committed, and keeps what it
// read so tests can wait for conditions over it.
type topicLog struct {
	cl   *kgo.Client
	recs []*kgo.Record
}

func readTopics(t *testing.T, sys *e2e.System, topics ...string) *topicLog {
	return &topicLog{cl: kafkatest.Client(t, sys.Brokers, kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))}
}

// poll reads for up to wait and reports whether anything came.
func (l *topicLog) poll(t *testing.T, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fs := l.cl.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("read %s[%d]: %v", topic, p, err)
		}
	})
	recs := fs.Records()
	l.recs = append(l.recs, recs...)
	return len(recs) > 0
}

// until reads until cond holds over everything read, or fails the test.
func (l *topicLog) until(t *testing.T, timeout time.Duration, what string, cond func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(l.recs) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (%d records read)", what, timeout, len(l.recs))
		}
		l.poll(t, 500*time.Millisecond)
	}
	return l.recs
}

// settle reads until nothing more comes for a second and returns it all.
func (l *topicLog) settle(t *testing.T) []*kgo.Record { return l.settleFor(t, time.Second) }

func (l *topicLog) settleFor(t *testing.T, quiet time.Duration) []*kgo.Record {
	for l.poll(t, quiet) {
	}
	return l.recs
}

func atLeast(n int) func([]*kgo.Record) bool {
	return func(rs []*kgo.Record) bool { return len(rs) >= n }
}

// checkRawNotEarly checks every record the retrier moved (origin retry in
// webhooks.raw): written no earlier than its due-at, with its tier headers.
// It returns the moved records by key.
func checkRawNotEarly(t *testing.T, raw []*kgo.Record) map[string][]*kgo.Record {
	t.Helper()
	moved := map[string][]*kgo.Record{}
	for _, r := range raw {
		if headers.Value(r, headers.Origin) != headers.OriginRetry {
			continue
		}
		due, err := headers.GetTime(r, headers.DueAt)
		if err != nil {
			t.Fatalf("moved record %s lost its due-at: %v", r.Key, err)
		}
		if r.Timestamp.Before(due) {
			t.Fatalf("%s attempt %s written to raw at %s, before its due-at %s", r.Key, headers.Value(r, headers.Attempt), r.Timestamp, due)
		}
		if err := schemas.ValidateHeaders(r.Headers); err != nil {
			t.Fatalf("moved record %s: headers fail the schema: %v", r.Key, err)
		}
		moved[string(r.Key)] = append(moved[string(r.Key)], r)
	}
	return moved
}

// checkCallsOnTime checks that call n (n ≥ 2) of key came no earlier than
// the due-at of attempt n, and at most late after it (late 0: no bound).
func checkCallsOnTime(t *testing.T, key string, at []time.Time, due map[int]time.Time, late time.Duration) (worst time.Duration) {
	t.Helper()
	for i, c := range at {
		n := i + 1
		if n == 1 {
			continue
		}
		d, ok := due[n]
		if !ok {
			t.Fatalf("%s: call %d without a tier record for attempt %d", key, n, n)
		}
		if c.Before(d) {
			t.Fatalf("%s: attempt %d called at %s, before its due-at %s", key, n, c.Format(time.RFC3339Nano), d.Format(time.RFC3339Nano))
		}
		worst = max(worst, c.Sub(d))
		if late > 0 && c.Sub(d) > late {
			t.Fatalf("%s: attempt %d called %s after its due-at (bound %s)", key, n, c.Sub(d), late)
		}
	}
	return worst
}

func post(t *testing.T, sys *e2e.System, id string) {
	t.Helper()
	if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
		t.Fatalf("post %s: %d %v", id, code, err)
	}
}

// TestRetryLoop runs ingest, processor and retrier with tiers 1s,2s,3s
// (jitter 0.5, which may only delay) and three deliveries at once: one whose
// destination always fails, one that succeeds on its third attempt, and one
// whose retry record is produced twice more by hand (as a retrier crashing
// between move and commit would).
func TestRetryLoop(t *testing.T) {
	skipShort(t)
	const (
		always = "stripe:evt_always"
		third  = "stripe:evt_third"
		twice  = "stripe:evt_twice"
	)
	const jitter = 0.5
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s", Env: map[string]string{"HOOKLINE_RETRY_JITTER": fmt.Sprint(jitter)}})
	c := recordCalls(sys, func(key string, n int) int {
		switch {
		case key == always:
			return 503
		case key == third && n < 3:
			return 503
		case key == twice && n < 2:
			return 500
		}
		return 200
	})
	sys.StartIngest()
	sys.StartProcessor("p1", noBreaker)
	sys.StartRetrier(nil)
	tiers := readTopics(t, sys, sys.Names.Retry...)
	dlq, outcomes, raw := readTopics(t, sys, sys.Names.DLQ), readTopics(t, sys, sys.Names.Outcomes), readTopics(t, sys, sys.Names.Raw)

	// The hand copies are made before the retrier can move the original:
	// the processor writes the tier record with its due-at 1s ahead, so the
	// copies are taken as soon as it appears.
	post(t, sys, "evt_twice")
	tier1 := tiers.until(t, 30*time.Second, "evt_twice in tier 1", atLeast(1))
	orig := tier1[0]
	if string(orig.Key) != twice {
		t.Fatalf("tier 1 record %s, want %s", orig.Key, twice)
	}
	cl := kafkatest.Client(t, sys.Brokers)
	for i := 0; i < 2; i++ {
		cp := &kgo.Record{Topic: orig.Topic, Key: orig.Key, Value: orig.Value, Headers: append([]kgo.RecordHeader(nil), orig.Headers...)}
		if err := cl.ProduceSync(context.Background(), cp).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	post(t, sys, "evt_always")
	post(t, sys, "evt_third")

	t.Run("always failing: attempts 1 to 4 on time, then the DLQ with four errors", func(t *testing.T) {
		recs := dlq.until(t, 90*time.Second, "the exhausted delivery in the DLQ", atLeast(1))
		d := recs[0]
		es, err := headers.GetErrors(d)
		if err != nil || string(d.Key) != always || headers.Value(d, headers.DeadReason) != headers.DeadExhausted || len(es) != 4 {
			t.Fatalf("DLQ record %s reason %q with %d errors (%v), want %s exhausted with 4", d.Key, headers.Value(d, headers.DeadReason), len(es), err, always)
		}
		for i, e := range es {
			if e.Attempt != i+1 || !e.Retryable {
				t.Fatalf("error %d: attempt %d retryable %t", i, e.Attempt, e.Retryable)
			}
		}
		at := c.of(always)
		if len(at) != 4 {
			t.Fatalf("destination called %d times, want 4", len(at))
		}
		h, _ := sys.Dest.Request(always)
		if h.Get("X-Hookline-Attempt") != "4" {
			t.Fatalf("last call was attempt %s, want 4", h.Get("X-Hookline-Attempt"))
		}
		due := dues(t, keyRecords(tiers.settle(t), always))
		if len(due[always]) != 3 {
			t.Fatalf("%d tier records for %s, want 3 (attempts 2, 3, 4)", len(due[always]), always)
		}
		for n := 2; n <= 4; n++ {
			// Jitter only delays: due between tier and tier × (1 + jitter)
			// after the failed call (plus the processor's own time).
			tier := time.Duration(n-1) * time.Second
			if got := due[always][n].Sub(at[n-2]); got < tier || got > time.Duration(float64(tier)*(1+jitter))+500*time.Millisecond {
				t.Fatalf("attempt %d due %s after attempt %d's call, want from %s to %s × %.1f", n, got, n-1, tier, tier, 1+jitter)
			}
		}
		worst := checkCallsOnTime(t, always, at, due[always], maxLate)
		t.Logf("4 attempts, each no earlier than its due time; worst lateness per hop %s", worst)
	})

	t.Run("succeeds on its third attempt: one done, three calls", func(t *testing.T) {
		outcomes.until(t, 60*time.Second, "a done outcome for evt_third", func(rs []*kgo.Record) bool {
			return countStatus(t, rs, third)["done"] >= 1
		})
		time.Sleep(4 * time.Second) // longer than any tier: nothing more may come
		recs := outcomes.settle(t)
		st := countStatus(t, recs, third)
		if st["done"] != 1 || st["retrying"] != 2 {
			t.Fatalf("outcomes of %s: %v, want 2 retrying and 1 done", third, st)
		}
		at := c.of(third)
		if len(at) != 3 {
			t.Fatalf("destination called %d times, want 3", len(at))
		}
		due := dues(t, keyRecords(tiers.settle(t), third))
		checkCallsOnTime(t, third, at, due[third], maxLate)
	})

	t.Run("a retry record produced twice more by hand is processed once", func(t *testing.T) {
		recs := raw.until(t, 60*time.Second, "three moved copies of evt_twice", func(rs []*kgo.Record) bool {
			return len(checkRawNotEarly(t, rs)[twice]) >= 3
		})
		outcomes.until(t, 60*time.Second, "an outcome per copy", func(rs []*kgo.Record) bool {
			st := countStatus(t, rs, twice)
			return st["done"]+st["duplicate"] >= 3
		})
		time.Sleep(2 * time.Second)
		outs := outcomes.settle(t)
		st := countStatus(t, outs, twice)
		if st["done"] != 1 || st["duplicate"] != 2 {
			t.Fatalf("outcomes of %s: %v, want 1 done and 2 duplicate", twice, st)
		}
		if n := len(c.of(twice)); n != 2 {
			t.Fatalf("destination called %d times for %s, want 2 (the first attempt and one retry)", n, twice)
		}
		for _, r := range checkRawNotEarly(t, recs)[twice] {
			if headers.Value(r, headers.Attempt) != "2" || string(r.Value) != string(e2e.StripeEvent("evt_twice")) {
				t.Fatalf("moved copy: attempt %s body %q", headers.Value(r, headers.Attempt), r.Value)
			}
		}
	})

	checkRawNotEarly(t, raw.settle(t))
}

func keyRecords(recs []*kgo.Record, key string) []*kgo.Record {
	var out []*kgo.Record
	for _, r := range recs {
		if string(r.Key) == key {
			out = append(out, r)
		}
	}
	return out
}

// countStatus counts key's outcomes by status, validating each outcome.
func countStatus(t *testing.T, recs []*kgo.Record, key string) map[string]int {
	t.Helper()
	st := map[string]int{}
	for i, o := range e2e.Outcomes(t, recs) {
		if o.Key != key {
			continue
		}
		if err := schemas.Validate(schemas.Outcome, recs[i].Value); err != nil {
			t.Fatalf("outcome fails its schema: %v", err)
		}
		st[o.Status]++
	}
	return st
}

// TestSIGKILLWhileParked kills the real retrier twice while deliveries are
// parked in the tiers, restarting it each time: every delivery still
// succeeds on its third attempt, no attempt comes before its due time, and
// a record moved twice (killed between move and commit) is processed once.
func TestSIGKILLWhileParked(t *testing.T) {
	skipShort(t)
	const n = 60
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s"})
	c := recordCalls(sys, func(key string, call int) int {
		if call < 3 {
			return 503
		}
		return 200
	})
	sys.StartIngest()
	sys.StartProcessor("p1", noBreaker)
	ret := sys.StartRetrier(nil)
	tiers := readTopics(t, sys, sys.Names.Retry...)
	outcomes, raw := readTopics(t, sys, sys.Names.Outcomes), readTopics(t, sys, sys.Names.Raw)

	var keys []string
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("evt_kill_%d", i)
			if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
				t.Errorf("post %s: %d %v", id, code, err)
				return
			}
			keys = append(keys, "stripe:"+id)
			time.Sleep(50 * time.Millisecond) // spread over 3s: records park and come due all along
		}
	}()
	for k := 0; k < 2; k++ {
		time.Sleep(2 * time.Second)
		written := len(tiers.settleFor(t, 200*time.Millisecond))
		moved := 0
		for _, rs := range checkRawNotEarly(t, raw.settleFor(t, 200*time.Millisecond)) {
			moved += len(rs)
		}
		ret.Kill(t)
		t.Logf("kill %d: SIGKILL with about %d records parked (%d written to the tiers, %d moved)", k+1, written-moved, written, moved)
		time.Sleep(time.Second) // records come due while it is down
		ret = sys.Restart(ret)
	}
	<-posted
	if t.Failed() {
		return
	}
	recs := outcomes.until(t, 3*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool {
		done := 0
		for _, o := range e2e.Outcomes(t, rs) {
			if o.Status == "done" {
				done++
			}
		}
		return done >= n
	})
	due := dues(t, tiers.until(t, time.Minute, "two tier records per key", atLeast(2*n)))
	doneBy := map[string]int{}
	for _, o := range e2e.Outcomes(t, recs) {
		if o.Status == "done" {
			doneBy[o.Key]++
		}
	}
	for _, k := range keys {
		if doneBy[k] != 1 {
			t.Fatalf("%s: %d done outcomes, want 1", k, doneBy[k])
		}
		at := c.of(k)
		if len(at) != 3 {
			t.Fatalf("%s: destination called %d times, want 3", k, len(at))
		}
		checkCallsOnTime(t, k, at, due[k], 0)
	}
	moved := checkRawNotEarly(t, raw.until(t, time.Minute, "two moved records per key", func(rs []*kgo.Record) bool {
		m := checkRawNotEarly(t, rs)
		for _, k := range keys {
			if len(m[k]) < 2 {
				return false
			}
		}
		return true
	}))
	copies := 0
	for _, k := range keys {
		if len(moved[k]) < 2 {
			t.Fatalf("%s: %d moved records, want at least 2", k, len(moved[k]))
		}
		copies += len(moved[k]) - 2
	}
	t.Logf("%d keys through two tiers across 2 SIGKILLs: all done once, none early; %d records moved twice (skipped by the processor)", n, copies)
}

// TestRevokedWhilePausedResumesOnTime: retrier A holds every tier partition
// (their heads are due later); B joins and takes some over while they are
// paused: B moves them on time. Then B stops (SIGTERM, clean exit) and the
// partitions go back to A, which had held them before: the next records
// move on time there too (a pause left over from A's first ownership would
// keep them forever).
func TestRevokedWhilePausedResumesOnTime(t *testing.T) {
	skipShort(t)
	const parts, perRound = 4, 24
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s", Partitions: parts})
	sys.StartIngest()
	sys.StartProcessor("p1", noBreaker)
	a := sys.StartRetrier(nil)
	raw := readTopics(t, sys, sys.Names.Raw)

	// Two rounds of hand-made tier-1 records (attempt 2), over every
	// partition, the second due 10s after the first.
	due1 := time.Now().Add(15 * time.Second).Truncate(time.Millisecond)
	due2 := due1.Add(10 * time.Second)
	cl := kafkatest.Client(t, sys.Brokers)
	perPart := map[int32]int{}
	for round, due := range []time.Time{due1, due2} {
		for i := 0; i < perRound; i++ {
			id := fmt.Sprintf("evt_rebalance_%d_%d", round, i)
			r := &kgo.Record{Topic: sys.Names.Retry[0], Key: []byte("stripe:" + id), Value: e2e.StripeEvent(id)}
			for _, h := range [][2]string{{headers.Provider, "stripe"}, {headers.EventType, "invoice.paid"}, {headers.IdempotencyKey, "stripe:" + id},
				{headers.ReceivedAt, headers.FormatTime(time.Now())}, {headers.RequestID, id}, {headers.ContentType, "application/json"},
				{headers.Origin, headers.OriginIngest}, {headers.FirstSeenAt, headers.FormatTime(time.Now())}} {
				headers.Set(r, h[0], h[1])
			}
			headers.SetAttempt(r, 2)
			headers.SetTime(r, headers.DueAt, due)
			res := cl.ProduceSync(context.Background(), r)
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			perPart[res[0].Record.Partition]++
		}
	}
	if len(perPart) != parts {
		t.Fatalf("records landed on %d of %d partitions: %v", len(perPart), parts, perPart)
	}
	waitMetric(t, a, "hookline_retrier_paused_partitions", 10*time.Second, func(v float64) bool { return v == parts })

	b := sys.StartRetrier(nil)
	waitMetric(t, b, "hookline_retrier_paused_partitions", 10*time.Second, func(v float64) bool { return v >= 1 })
	if time.Now().After(due1.Add(-time.Second)) {
		t.Fatalf("the rebalance finished too late to test partitions revoked while paused")
	}
	all := float64(parts * len(sys.Names.Retry))
	if v := metric(t, a, "hookline_retrier_assigned_partitions"); v >= all {
		t.Fatalf("a still owns all %v tier partitions after b joined", v)
	}
	bParts := metric(t, b, "hookline_retrier_assigned_partitions")

	recs := raw.until(t, 30*time.Second, "round one moved", atLeast(perRound))
	worst := checkRoundOnTime(t, recs, due1, perRound)
	// b counts a move once it is committed, a moment after the records are
	// visible in raw: wait for the counter rather than read it once.
	waitMetric(t, b, "hookline_retrier_moved_records_total", 10*time.Second, func(v float64) bool { return v > 0 })
	movedByB := metric(t, b, "hookline_retrier_moved_records_total")
	b.Stop(t)
	recs = raw.until(t, 30*time.Second, "round two moved", atLeast(2*perRound))
	worst = max(worst, checkRoundOnTime(t, recs[perRound:], due2, perRound))
	if v := metric(t, a, "hookline_retrier_assigned_partitions"); v != all {
		t.Fatalf("a owns %v tier partitions after b left, want %v", v, all)
	}
	t.Logf("b took %v tier partitions, some paused, and moved %v records of round one; round two moved by a after b left; worst lateness %s",
		bParts, movedByB, worst)
	if !strings.Contains(a.Output(), "partitions revoked") {
		t.Fatalf("a logged no revocation:\n%s", a.Output())
	}
}

// checkRoundOnTime checks that recs are n records due at due, moved to raw
// no earlier than due and at most maxLate after it; it returns the worst
// lateness.
func checkRoundOnTime(t *testing.T, recs []*kgo.Record, due time.Time, n int) (worst time.Duration) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	for _, r := range recs {
		d, err := headers.GetTime(r, headers.DueAt)
		if err != nil || !d.Equal(due) {
			t.Fatalf("%s due-at %s (%v), want %s", r.Key, d, err, due)
		}
		if r.Timestamp.Before(due) {
			t.Fatalf("%s moved at %s, before its due-at %s", r.Key, r.Timestamp, due)
		}
		worst = max(worst, r.Timestamp.Sub(due))
		if r.Timestamp.Sub(due) > maxLate {
			t.Fatalf("%s moved %s after its due-at (bound %s)", r.Key, r.Timestamp.Sub(due), maxLate)
		}
		if headers.Value(r, headers.Origin) != headers.OriginRetry {
			t.Fatalf("%s moved with origin %q", r.Key, headers.Value(r, headers.Origin))
		}
	}
	return worst
}

// metric sums the samples of a metric on svc's /metrics.
func metric(t *testing.T, svc *e2e.Service, name string) float64 {
	t.Helper()
	v, err := loadtest.CounterSum(t.Context(), "http://"+svc.Addr+"/metrics", name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func waitMetric(t *testing.T, svc *e2e.Service, name string, timeout time.Duration, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := metric(t, svc, name)
		if ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s is %v after %s\n%s", name, svc.Addr, v, timeout, svc.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
