package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	benchreport "github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// TestBenchSmall runs the whole benchmark with tiny phases, so the program
// cannot rot: services, the four phases, the baseline and the exactly-once
// check. (Its isolation phases are too short to judge isolation: a second of
// slowcrm fits any processor's in-flight bound.)
func TestBenchSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ingest, processor, retrier and ProducerPerformance against a broker: not in -short")
	}
	if os.Getenv("KAFKA_BROKERS") == "" {
		t.Skip("KAFKA_BROKERS is not set (the benchmark uses the broker's ProducerPerformance; make test sets it)")
	}
	c := defaultConfig()
	c.Conns, c.Closed, c.Open, c.PerfRecords, c.Warmup, c.Drain = 4, time.Second, time.Second, 1000, 300*time.Millisecond, time.Minute
	c.IsoAlone, c.IsoTogether = time.Second, time.Second
	c.OrdEntities, c.OrdFailEntities, c.OrdRate, c.OrdDur = 100, 10, 50, time.Second
	c.HalfRounds = 2 // the alternation of phases 2 and 5
	c.HalfWarm = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := run(ctx, c, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	for _, r := range []phaseReport{rep.Closed, rep.Opened} {
		if r.Events == 0 || r.E2ERate <= 0 || len(r.Total) != r.Events || r.Txns == 0 {
			t.Errorf("%s: %d events, %.0f/s, %d latencies, %.0f transactions: want some of each, one latency per event", r.Name, r.Events, r.E2ERate, len(r.Total), r.Txns)
		}
		if r.Busy <= 0 || r.Busy > r.All {
			t.Errorf("%s: the machine busy %s of %s: want some, at most all", r.Name, r.Busy, r.All)
		}
	}
	if !strings.Contains(out.String(), "cores busy (") {
		t.Errorf("no line of how busy the machine was in the output")
	}
	if rep.Verified < rep.Closed.Events+rep.Opened.Events {
		t.Errorf("verified %d keys, fewer than the phases' %d+%d", rep.Verified, rep.Closed.Events, rep.Opened.Events)
	}
	for _, p := range rep.Perf {
		if p.Records != c.PerfRecords || p.RecordsPerSec <= 0 {
			t.Errorf("baseline %+v, want %d records at some rate", p, c.PerfRecords)
		}
	}
	if !strings.Contains(out.String(), "ratio e2e events/s / ProducerPerformance records/s") {
		t.Errorf("no ratio line in the output")
	}
	if !strings.Contains(out.String(), "the slowest 1% (") {
		t.Errorf("no line of the slowest 1%%'s steps in the output")
	}
	iso := rep.Isolation
	if iso.Alone.Keys == 0 || iso.Together.Keys == 0 || iso.Slow.Keys == 0 || iso.Slow.Calls != iso.Slow.Keys ||
		!strings.Contains(out.String(), "ratio fastpay p99 with slowcrm / alone") {
		t.Errorf("isolation: %+v; want keys in each phase, one slowcrm call per key, and the ratio line", iso)
	}
	ord := rep.Ordering
	if len(ord.Rounds) != c.HalfRounds || ord.HalfLoad.Events != ord.Rounds[0].Ordered.Events+ord.Rounds[1].Ordered.Events ||
		rep.Opened.Events != ord.Rounds[0].Unordered.Events+ord.Rounds[1].Unordered.Events ||
		ord.Twin.Events == 0 || ord.Twin.Events != ord.Rounds[0].Twin.Events+ord.Rounds[1].Twin.Events ||
		!strings.Contains(out.String(), "ratio ordered/unordered p99 (ordpay/its twin):") || strings.Count(out.String(), "mean POST -> outcome visible") < 4 {
		t.Errorf("half load: %d rounds, want %d, each phase (twin %d events) pooled over them, the ratio line and the shares of the twin and the ordered phase", len(ord.Rounds), c.HalfRounds, ord.Twin.Events)
	}
	for i, h := range ord.Rounds { // interleaved on one schedule, each at half the rate
		if d := h.Twin.Events - h.Ordered.Events; d < 0 || d > 1 || h.Twin.Ingest.Elapsed != h.Ordered.Ingest.Elapsed {
			t.Errorf("half load, round %d: twin %d events in %s, ordered %d in %s; want as many each (the first one more of an odd count), on one schedule (the same elapsed time)", i+1,
				h.Twin.Events, h.Twin.Ingest.Elapsed, h.Ordered.Events, h.Ordered.Ingest.Elapsed)
		}
	}
	if ord.HalfLoad.Events == 0 || len(ord.HalfLoad.Total) != ord.HalfLoad.Events || ord.Steady.Called == 0 || ord.Failing.Called == 0 ||
		ord.Held.Keys == 0 || ord.Held.Calls != ord.Held.Keys+2 || !strings.Contains(out.String(), "ratio others' p99 with one entity failing / without") {
		t.Errorf("ordering: %+v; want events in each phase, the failing entity's keys called once each plus two failures, and the ratio line", ord)
	}
	checkReportFile(t, rep, "bench-e2e/closed loop e2e events/s", "bench-e2e/open loop 202 to outcome p99",
		"bench-e2e/ratio e2e events/s/ProducerPerformance", "bench-e2e/isolation slowcrm 202 to call p99",
		"bench-e2e/ordered half load 202 to outcome p99", "bench-e2e/unordered twin half load 202 to outcome p99", "bench-e2e/ratio ordered/unordered half load p99 by round", "bench-e2e/keys verified",
		"bench-e2e/ordered and twin interleaved half load CPU per event processor", "bench-e2e/open loop machine busy by round", "bench-e2e/closed loop machine busy")
}

