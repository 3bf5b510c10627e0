package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// repeatBound is what a processor whose session a broker outage broke may
// call again: the finished calls not yet committed (at most the default
// HOOKLINE_BATCH_MAX_RECORDS, 500) and the calls in flight (at most the
// default HOOKLINE_MAX_INFLIGHT, 64, per destination: the harness's six
// providers).
var repeatBound = 500 + len(e2e.MixedProviders)*64

// supervisor restarts services that exit, as their supervisor does in a
// deployment (docker-compose.yml: restart: unless-stopped), and counts the
// exits, each of which fails the test: every service must ride out a broker
// failure. (franz-go gives up a transaction whose coordinator it cannot
// dial, "no returned error is retryable"; the processor then replaces its
// transactional session instead of exiting.) The restart lets the ledger
// still count what an exit cost.
type supervisor struct {
	t     *testing.T
	sys   *e2e.System
	svcs  []*e2e.Service
	exits map[string]int
	begin time.Time
	past  map[string][]string // output of the exited incarnations, by service
}

func supervise(t *testing.T, sys *e2e.System, svcs ...*e2e.Service) *supervisor {
	return &supervisor{t: t, sys: sys, svcs: svcs, exits: map[string]int{}, begin: time.Now(), past: map[string][]string{}}
}

// check restarts every service that has exited. None may: while Kafka is
// away ingest answers 503 (providers retry), and the processor and the
// retrier wait for it.
func (s *supervisor) check() {
	s.t.Helper()
	for i, svc := range s.svcs {
		if !svc.Exited() {
			continue
		}
		s.exits[svc.Name]++
		s.t.Logf("%s exited at %s: %s; restarting it, as its supervisor would", svc.Name,
			time.Since(s.begin).Round(100*time.Millisecond), lastLine(svc.Output()))
		s.t.Errorf("%s exited while Kafka was failing: it must wait for Kafka, not die", svc.Name)
		s.past[svc.Name] = append(s.past[svc.Name], svc.Output())
		s.svcs[i] = s.sys.Restart(svc)
	}
}

// waitCommitting waits until the processor commits transactions: its
// committed count grows within a few seconds.
func (s *supervisor) waitCommitting(name string) {
	s.t.Helper()
	committed := func() float64 {
		return s.counter("processor", "hookline_processor_transactions_total", `result="committed"`)
	}
	before := committed()
	waitFor(s.t, time.Minute, "processor "+name+" committing", func() bool { return committed() > before }, s.check)
}

// counter sums a counter of the named service's current incarnation (0
// when it cannot be read).
func (s *supervisor) counter(service, name string, match ...string) float64 {
	for _, svc := range s.svcs {
		if svc.Name == service {
			v, _ := loadtest.CounterSum(s.t.Context(), "http://"+svc.Addr+"/metrics", name, match...)
			return v
		}
	}
	return 0
}

