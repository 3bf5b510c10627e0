package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/e2e"
	"github.com/hookline/hookline/pkg/kafkatest"
	"github.com/hookline/hookline/pkg/loadtest"
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
		for _, svc := range s.svcs {
			if svc.Name == "processor" {
				v, _ := loadtest.CounterSum(s.t.Context(), "http://"+svc.Addr+"/metrics",
					"hookline_processor_transactions_total", `result="committed"`)
				return v
			}
		}
		return 0
	}
	before := committed()
	waitFor(s.t, time.Minute, "processor "+name+" committing", func() bool { return committed() > before }, s.check)
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
	broker := kafkatest.StartCluster(t, 1)
	sys := e2e.New(t, e2e.Options{Brokers: broker.Brokers(), Partitions: 4})
	sup := supervise(t, sys, sys.StartIngest(), sys.StartProcessor("p1", nil), sys.StartRetrier(nil))

	// 64 s of flow; the three restarts take about 16 s each and all fall
	// within it.
	const deliveries, rate, restarts = 4800, 75, 3
	begin := time.Now()
	since := func() time.Duration { return time.Since(begin).Round(100 * time.Millisecond) }
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: deliveries, Rate: rate, Duplicates: 0.2})
	waitFor(t, time.Minute, "a tenth of the flow started", func() bool { return flow.Started() >= deliveries/10 }, sup.check)
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
		want := min(acceptedAtLastStart+100, deliveries)
		waitFor(t, time.Minute, "ingest accepts again after the broker restart",
			func() bool { return flow.Accepted() >= want }, sup.check)
		t.Logf("restart %d: SIGTERM at %s, broker gone at %s, start at %s, ready at %s, %d more accepted at %s (%d in all)",
			i, stopAt, down, startAt, ready, want-acceptedAtLastStart, since(), flow.Accepted())
		// Some time up before the next stop, for the processor to commit.
		up := time.Now().Add(5 * time.Second)
		waitFor(t, time.Minute, "5 s up", func() bool { return time.Now().After(up) }, sup.check)
	}
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
// steady flow, keeps it down past its session timeout (9 s: the controller
// fences it and moves its leaderships), and starts it again: with
// replication factor 3, min.insync.replicas 2 and ingest producing with
// acks=all, nothing accepted is lost or done twice, and the node rejoins
// every ISR.
func TestBrokerKilledInCluster(t *testing.T) {
	skipShort(t)
	cluster := kafkatest.StartCluster(t, 3)
	sys := e2e.New(t, e2e.Options{Brokers: cluster.Brokers(), Partitions: 6,
		Env: map[string]string{"HOOKLINE_REPLICATION_FACTOR": "3"}})
	sup := supervise(t, sys, sys.StartIngest(), sys.StartProcessor("p1", nil), sys.StartRetrier(nil))

	// Every topic the services created is replicated three times.
	adm := kadm.NewClient(kafkatest.Client(t, cluster.Brokers()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, sys.Names.All()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sys.Names.All() {
		d, ok := td[name]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			t.Fatalf("topic %s: missing (%v)", name, d.Err)
		}
		for _, p := range d.Partitions {
			if len(p.Replicas) != 3 {
				t.Errorf("%s[%d] has replicas %v: want 3", name, p.Partition, p.Replicas)
			}
		}
	}
	// Kill the leader of raw's partition 0, so leadership has to move
	// under ingest's producer.
	victim := int(td[sys.Names.Raw].Partitions[0].Leader)

	const deliveries = 6000
	begin := time.Now()
	since := func() time.Duration { return time.Since(begin).Round(100 * time.Millisecond) }
	// 40 s of flow: the kill at 4 s, the start at 16 s, the node back
	// (3 to 13 s of start) well before the end.
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: deliveries, Rate: 150, Duplicates: 0.2})
	waitFor(t, 2*time.Minute, "a tenth of the flow started", func() bool { return flow.Started() >= deliveries/10 }, sup.check)
	killAt := since()
	cluster.Kill(victim)
	t.Logf("node %d (leader of %s[0]) killed at %s with %d deliveries accepted", victim, sys.Names.Raw, killAt, flow.Accepted())
	back := time.Now().Add(12 * time.Second) // past broker.session.timeout.ms (9 s)
	waitFor(t, time.Minute, "12 s with the node down", func() bool { return time.Now().After(back) }, sup.check)
	startAt := since()
	if flowDone(flow) {
		t.Errorf("the flow ended before node %d came back: the restart was not under load", victim)
	}
	cluster.Start(victim)
	t.Logf("node %d started at %s, registered at %s, %d deliveries accepted, flow still running: %v",
		victim, startAt, since(), flow.Accepted(), !flowDone(flow))

	waitFor(t, 3*time.Minute, "the flow ends", func() bool { return flowDone(flow) }, sup.check)
	st := flow.Wait()
	sup.check()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{Timeout: 2 * time.Minute, AllDone: true, ExtraCalls: repeatBound})
	cluster.WaitInSync(time.Minute, sys.Names.All()...)
	t.Logf("node %d back in every ISR at %s; 503 answers: %d, connection errors: %d, extra destination calls: %d; %s",
		victim, since(), st.Answers[503], st.Answers[0], tally.ExtraCalls, sup)
	if st.Accepted != st.Deliveries {
		t.Errorf("%d of %d deliveries accepted", st.Accepted, st.Deliveries)
	}
	if tally.Done != tally.Accepted {
		t.Errorf("%d of %d keys done", tally.Done, tally.Accepted)
	}
}