// checkReportFile writes rep's figures to a report file as the program does
// and reads it back: a valid file, every figure named once, the named ones
// there and above zero.
func checkReportFile(t *testing.T, rep report, want ...string) {
	t.Helper()
	rec := benchreport.NewRecorder("bench-e2e")
	rep.record(rec)
	path := filepath.Join(t.TempDir(), "report.json")
	if err := rec.Write(path); err != nil {
		t.Fatal(err)
	}
	f, err := benchreport.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, e := range f.Entries {
		if e.Unit == "" {
			t.Errorf("%s: no unit", e.Name)
		}
		got[e.Name] = e.Value
	}
	for _, n := range want {
		if v, ok := got[n]; !ok || v <= 0 {
			t.Errorf("report figure %q = %v (present %v), want above zero; the file has %d figures", n, v, ok, len(f.Entries))
		}
	}
}

// TestRecord: the figures of a report without a broker, the processor's
// CPU per event by service, and no figure for a phase that did not run.
func TestRecord(t *testing.T) {
	ph := phaseReport{Name: "closed loop", Events: 4, PostRate: 100, E2ERate: 90,
		Total: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond},
		CPU:   map[string]time.Duration{"processor": 400 * time.Microsecond}, Txns: 2, Records: 4, TxnSec: 0.02}
	ms := time.Millisecond
	ph.Taken, ph.Produce, ph.Readable, ph.Committed = []time.Duration{ms, ms}, []time.Duration{ms, 9 * ms}, []time.Duration{ms, 2 * ms}, []time.Duration{ms, ms}
	rep := report{Closed: ph, Opened: ph}
	rep.Perf[0].RecordsPerSec, rep.Perf[1].RecordsPerSec = 1000, 1000
	checkReportFile(t, rep, "bench-e2e/closed loop CPU per event processor", "bench-e2e/open loop e2e events/s",
		"bench-e2e/closed loop processor records per transaction", "bench-e2e/ratio e2e events/s/ProducerPerformance",
		"bench-e2e/open loop slowest 1% taken up to outcome produced mean")
	rec := benchreport.NewRecorder("bench-e2e")
	rep.record(rec)
	for _, e := range rec.Entries() {
		switch e.Name {
		case "bench-e2e/closed loop CPU per event processor":
			if e.Value != 100 {
				t.Errorf("%s = %v, want 400 µs over 4 events = 100", e.Name, e.Value)
			}
		case "bench-e2e/closed loop slowest 1% taken up to outcome produced mean":
			if e.Value != 9 {
				t.Errorf("%s = %v, want the slower key's 9 ms", e.Name, e.Value)
			}
		case "bench-e2e/ordered half load events":
			t.Errorf("%s recorded for a phase that did not run", e.Name)
		}
	}
}

