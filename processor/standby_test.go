package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/processor/internal/decide"
)

// restored reads the "partition restored" lines of a processor's log: the
// changelog records each restore read, in log order.
func restored(t *testing.T, log string) []int64 {
	t.Helper()
	var out []int64
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"partition restored"`) {
			continue
		}
		var l struct {
			Records int64 `json:"records"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("restore line %q: %v", line, err)
		}
		out = append(out, l.Records)
	}
	return out
}

// TestStandbyTakesOverAfterSIGKILL: two processors with
// HOOKLINE_STANDBY_REPLICAS=1 share six partitions, each keeping the
// other's warm. One is killed with SIGKILL; the other takes its three
// partitions and restores each from its standby checkpoint: a few records,
// not the ~500 of changelog each holds. Every key ends done once.
func TestStandbyTakesOverAfterSIGKILL(t *testing.T) {
	skipShort(t)
	const n = 3000
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	sys.StartIngest()
	env := map[string]string{"HOOKLINE_STANDBY_REPLICAS": "1", "HOOKLINE_SESSION_TIMEOUT": "6s"}
	p1 := sys.StartProcessor("p1", env)
	p2 := sys.StartProcessor("p2", env)
	outcomes := sys.Read(sys.Names.Outcomes)
	keys := postAll(t, sys, "evt_standby", n, 8)
	outcomes.Until(2*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool { return doneKeys(t, rs) >= n })
	time.Sleep(7 * time.Second) // a standby catch-up (every 5 s) after the last record

	before := len(restored(t, p1.Output()))
	p2.Kill(t)
	more := postAll(t, sys, "evt_standby_after", 300, 4)
	recs := outcomes.Until(2*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool { return doneKeys(t, rs) >= n+300 })
	after := restored(t, p1.Output())[before:]
	if len(after) < 3 {
		t.Fatalf("p1 restored %d partitions after p2's kill, want p2's 3 (restores %v)", len(after), after)
	}
	var total int64
	for _, r := range after {
		total += r
	}
	t.Logf("p1's restores of p2's partitions after the kill read %v changelog records (each partition holds about %d)", after, n/6)
	if total > 100 {
		t.Errorf("p1 read %d changelog records taking over p2's partitions, want a few: it kept them warm as their standby", total)
	}
	done, _ := doneCount(t, recs)
	for _, k := range append(keys, more...) {
		if done[k] != 1 {
			t.Fatalf("%s has %d done outcomes, want 1", k, done[k])
		}
	}
}

