package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/schemas"
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binaries against a broker")
	}
}

// doneCount counts outcomes by key and status, validating each against the
// outcome schema.
func doneCount(t *testing.T, recs []*kgo.Record) (map[string]int, map[string]int) {
	done, dup := map[string]int{}, map[string]int{}
	for _, r := range recs {
		if err := schemas.Validate(schemas.Outcome, r.Value); err != nil {
			t.Fatalf("outcome at %d:%d fails its schema: %v\n%s", r.Partition, r.Offset, err, r.Value)
		}
	}
	for _, o := range e2e.Outcomes(t, recs) {
		switch o.Status {
		case "done":
			done[o.Key]++
		case "duplicate":
			dup[o.Key]++
		}
	}
	return done, dup
}

// doneKeys counts the keys with a done outcome (records parked on the way
// have a parked outcome first).
func doneKeys(t *testing.T, recs []*kgo.Record) int {
	keys := map[string]bool{}
	for _, o := range e2e.Outcomes(t, recs) {
		if o.Status == "done" {
			keys[o.Key] = true
		}
	}
	return len(keys)
}

func TestConcurrentDuplicatesThroughIngest(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	var wg sync.WaitGroup
	var accepted atomic.Int32
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, err := sys.Post("stripe", e2e.StripeEvent("evt_dup50")); err == nil && code == 202 {
				accepted.Add(1)
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != 50 {
		t.Fatalf("%d of 50 posts accepted", accepted.Load())
	}
	recs := sys.Read(sys.Names.Outcomes).Until(60*time.Second, "50 outcomes", func(rs []*kgo.Record) bool { return len(rs) >= 50 })
	done, dup := doneCount(t, recs)
	if done["stripe:evt_dup50"] != 1 || dup["stripe:evt_dup50"] != 49 || len(recs) != 50 {
		t.Fatalf("outcomes: %d done, %d duplicate of %d; want 1 and 49", done["stripe:evt_dup50"], dup["stripe:evt_dup50"], len(recs))
	}
	if c := sys.Dest.Calls("stripe:evt_dup50"); c != 1 {
		t.Fatalf("destination called %d times, want exactly once", c)
	}
	h, body := sys.Dest.Request("stripe:evt_dup50")
	if string(body) != string(e2e.StripeEvent("evt_dup50")) || h.Get("X-Hookline-Attempt") != "1" || h.Get("Stripe-Signature") == "" {
		t.Fatalf("destination got body %s headers %v", body, h)
	}
}

// postAll posts n distinct stripe events with workers clients and returns
// their keys; it fails the test on any answer but 202.
func postAll(t *testing.T, sys *e2e.System, prefix string, n, workers int) []string {
	keys := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id := fmt.Sprintf("%s_%d", prefix, i)
				keys[i] = "stripe:" + id
				for try := 0; ; try++ {
					code, err := sys.Post("stripe", e2e.StripeEvent(id))
					if err == nil && code == 202 {
						break
					}
					if try == 5 {
						failed.Add(1)
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d posts were not accepted", failed.Load())
	}
	return keys
}

// TestSIGKILLDuringFlow kills the real processor five times while 10,000
// events flow, then deletes its state dir and sends everything again.
func TestSIGKILLDuringFlow(t *testing.T) {
	skipShort(t)
	const n, kills, inflight = 10000, 5, 64
	sys := e2e.New(t, e2e.Options{})
	sys.StartIngest()
	// At most 64 calls in flight and 64 finished but not committed: a kill
	// then repeats at most 128 destination calls.
	env := map[string]string{"HOOKLINE_MAX_INFLIGHT": strconv.Itoa(inflight), "HOOKLINE_BATCH_MAX_RECORDS": strconv.Itoa(inflight)}
	proc := sys.StartProcessor("p1", env)
	outcomes := sys.Read(sys.Names.Outcomes)

	posted := make(chan []string, 1)
	go func() { posted <- postAll(t, sys, "evt_kill", n, 16) }()
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		proc.Kill(t)
		proc = sys.Restart(proc)
	}
	keys := <-posted
	recs := outcomes.Until(4*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool { return doneKeys(t, rs) >= n })
	done, _ := doneCount(t, recs)
	var missing, twice int
	for _, k := range keys {
		switch done[k] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 {
		t.Fatalf("of %d keys: %d without a done outcome, %d done more than once", n, missing, twice)
	}
	calls := sys.Dest.AllCalls()
	extra := 0
	for _, k := range keys {
		if calls[k] == 0 {
			t.Fatalf("destination never saw %s", k)
		}
		extra += calls[k] - 1
	}
	// A kill repeats the calls in flight and the finished ones not yet
	// committed (at most HOOKLINE_BATCH_MAX_RECORDS).
	bound := kills * 2 * inflight
	t.Logf("%d keys, %d kills: every key done once; %d extra destination calls (bound %d)", n, kills, extra, bound)
	if extra > bound {
		t.Fatalf("%d extra destination calls, more than %d kills × (%d in flight + %d finished)", extra, kills, inflight, inflight)
	}

	// Delete the state dir: restore rebuilds it from the changelog, and
	// re-sending everything processes nothing again.
	proc.Stop(t)
	if err := os.RemoveAll(sys.StateDir("p1")); err != nil {
		t.Fatal(err)
	}
	before := len(recs)
	sys.Restart(proc)
	postAll(t, sys, "evt_kill", n, 16)
	recs = outcomes.Until(4*time.Minute, "an outcome for every re-sent event", func(rs []*kgo.Record) bool { return len(rs) >= before+n })
	for _, o := range e2e.Outcomes(t, recs[before:]) {
		if o.Status != "duplicate" {
			t.Fatalf("re-sent %s after wiping the state dir: status %s, want duplicate", o.Key, o.Status)
		}
	}
	after := sys.Dest.AllCalls()
	for _, k := range keys {
		if after[k] != calls[k] {
			t.Fatalf("%s called again after the state dir was wiped", k)
		}
	}
}

// TestMembersJoinAndLeave runs one, two, then three processors, stopping and
// killing members while events flow.
func TestMembersJoinAndLeave(t *testing.T) {
	skipShort(t)
	const n = 6000
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	sys.StartIngest()
	p1 := sys.StartProcessor("p1", nil)
	outcomes := sys.Read(sys.Names.Outcomes)
	posted := make(chan []string, 1)
	go func() { posted <- postAll(t, sys, "evt_members", n, 8) }()

	time.Sleep(time.Second)
	p2 := sys.StartProcessor("p2", nil)
	time.Sleep(2 * time.Second)
	p3 := sys.StartProcessor("p3", nil)
	time.Sleep(2 * time.Second)
	p1.Stop(t) // leaves: its partitions move
	time.Sleep(2 * time.Second)
	p2.Kill(t) // lost: its partitions move after the session timeout
	time.Sleep(time.Second)
	sys.Restart(p1)
	_ = p3
	keys := <-posted
	recs := outcomes.Until(5*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool {
		d, _ := countDone(rs)
		return len(d) >= n
	})
	done, _ := doneCount(t, recs)
	for _, k := range keys {
		if done[k] != 1 {
			t.Fatalf("%s has %d done outcomes, want 1", k, done[k])
		}
	}
}

func countDone(recs []*kgo.Record) (map[string]int, error) {
	done := map[string]int{}
	for _, r := range recs {
		var o e2e.Outcome
		if err := json.Unmarshal(r.Value, &o); err != nil {
			return nil, err
		}
		if o.Status == "done" {
			done[o.Key]++
		}
	}
	return done, nil
}

// TestFailureRouting: a retryable failure parks the record in tier 1 with
// every contract header; a permanent 4xx goes to the DLQ as permanent; a
// destination that always fails ends in the DLQ as exhausted after the
// tier records are fed back by hand (the retrier's job) with one error per
// attempt.
func TestFailureRouting(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s"})
	sys.Dest.Behave(func(key string, call int) int {
		switch key {
		case "stripe:evt_perm":
			return 400
		case "stripe:evt_fail":
			return 503
		}
		return 200
	})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	for _, id := range []string{"evt_fail", "evt_perm"} {
		if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
			t.Fatalf("post %s: %d %v", id, code, err)
		}
	}
	dlq := sys.Read(sys.Names.DLQ)
	perm := dlq.Until(60*time.Second, "the permanent failure in the DLQ", func(rs []*kgo.Record) bool { return len(rs) >= 1 })[0]
	if string(perm.Key) != "stripe:evt_perm" || headers.Value(perm, headers.DeadReason) != headers.DeadPermanent {
		t.Fatalf("DLQ record %s reason %q, want stripe:evt_perm permanent", perm.Key, headers.Value(perm, headers.DeadReason))
	}

	raw := kafkatest.Client(t, sys.Brokers)
	for attempt := 1; attempt <= 3; attempt++ {
		tier := sys.Read(sys.Names.Retry[attempt-1])
		r := tier.Until(60*time.Second, fmt.Sprintf("tier %d record", attempt), func(rs []*kgo.Record) bool { return len(rs) >= 1 })[0]
		if err := schemas.ValidateHeaders(r.Headers); err != nil {
			t.Fatalf("tier %d record headers fail the schema: %v", attempt, err)
		}
		for _, h := range []string{headers.Provider, headers.EventType, headers.IdempotencyKey, headers.ReceivedAt, headers.RequestID,
			headers.ContentType, headers.Origin, headers.Attempt, headers.Errors, headers.FirstSeenAt, headers.DueAt,
			headers.SourceTopic, headers.SourcePartition, headers.SourceOffset, "http.stripe-signature"} {
			if _, ok := headers.Get(r, h); !ok {
				t.Errorf("tier %d record lacks %s", attempt, h)
			}
		}
		if n, _ := headers.GetAttempt(r); n != attempt+1 {
			t.Fatalf("tier %d record is for attempt %d, want %d", attempt, n, attempt+1)
		}
		es, _ := headers.GetErrors(r)
		if len(es) != attempt || !es[attempt-1].Retryable {
			t.Fatalf("tier %d record has %d errors, want %d", attempt, len(es), attempt)
		}
		due, _ := headers.GetTime(r, headers.DueAt)
		if due.Before(r.Timestamp.Add(time.Duration(attempt)*time.Second - 50*time.Millisecond)) {
			t.Fatalf("due-at %s is before record time + tier %ds", due, attempt)
		}
		if string(r.Value) != string(e2e.StripeEvent("evt_fail")) {
			t.Fatalf("tier record body %q is not the original", r.Value)
		}
		// Feed it back as the retrier will.
		back := &kgo.Record{Topic: sys.Names.Raw, Key: r.Key, Value: r.Value, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
		headers.Set(back, headers.Origin, headers.OriginRetry)
		if err := raw.ProduceSync(t.Context(), back).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	recs := dlq.Until(60*time.Second, "the exhausted record in the DLQ", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	ex := recs[1]
	es, _ := headers.GetErrors(ex)
	if string(ex.Key) != "stripe:evt_fail" || headers.Value(ex, headers.DeadReason) != headers.DeadExhausted || len(es) != 4 {
		t.Fatalf("DLQ record %s reason %q with %d errors, want stripe:evt_fail exhausted with 4", ex.Key, headers.Value(ex, headers.DeadReason), len(es))
	}
	if c := sys.Dest.Calls("stripe:evt_fail"); c != 4 {
		t.Fatalf("destination called %d times for the failing key, want 4", c)
	}
}

// TestRestoreBeforeFirstRecord: partitions that move to a second instance
// are restored there before their first record is processed, read from the
// order of its log lines.
func TestRestoreBeforeFirstRecord(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Partitions: 4})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	postAll(t, sys, "evt_before", 400, 8)
	p2 := sys.StartProcessor("p2", nil)
	time.Sleep(3 * time.Second) // let the group rebalance
	postAll(t, sys, "evt_after", 800, 8)
	sys.Read(sys.Names.Outcomes).Until(2*time.Minute, "1200 outcomes", func(rs []*kgo.Record) bool { return len(rs) >= 1200 })

	restored := map[int]bool{}
	firsts := 0
	sc := bufio.NewScanner(strings.NewReader(p2.Output()))
	for sc.Scan() {
		var l struct {
			Msg       string `json:"msg"`
			Partition int    `json:"partition"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case "partition restored":
			restored[l.Partition] = true
		case "first record processed since restore":
			firsts++
			if !restored[l.Partition] {
				t.Fatalf("p2 processed partition %d before restoring it:\n%s", l.Partition, p2.Output())
			}
		}
	}
	if firsts == 0 {
		t.Fatalf("p2 processed no partition: the rebalance did not happen\n%s", p2.Output())
	}
}

// TestOpenCircuitParksWithoutAnAttempt: while the destination's breaker is
// open its records wait in the destination's lane (parked) instead of
// cycling through a retry tier; each reaches tier 1 only after a real call
// failed (attempt 2, one error), one probe per cool-down.
func TestOpenCircuitParksWithoutAnAttempt(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s", Partitions: 1})
	sys.Dest.Behave(func(string, int) int { return 503 })
	sys.StartIngest()
	sys.StartProcessor("p1", map[string]string{"HOOKLINE_BREAKER_FAILURES": "2", "HOOKLINE_BREAKER_COOLDOWN": "900ms", "HOOKLINE_MAX_INFLIGHT": "1"})
	outcomes := sys.Read(sys.Names.Outcomes)
	const n = 6
	for i := 0; i < n; i++ {
		if code, err := sys.Post("stripe", e2e.StripeEvent(fmt.Sprintf("evt_circuit_%d", i))); err != nil || code != 202 {
			t.Fatalf("post: %d %v", code, err)
		}
	}
	recs := sys.Read(sys.Names.Retry[0]).Until(60*time.Second, "every record in tier 1", func(rs []*kgo.Record) bool { return len(rs) >= n })
	for _, r := range recs {
		attempt, err := headers.GetAttempt(r)
		if err != nil {
			t.Fatal(err)
		}
		if es, _ := headers.GetErrors(r); attempt != 2 || len(es) != 1 {
			t.Fatalf("%s: tier 1 record for attempt %d with %d errors; want attempt 2 after one real call", r.Key, attempt, len(es))
		}
	}
	calls := 0
	for _, c := range sys.Dest.AllCalls() {
		calls += c
	}
	parked := 0
	for _, o := range e2e.Outcomes(t, outcomes.Until(10*time.Second, "the outcomes", func(rs []*kgo.Record) bool { return len(rs) >= n })) {
		if o.Status == "parked" {
			parked++
		}
	}
	if calls != n || parked == 0 {
		t.Fatalf("%d destination calls, %d parked outcomes; want one call per record and some parked while the circuit was open", calls, parked)
	}
	t.Logf("%d records, %d calls, %d parked while the circuit was open, none in a tier without a call", n, calls, parked)
}

// TestTwoDefaultProcessorsOnOneHost: two processors started with every
// setting left alone but their state dirs take different instance ids
// (kept in the dirs), share the partitions and never fence each other.
func TestTwoDefaultProcessorsOnOneHost(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{})
	sys.StartIngest()
	unset := map[string]string{"HOOKLINE_INSTANCE_ID": ""}
	p1 := sys.StartProcessor("p1", unset)
	p2 := sys.StartProcessor("p2", unset)
	time.Sleep(3 * time.Second) // let the group settle: a rebalance under flow repeats calls by design
	outcomes := sys.Read(sys.Names.Outcomes)
	const n = 1500
	keys := postAll(t, sys, "evt_twin", n, 8)
	recs := outcomes.Until(2*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool { return doneKeys(t, rs) >= n })
	done, _ := doneCount(t, recs)
	calls := sys.Dest.AllCalls()
	total := 0
	for _, k := range keys {
		if done[k] != 1 {
			t.Errorf("%s: %d done outcomes, want 1", k, done[k])
		}
		total += calls[k]
	}
	if total > n+n/50 {
		t.Errorf("%d destination calls for %d keys: more than 2%% extra", total, n)
	}
	ids := map[string]bool{}
	for _, p := range []*e2e.Service{p1, p2} {
		out := p.Output()
		if strings.Contains(out, "another producer took") || strings.Contains(out, "session broken") {
			t.Errorf("%s was fenced or replaced its session:\n%s", p.Name, out)
		}
		var start struct{ Instance string }
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"processor starting"`) {
				_ = json.Unmarshal([]byte(line), &start)
			}
		}
		ids[start.Instance] = true
	}
	if len(ids) != 2 || ids[""] {
		t.Fatalf("instance ids %v: want two different ones from the state dirs", ids)
	}
	t.Logf("two processors with default instance ids %v: %d keys done once, %d calls", ids, n, total)
}

// TestTwinInstanceIDStops: two processors given the same HOOKLINE_INSTANCE_ID
// fence each other's transactions; one stops with an error naming the id and
// the setting, instead of both churning.
func TestTwinInstanceIDStops(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{})
	sys.StartIngest()
	same := map[string]string{"HOOKLINE_INSTANCE_ID": "twin"}
	procs := []*e2e.Service{sys.StartProcessor("p1", same), sys.StartProcessor("p2", same)}
	// The flow drives the transactions that fence; once one processor has
	// stopped, the rest of it (3000 is a cap: 30 s) tells nothing more.
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 3000, Rate: 100, Providers: []string{"stripe"}, ID: "twin"})
	defer func() { flow.Stop(); flow.Wait() }()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		for _, p := range procs {
			if p.Proc.Exited() {
				out := p.Output()
				if !strings.Contains(out, `share instance id "twin"`) || !strings.Contains(out, "HOOKLINE_INSTANCE_ID") {
					t.Fatalf("%s stopped without naming the shared instance id:\n%s", p.Name, lastLines(out, 5))
				}
				t.Logf("%s stopped: %s", p.Name, lastLines(out, 1))
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("two processors sharing an instance id both still run after 3 minutes:\n%s", lastLines(procs[0].Output(), 10))
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