// logLines returns the log lines of every incarnation of the named service
// that contain msg.
func (s *supervisor) logLines(name, msg string) []string {
	outs := s.past[name]
	for _, svc := range s.svcs {
		if svc.Name == name {
			outs = append(outs, svc.Output())
		}
	}
	var lines []string
	for _, out := range outs {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, msg) {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// String lists the exits per service.
func (s *supervisor) String() string {
	return fmt.Sprintf("service exits (restarted): ingest=%d processor=%d retrier=%d",
		s.exits["ingest"], s.exits["processor"], s.exits["retrier"])
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// waitFor waits until cond holds, calling tick on every round, and fails the
// test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, tick func()) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		tick()
		time.Sleep(50 * time.Millisecond)
	}
}

// flowDone reports whether the flow has finished.
func flowDone(f *e2e.Flow) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// TestBrokerRestartsUnderFlow stops the only broker (SIGTERM) three times
// while providers deliver, each time for longer than ingest's 5 s produce
// deadline, and starts it again: ingest answers 503 meanwhile (providers
// retry), accepts again once the broker is back, and nothing it accepted is
// lost or done twice. A processor or retrier that exits meanwhile is
// restarted, as its supervisor would, and counted in the log. The broker is
// a private one: the shared broker other tests use is never stopped.
//
// In about one run of three a stop leaves a hanging transaction: the
// broker, in controlled shutdown as the only replica, skips the markers of
// the processor's last commit (see processor/internal/hanging). Before the
// processor completed those itself, it then never read one raw partition
// again. The log lines it writes for them are printed here.
func TestBrokerRestartsUnderFlow(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	broker := kafkatest.StartCluster(t, 1)
	sys := e2e.New(t, e2e.Options{Brokers: broker.Brokers(), Partitions: 4})
	sup := supervise(t, sys, sys.StartIngest(), sys.StartProcessor("p1", nil), sys.StartRetrier(nil))

	// The flow runs until the last restart is over (about 16 s each on a
	// quiet machine, up to twice that on a loaded one), then stops; the
	// cap is ten minutes of it.
	const deliveries, rate, restarts = 45000, 75, 3
	begin := time.Now()
	since := func() time.Duration { return time.Since(begin).Round(100 * time.Millisecond) }
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: deliveries, Rate: rate, Duplicates: 0.2})
	waitFor(t, time.Minute, "480 deliveries started", func() bool { return flow.Started() >= 480 }, sup.check)
	var acceptedAtLastStart int
	for i := 1; i <= restarts; i++ {
		if flowDone(flow) {
			t.Fatalf("the flow ended before restart %d: the restarts are not under load", i)
		}
		// Stop the broker while the processor commits transactions: that is
		// when a stop can leave one hanging.
		sup.waitCommitting("p1")
		stopAt := since()
		broker.Stop(1)
		down := since()
		time.Sleep(6 * time.Second) // past ingest's produce deadline: in-flight requests get 503
		startAt := since()
		broker.Start(1)
		ready := since()
		acceptedAtLastStart = flow.Accepted()
		// Ingest takes deliveries again (100 more) before the next stop.
		want := acceptedAtLastStart + 100
		waitFor(t, time.Minute, "ingest accepts again after the broker restart",
			func() bool { return flow.Accepted() >= want }, sup.check)
		t.Logf("restart %d: SIGTERM at %s, broker gone at %s, start at %s, ready at %s, %d more accepted at %s (%d in all)",
			i, stopAt, down, startAt, ready, want-acceptedAtLastStart, since(), flow.Accepted())
		// Some time up before the next stop, for the processor to commit.
		up := time.Now().Add(5 * time.Second)
		waitFor(t, time.Minute, "5 s up", func() bool { return time.Now().After(up) }, sup.check)
	}
	flow.Stop()
	waitFor(t, 3*time.Minute, "the flow ends", func() bool { return flowDone(flow) }, sup.check)
	st := flow.Wait()
	sup.check()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{Timeout: 2 * time.Minute, AllDone: true, ExtraCalls: restarts * repeatBound})
	// A stop can leave a transaction whose markers the broker skipped
	// (package processor/internal/hanging); the processor must complete it.
	hung := sup.logLines("processor", `"msg":"hanging transaction`)
	for _, l := range hung {
		t.Logf("processor: %s", l)
	}
	t.Logf("503 answers: %d, connection errors: %d, extra destination calls: %d (bound %d); %s; transactional sessions the processor replaced: %d; hanging transactions it found: %d",
		st.Answers[503], st.Answers[0], tally.ExtraCalls, restarts*repeatBound, sup,
		len(sup.logLines("processor", `"msg":"transactional session broken`)), len(hung))

	if st.Answers[503] == 0 {
		t.Errorf("no 503 while the only broker was down three times for over 6 s: ingest must refuse what Kafka did not acknowledge")
	}
	if st.Accepted <= acceptedAtLastStart {
		t.Errorf("ingest accepted nothing after the last restart (%d accepted by then, %d in all)", acceptedAtLastStart, st.Accepted)
	}
	if st.Accepted != st.Deliveries {
		t.Errorf("%d of %d deliveries accepted: every delivery must be accepted once the broker is back", st.Accepted, st.Deliveries)
	}
	if tally.Done != tally.Accepted {
		t.Errorf("%d of %d keys done", tally.Done, tally.Accepted)
	}
}