// TestStandbyResumesWithinTwoSeconds is issue 12's standby acceptance: two
// processors with HOOKLINE_STANDBY_REPLICAS=1 over six partitions whose
// changelog holds standbyKeys states (1,000,000 by default), a flow of
// deliveries running. One processor is stopped with SIGTERM: its
// partitions' restores on the other read a few records, not their share of
// the million, and each resumes within sigtermWithin of the assignment (the
// "first record processed since restore" line's since_assigned; measured
// 65-134 ms: the 2 s of the title, with room for a loaded machine). It
// comes back, both are warm again, and it is killed with SIGKILL: the
// restores read a few records again, and each partition resumes before
// the broker's transaction timeout has had the time to end a transaction
// the killed one left open on it (nothing else can end one: the partition
// waits for it whatever the standbys did; measured within 2 s of the
// assignment when none was open). The ledger ends lost 0, doubled 0.
//
// HOOKLINE_STANDBY_TEST_KEYS changes the number of states;
// HOOKLINE_STANDBY_TEST_REPLICAS=0 runs the same scenario without standbys,
// the baseline (the processors are then only waited for until ready; with
// enough states a takeover misses the 2 s and the test says by how much).
func TestStandbyResumesWithinTwoSeconds(t *testing.T) {
	skipShort(t)
	keys := e2e.EnvCount(t, "HOOKLINE_STANDBY_TEST_KEYS", 1_000_000, 6)
	replicas := e2e.EnvCount(t, "HOOKLINE_STANDBY_TEST_REPLICAS", 1, 0)
	const (
		session       = 6 * time.Second
		sigtermWithin = 5 * time.Second
		// txnTimeout is the processors' HOOKLINE_TRANSACTION_TIMEOUT,
		// shorter than the default minute: what the kill leaves open ends
		// sooner, and the bound below is still the transaction timeout's.
		txnTimeout = 15 * time.Second
		// killWithin: the transaction timeout plus the broker's check for
		// timed-out transactions
		// (transaction.abort.timed.out.transaction.cleanup.interval.ms,
		// 10 s) plus room for a loaded machine.
		killWithin = txnTimeout + 10*time.Second + 10*time.Second
		// fewRecords: a warm standby's restore reads the seconds of
		// changelog since its last catch-up, not a sixth of the states.
		fewRecords = 2000
	)
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	sys.EnsureTopics()
	fillChangelog(t, sys, keys, 6)
	sys.StartIngest()
	env := map[string]string{"HOOKLINE_STANDBY_REPLICAS": strconv.Itoa(replicas), "HOOKLINE_SESSION_TIMEOUT": session.String(),
		"HOOKLINE_TRANSACTION_TIMEOUT": txnTimeout.String()}
	p1 := sys.StartProcessor("p1", env)
	p2 := sys.StartProcessor("p2", env)
	warm(t, 3*time.Minute, replicas, p1, p2)
	var read int64
	for _, r := range append(restored(t, p1.Output()), restored(t, p2.Output())...) {
		read += r
	}
	t.Logf("owners' restores read %d changelog records before the takeovers", read)
	if read < int64(keys)/2 {
		t.Fatalf("owners' restores read %d changelog records, want at least half of the %d states: the test must restore a full changelog", read, keys)
	}

	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 1500, Rate: 150, ID: "standby-term", Duplicates: 0.1})
	time.Sleep(3 * time.Second)
	mark := len(p1.Output())
	p2.Stop(t)
	term := takeovers(t, p1, mark, 3, 30*time.Second)
	taken := restored(t, p1.Output()[mark:])
	t.Logf("SIGTERM: p1's restores of p2's partitions read %v changelog records", taken)
	checkFew(t, "SIGTERM", taken, replicas, fewRecords)
	for part, r := range term {
		t.Logf("SIGTERM: partition %d: first record on p1 %s after its assignment", part, r.SinceAssigned)
		if r.SinceAssigned > sigtermWithin {
			t.Errorf("SIGTERM: partition %d resumed %s after its assignment, want within %s (a warm standby restores seconds of changelog, and a graceful stop leaves no transaction open)", part, r.SinceAssigned, sigtermWithin)
		}
	}

	flow.Wait()

	p2 = sys.Restart(p2)
	warm(t, 3*time.Minute, replicas, p1, p2)
	flow = sys.StartFlow(e2e.FlowOptions{Deliveries: 1500, Rate: 150, ID: "standby-kill", Duplicates: 0.1})
	time.Sleep(3 * time.Second)
	mark = len(p1.Output())
	killed := time.Now()
	p2.Kill(t)
	kill := takeovers(t, p1, mark, 3, session+killWithin+10*time.Second)
	taken = restored(t, p1.Output()[mark:])
	t.Logf("SIGKILL: p1's restores of p2's partitions read %v changelog records", taken)
	checkFew(t, "SIGKILL", taken, replicas, fewRecords)
	for part, r := range kill {
		t.Logf("SIGKILL: partition %d: first record on p1 %s after its assignment, %s after the kill (session timeout %s)",
			part, r.SinceAssigned, r.At.Sub(killed).Round(time.Millisecond), session)
		if r.SinceAssigned > killWithin {
			t.Errorf("SIGKILL: partition %d resumed %s after its assignment, want within %s (the transaction timeout ends what the killed processor left open)", part, r.SinceAssigned, killWithin)
		}
	}
	flow.Wait()
	// A kill repeats the calls of the open transaction (its records are read
	// again by the new owner).
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: 500})
}

// checkFew fails the test when a takeover's restores read more than few
// changelog records in all (with standbys: the warm state was not used).
func checkFew(t *testing.T, phase string, read []int64, replicas int, few int64) {
	t.Helper()
	var total int64
	for _, r := range read {
		total += r
	}
	if replicas > 0 && total > few {
		t.Errorf("%s: the takeover's restores read %d changelog records (%v), want at most %d: the standby was not warm", phase, total, read, few)
	}
}