// TestVerify: a key without its outcome, with two, with another status, and
// an outcome nobody posted each fail the run.
func TestVerify(t *testing.T) {
	now := time.Now()
	good := func() (*tracker, *phase) {
		tr, ph := newTracker(), &phase{name: "p"}
		for _, k := range []string{"a", "b"} {
			e := tr.posting(ph, k, now)
			tr.accept(e, now)
			tr.outcome(k, "done", now, now.Add(time.Millisecond))
		}
		return tr, ph
	}
	tr, ph := good()
	if n, err := tr.verify(); err != nil || n != 2 || ph.seen != 2 {
		t.Fatalf("clean run: verify = %d, %v; seen %d; want 2, nil, 2", n, err, ph.seen)
	}
	for _, c := range []struct {
		name  string
		spoil func(tr *tracker, ph *phase)
		want  string
	}{
		{"no outcome", func(tr *tracker, ph *phase) { tr.accept(tr.posting(ph, "c", now), now) }, "c: 0 outcomes"},
		{"two outcomes", func(tr *tracker, ph *phase) { tr.outcome("a", "done", now, now) }, "a: 2 outcomes"},
		{"not done", func(tr *tracker, ph *phase) {
			tr.accept(tr.posting(ph, "c", now), now)
			tr.outcome("c", "dead", now, now)
		}, `c: outcome "dead"`},
		{"never accepted", func(tr *tracker, ph *phase) { tr.posting(ph, "c", now) }, "c: posted, never accepted"},
		{"stray", func(tr *tracker, ph *phase) { tr.outcome("zz", "done", now, now) }, "zz: outcome of a key this run never posted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, ph := good()
			c.spoil(tr, ph)
			_, err := tr.verify()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("verify = %v, want an error naming %q", err, c.want)
			}
		})
	}
}

// TestOutcomeBeforeAccept: an outcome read before its poster recorded the
// 202 still counts once.
func TestOutcomeBeforeAccept(t *testing.T) {
	now := time.Now()
	tr, ph := newTracker(), &phase{name: "p"}
	e := tr.posting(ph, "a", now)
	tr.outcome("a", "done", now, now)
	if ph.seen != 0 {
		t.Fatalf("seen %d before the 202, want 0", ph.seen)
	}
	tr.accept(e, now)
	if ph.seen != 1 || ph.accepted != 1 {
		t.Fatalf("seen %d accepted %d, want 1 and 1", ph.seen, ph.accepted)
	}
}