// TestBrokerKilledInCluster kills one broker of three with SIGKILL under a
// steady flow of 150 deliveries/s, a tenth of keys failing once at the
// destination (retry tiers 1s,2s), keeps it down past its session timeout
// (9 s: the controller fences it and moves its leaderships), and starts it
// again: with replication factor 3, min.insync.replicas 2 and ingest
// producing with acks=all, nothing accepted is lost or done twice, every
// key is done within a minute of the node's return, no key goes around the
// retry tiers more than three times, and the node rejoins every ISR.
//
// Before the processor parked records (docs/processor.md), this scenario
// fed itself: destination timeouts opened the breaker, the open breaker
// sent every record around the 1s tier again and again (380,000 retrying
// outcomes, one key 226 times), and nine minutes later 362 of 3,000 keys
// were still not done. Nothing here makes the destination time out, so the
// breakers trip on the failing tenth instead: three failures in a row (most
// runs open several breakers; the default five almost never do), with a
// 5 s cool-down so that a breaker reopening late in the run (a probe or
// a drained lane meeting three failing keys) does not stack 30 s waits.
// The one-lane processor fails this test (a key with up to 27 retrying
// outcomes in one run with the default cool-down, 7 and 6 in two runs with
// this one) and passed it, in one run, with the default breaker, whose
// threshold the failing tenth did not reach.
func TestBrokerKilledInCluster(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	const (
		deliveries = 90000 // the cap: ten minutes; the flow stops 20 s after the node's start
		rate       = 150
		failing    = 0.1              // share of keys whose first call fails
		down       = 10 * time.Second // past broker.session.timeout.ms (9 s)
		doneWithin = time.Minute      // of the node's return
		maxRetries = 3                // retrying outcomes of one key
	)
	breaker := map[string]string{"HOOKLINE_BREAKER_FAILURES": "3", "HOOKLINE_BREAKER_COOLDOWN": "5s"}
	cluster := kafkatest.StartCluster(t, 3)
	sys := e2e.New(t, e2e.Options{Brokers: cluster.Brokers(), Partitions: 6, Tiers: "1s,2s",
		Env: map[string]string{"HOOKLINE_REPLICATION_FACTOR": "3"}})
	failSome(sys.Dest, failing)
	proc := sys.StartProcessor("p1", breaker)
	sup := supervise(t, sys, sys.StartIngest(), proc, sys.StartRetrier(nil))
	breakers := watchBreakers(t, proc.Addr) // a restart keeps the address

	// Every topic the services created is replicated three times. The
	// broker that answers may not have learnt of a topic created a moment
	// ago (each node follows the metadata log on its own): ask until every
	// topic is there, for up to 30 s.
	adm := kadm.NewClient(kafkatest.Client(t, cluster.Brokers()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var td kadm.TopicDetails
	for {
		var err error
		td, err = adm.ListTopics(ctx, sys.Names.All()...)
		var missing []string
		for _, name := range sys.Names.All() {
			if d, ok := td[name]; err != nil || !ok || d.Err != nil || len(d.Partitions) == 0 {
				missing = append(missing, fmt.Sprintf("%s (%v)", name, errors.Join(err, d.Err)))
			}
		}
		if len(missing) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("topics missing 30 s after the services started: %s", strings.Join(missing, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range sys.Names.All() {
		d := td[name]
		for _, p := range d.Partitions {
			if len(p.Replicas) != 3 {
				t.Errorf("%s[%d] has replicas %v: want 3", name, p.Partition, p.Replicas)
			}
		}
	}
	// Kill the leader of raw's partition 0, so leadership has to move
	// under ingest's producer.
	victim := int(td[sys.Names.Raw].Partitions[0].Leader)

	begin := time.Now()
	since := func() time.Duration { return time.Since(begin).Round(100 * time.Millisecond) }
	// The kill at 4 s of flow, the start 10 s later, the node back (3 to
	// 13 s of start), and 20 s more of flow after the start.
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: deliveries, Rate: rate, Duplicates: 0.2})
	waitFor(t, 2*time.Minute, "600 deliveries started", func() bool { return flow.Started() >= 600 }, sup.check)
	killAt := since()
	cluster.Kill(victim)
	t.Logf("node %d (leader of %s[0]) killed at %s with %d deliveries accepted", victim, sys.Names.Raw, killAt, flow.Accepted())
	back := time.Now().Add(down)
	waitFor(t, time.Minute, fmt.Sprintf("%s with the node down", down), func() bool { return time.Now().After(back) }, sup.check)
	startAt := since()
	if flowDone(flow) {
		t.Errorf("the flow ended before node %d came back: the restart was not under load", victim)
	}
	cluster.Start(victim)
	returned := time.Now()
	t.Logf("node %d started at %s, registered at %s, %d deliveries accepted, flow still running: %v",
		victim, startAt, since(), flow.Accepted(), !flowDone(flow))
	more := time.Now().Add(20 * time.Second)
	waitFor(t, time.Minute, "20 s of flow after the start", func() bool { return time.Now().After(more) }, sup.check)
	flow.Stop()
	waitFor(t, 3*time.Minute, "the flow ends", func() bool { return flowDone(flow) }, sup.check)
	flowEnd := time.Now()
	st := flow.Wait()
	sup.check()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{Timeout: 2 * time.Minute, AllDone: true, ExtraCalls: repeatBound})
	cluster.WaitInSync(time.Minute, sys.Names.All()...)
	t.Logf("node %d back in every ISR at %s; 503 answers: %d, connection errors: %d, extra destination calls: %d; %s; "+
		"transactional sessions the processor replaced: %d, transactions aborted: %.0f, raw partitions revoked %.0f and lost %.0f, parked outcomes: %d",
		victim, since(), st.Answers[503], st.Answers[0], tally.ExtraCalls, sup,
		len(sup.logLines("processor", `"msg":"transactional session broken`)),
		sup.counter("processor", "hookline_processor_transactions_total", `result="aborted"`),
		sup.counter("processor", "hookline_processor_partitions_rebalanced_total", `kind="revoked"`),
		sup.counter("processor", "hookline_processor_partitions_rebalanced_total", `kind="lost"`), sys.Ledger().Parked())
	if st.Accepted != st.Deliveries {
		t.Errorf("%d of %d deliveries accepted", st.Accepted, st.Deliveries)
	}
	if tally.Done != tally.Accepted {
		t.Errorf("%d of %d keys done", tally.Done, tally.Accepted)
	}
	if tally.Settled.IsZero() {
		t.Errorf("not every key done: want all done within %s of node %d's return", doneWithin, victim)
	} else if took := tally.Settled.Sub(returned); took > doneWithin {
		t.Errorf("every key done %s after node %d's return: want within %s", took.Round(time.Second), victim, doneWithin)
	} else {
		t.Logf("every key done %s after node %d's return (%s after the flow's end)", took.Round(time.Second), victim,
			tally.Settled.Sub(flowEnd).Round(time.Second))
	}
	t.Logf("circuit breakers: %s", breakers())
	checkRetrying(t, sys.Ledger(), failing, maxRetries)
}

// watchBreakers samples the processor's hookline_processor_breaker_open
// gauges at addr every 250 ms until the returned function is called, which
// says how many destinations had an open breaker at most and for how long
// any had (to within the sampling).
func watchBreakers(t *testing.T, addr string) func() string {
	const every = 250 * time.Millisecond
	stop, done := make(chan struct{}), make(chan string)
	go func() {
		var most float64
		var open time.Duration
		samples := 0
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- fmt.Sprintf("at most %.0f open at once, some open for %s (%d samples read)", most, open, samples)
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n, err := loadtest.CounterSum(ctx, "http://"+addr+"/metrics", "hookline_processor_breaker_open")
			cancel()
			if err == nil {
				samples++
			}
			if err == nil && n > 0 {
				most, open = max(most, n), open+every
			}
		}
	}()
	var once sync.Once
	var summary string
	finish := func() string {
		once.Do(func() { close(stop); summary = <-done })
		return summary
	}
	t.Cleanup(func() { finish() })
	return finish
}

// checkRetrying counts the retrying outcomes of every accepted key, logs
// their distribution for the keys the destination fails once (a share of
// keys by e2e.KeyFraction) and for the others, and fails the test when a
// key has more than limit, or when the failing keys did not go through the
// retry tiers at all (then the scenario did not exercise them).
func checkRetrying(t *testing.T, l *e2e.Ledger, share float64, limit int) {
	t.Helper()
	perKey := map[bool]map[int]int{true: {}, false: {}} // failing? -> retrying outcomes -> keys
	var total, worst, retried, failingKeys int
	var worstKey string
	for _, k := range l.Keys() {
		n, failing := l.Outcomes(k).Retrying, e2e.KeyFraction(k) < share
		perKey[failing][n]++
		total += n
		if failing {
			failingKeys++
			if n > 0 {
				retried++
			}
		}
		if n > worst {
			worst, worstKey = n, k
		}
	}
	t.Logf("retrying outcomes: %d in all, at most %d for one key (%s); keys by retrying outcomes: failing once %v, others %v",
		total, worst, worstKey, perKey[true], perKey[false])
	if worst > limit {
		t.Errorf("%s has %d retrying outcomes: want at most %d per key", worstKey, worst, limit)
	}
	if retried < failingKeys/2 {
		t.Errorf("%d of %d keys failing once went through a retry tier: the scenario did not exercise the tiers", retried, failingKeys)
	}
}