// fillChangelog writes n done states, spread over the changelog's
// partitions, as a processor would have: the store every restore and
// standby of the test rebuilds.
func fillChangelog(t *testing.T, sys *e2e.System, n, parts int) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	v, err := decide.Encode(decide.State{Status: decide.StatusDone, Provider: "stripe", FirstSeenAt: now, UpdatedAt: now, ExpiresAt: now.Add(7 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	cl := kafkatest.Client(t, sys.Brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100_000))
	start := time.Now()
	var failed atomic.Value
	for i := range n {
		r := &kgo.Record{Topic: sys.Names.Changelog, Partition: int32(i % parts), Key: fmt.Appendf(nil, "stripe:evt_fill_%08d", i), Value: v}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("filling the changelog: %v", err)
	}
	t.Logf("changelog: %d states written in %s", n, time.Since(start).Round(time.Millisecond))
}

// warm waits until every processor is ready and, with standbys, has caught
// up its three standby partitions with the changelog: each named, each
// with a lag gauge (set by a catch-up) under 1,000 records.
func warm(t *testing.T, timeout time.Duration, replicas int, procs ...*e2e.Service) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for _, p := range procs {
		// Its share of the six partitions, restored.
		for {
			owned, err := ownedPartitions(p)
			if err == nil && owned == float64(6/len(procs)) && ready(p) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("processor at %s: not ready with %d partitions within %s (owns %v, %v)", p.Addr, 6/len(procs), timeout, owned, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if replicas == 0 {
			t.Logf("processor at %s: ready after %s (no standbys)", p.Addr, time.Since(start).Round(time.Millisecond))
			continue
		}
		for {
			lags, named := standbyLags(t, p)
			ok := named == 3 && len(lags) == 3
			for _, l := range lags {
				ok = ok && l < 1000
			}
			if ok {
				t.Logf("processor at %s: standbys warm after %s (lag %v)", p.Addr, time.Since(start).Round(time.Millisecond), lags)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("processor at %s: standbys not warm within %s: %v standby partitions, lags %v", p.Addr, timeout, named, lags)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// ready reports whether a processor's /readyz answers 200.
func ready(p *e2e.Service) bool {
	resp, err := http.Get("http://" + p.Addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ownedPartitions is how many partitions a processor owns: assigned less
// revoked and lost, from its rebalance counter.
func ownedPartitions(p *e2e.Service) (float64, error) {
	url := "http://" + p.Addr + "/metrics"
	var n [3]float64
	for i, kind := range []string{"assigned", "revoked", "lost"} {
		v, err := loadtest.CounterSum(context.Background(), url, "hookline_processor_partitions_rebalanced_total", `kind="`+kind+`"`)
		if err != nil {
			return 0, err
		}
		n[i] = v
	}
	return n[0] - n[1] - n[2], nil
}

// standbyLags scrapes a processor's standby gauges.
func standbyLags(t *testing.T, p *e2e.Service) (map[string]float64, float64) {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + "/metrics")
	if err != nil {
		return nil, 0
	}
	defer resp.Body.Close()
	lags, named := map[string]float64{}, 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		if part, ok := strings.CutPrefix(line[:sp], `hookline_processor_standby_lag{partition="`); ok {
			lags[strings.TrimSuffix(part, `"}`)] = v
		} else if line[:sp] == "hookline_processor_standby_partitions" {
			named = v
		}
	}
	return lags, named
}

// resumed is one "first record processed since restore" line.
type resumed struct {
	At            time.Time
	SinceAssigned time.Duration
}

// takeovers waits until p's log, past mark, holds n "first record
// processed since restore" lines and returns them by partition.
func takeovers(t *testing.T, p *e2e.Service, mark, n int, timeout time.Duration) map[int32]resumed {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := map[int32]resumed{}
		for _, line := range strings.Split(p.Output()[mark:], "\n") {
			if !strings.Contains(line, `"first record processed since restore"`) {
				continue
			}
			var l struct {
				Time          time.Time `json:"time"`
				Partition     int32     `json:"partition"`
				SinceAssigned string    `json:"since_assigned"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("%s: log line %q: %v", p.Name, line, err)
			}
			d, err := time.ParseDuration(l.SinceAssigned)
			if err != nil {
				t.Fatalf("%s: since_assigned in %q: %v", p.Name, line, err)
			}
			out[l.Partition] = resumed{At: l.Time, SinceAssigned: d}
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d partitions resumed within %s, want %d (%v)\n%s", p.Name, len(out), timeout, n, out, p.Output()[mark:])
		}
		time.Sleep(200 * time.Millisecond)
	}
}