// TestPooled: rounds pooled into one phase keep every latency and sum
// counts, CPU and times; rates are over the summed times.
func TestPooled(t *testing.T) {
	a := phaseReport{Events: 100, E2ERate: 100, Total: []time.Duration{time.Millisecond}, CPU: map[string]time.Duration{"processor": time.Second},
		Ingest: loadtest.Result{Lat: make([]time.Duration, 100), Elapsed: time.Second}, Txns: 10, TxnSec: 1, Records: 100, Handler: 0.001}
	b := phaseReport{Events: 300, E2ERate: 100, Total: []time.Duration{2 * time.Millisecond, 3 * time.Millisecond}, CPU: map[string]time.Duration{"processor": 2 * time.Second},
		Ingest: loadtest.Result{Lat: make([]time.Duration, 300), Elapsed: 3 * time.Second}, Txns: 30, TxnSec: 2, Records: 300, Handler: 0.003}
	p := pooled("both", []phaseReport{a, b})
	if p.Name != "both" || p.Events != 400 || len(p.Total) != 3 || p.CPU["processor"] != 3*time.Second || p.Txns != 40 || p.TxnSec != 3 || p.Records != 400 {
		t.Errorf("pooled = %+v; want 400 events, 3 latencies, 3 s of processor CPU, 40 transactions of 3 s, 400 records", p)
	}
	if p.E2ERate != 100 || p.PostRate != 100 || p.Handler != 0.0025 {
		t.Errorf("rates %.1f e2e, %.1f POST, handler %.4f s; want 100, 100 and 0.0025 (weighted by events)", p.E2ERate, p.PostRate, p.Handler)
	}
}

// TestSplits: taken up -> visible splits at the outcome record's timestamp
// and the read_uncommitted reader's time, whichever reader comes first; a
// parked outcome stamps nothing, and a key the uncommitted reader missed
// is left out.
func TestSplits(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr, ph := newTracker(), &phase{name: "p"}
	for _, k := range []string{"a", "b", "c"} {
		tr.accept(tr.posting(ph, k, t0), t0)
	}
	tr.stamp("a", "parked", at(1), at(2))
	tr.stamp("a", "done", at(5), at(8)) // the uncommitted reader first
	tr.stamp("a", "done", at(5), time.Time{})
	tr.outcome("a", "done", at(2), at(20))
	tr.stamp("b", "done", at(6), time.Time{}) // the committed reader first
	tr.outcome("b", "done", at(1), at(30))
	tr.stamp("b", "done", at(6), at(10))
	tr.stamp("c", "done", at(3), time.Time{}) // never read uncommitted
	tr.outcome("c", "done", at(1), at(9))
	taken, produce, readable, committed := tr.splits(ph)
	got := map[time.Duration][3]time.Duration{}
	for i := range produce {
		got[produce[i]] = [3]time.Duration{taken[i], readable[i], committed[i]}
	}
	ms := time.Millisecond
	want := map[time.Duration][3]time.Duration{3 * ms: {2 * ms, 3 * ms, 12 * ms}, 5 * ms: {1 * ms, 4 * ms, 20 * ms}}
	if !maps.Equal(got, want) || len(produce) != 2 || len(taken) != 2 {
		t.Fatalf("splits = %v, %v, %v, %v; want produce -> (taken, readable, committed) %v", taken, produce, readable, committed, want)
	}
}

// TestTailSteps: the slowest keys' steps are averaged, the others left
// out; no keys, no steps.
func TestTailSteps(t *testing.T) {
	ms := time.Millisecond
	var r phaseReport
	for i := range 99 { // 99 keys of 10 ms, one of each step 1-4 ms, by i
		r.Taken = append(r.Taken, time.Duration(1+i%4)*ms)
		r.Produce = append(r.Produce, 3*ms)
		r.Readable = append(r.Readable, 3*ms)
		r.Committed = append(r.Committed, time.Duration(4-i%4)*ms)
	}
	r.Taken, r.Produce, r.Readable, r.Committed = append(r.Taken, 2*ms), append(r.Produce, 90*ms), append(r.Readable, 5*ms), append(r.Committed, 3*ms)
	n, steps := tailSteps(r, 99)
	if want := [4]time.Duration{2 * ms, 90 * ms, 5 * ms, 3 * ms}; n != 1 || steps != want {
		t.Errorf("tailSteps = %d keys, %v; want 1 key, %v", n, steps, want)
	}
	if n, _ := tailSteps(phaseReport{}, 99); n != 0 {
		t.Errorf("tailSteps of no keys = %d keys, want 0", n)
	}
}
