package main

import (
	"sort"

	benchreport "github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// record puts every figure print prints into rec, named by phase.
func (rep report) record(rec *benchreport.Recorder) {
	rec.Add("ProducerPerformance before records/s", rep.Perf[0].RecordsPerSec, "records/s")
	rec.Add("ProducerPerformance after records/s", rep.Perf[1].RecordsPerSec, "records/s")
	for _, p := range []struct {
		key string
		r   phaseReport
	}{{"closed loop", rep.Closed}, {"open loop", rep.Opened}, {"ordered half load", withoutCPU(rep.Ordering.HalfLoad)}, {"unordered twin half load", withoutCPU(rep.Ordering.Twin)}} {
		recordPhase(rec, p.key, p.r)
	}
	if rep.Ordering.Twin.Events > 0 { // interleaved (pairPhase): their CPU is the two's
		recordCPU(rec, "ordered and twin interleaved half load", pooled("", []phaseReport{rep.Ordering.HalfLoad, rep.Ordering.Twin}))
	}
	rec.Add("ratio e2e events/s/ProducerPerformance", rep.Closed.E2ERate/rep.PerfRate(), "ratio")
	rec.Add("ratio e2e events/s/ingest POST 202/s closed loop", rep.Closed.E2ERate/rep.Closed.PostRate, "ratio")
	iso := rep.Isolation
	for _, s := range []struct {
		key string
		s   isolation.Summary
	}{{"isolation fastpay alone", iso.Alone}, {"isolation fastpay with slowcrm", iso.Together}, {"isolation slowcrm", iso.Slow},
		{"ordering steady", rep.Ordering.Steady}, {"ordering others one failing", rep.Ordering.Failing}, {"ordering the failing entity", rep.Ordering.Held}} {
		rec.Add(s.key+" 202 to call p50", ms(s.s.P50), "ms")
		rec.Add(s.key+" 202 to call p99", ms(s.s.P99), "ms")
		rec.Add(s.key+" 202 to call max", ms(s.s.Max), "ms")
	}
	rec.Add("ratio isolation fastpay p99 with slowcrm/alone", iso.Ratio(), "ratio")
	rec.Add("ratio ordering others' p99 one failing/none", rep.Ordering.Ratio(), "ratio")
	if rep.Ordering.Twin.Events > 0 {
		rec.Add("ratio ordered/unordered half load p99",
			ms(loadtest.Percentile(rep.Ordering.HalfLoad.Total, 99))/ms(loadtest.Percentile(rep.Ordering.Twin.Total, 99)), "ratio")
	}
	var ratios, p50s, p99s, busy []float64
	for _, h := range rep.Ordering.Rounds {
		ratios = append(ratios, h.p99Ratio())
		p50s = append(p50s, ms(loadtest.Percentile(h.Unordered.Total, 50)))
		p99s = append(p99s, ms(loadtest.Percentile(h.Unordered.Total, 99)))
		busy = append(busy, h.Unordered.busyPct())
	}
	if len(ratios) > 0 {
		rec.AddRuns("ratio ordered/unordered half load p99 by round", "ratio", ratios)
		rec.AddRuns("open loop 202 to outcome p50 by round", "ms", p50s)
		rec.AddRuns("open loop 202 to outcome p99 by round", "ms", p99s)
		if busy[0] > 0 {
			rec.AddRuns("open loop machine busy by round", "% of the machine", busy)
		}
	}
	rec.Add("keys verified", float64(rep.Verified), "keys")
	rec.Add("keys redelivered", float64(rep.Redelivered), "keys")
}

// recordPhase records one load phase: rates, the latency and its steps,
// the processor's transactions and each service's CPU per event.
func recordPhase(rec *benchreport.Recorder, key string, r phaseReport) {
	if r.Events == 0 {
		return // the phase did not run
	}
	rec.Add(key+" events", float64(r.Events), "events")
	rec.Add(key+" POST 202/s", r.PostRate, "req/s")
	rec.Add(key+" e2e events/s", r.E2ERate, "events/s")
	for _, q := range []struct {
		name string
		pct  float64
	}{{"p50", 50}, {"p99", 99}, {"max", 100}} {
		rec.Add(key+" 202 to outcome "+q.name, ms(loadtest.Percentile(r.Total, q.pct)), "ms")
	}
	rec.Add(key+" POST to 202 p50", ms(r.Ingest.Pct(50)), "ms")
	rec.Add(key+" POST to 202 p99", ms(r.Ingest.Pct(99)), "ms")
	rec.Add(key+" 202 to taken up p50", ms(loadtest.Percentile(r.Pickup, 50)), "ms")
	rec.Add(key+" 202 to taken up p99", ms(loadtest.Percentile(r.Pickup, 99)), "ms")
	rec.Add(key+" taken up to outcome visible p50", ms(loadtest.Percentile(r.Commit, 50)), "ms")
	rec.Add(key+" taken up to outcome visible p99", ms(loadtest.Percentile(r.Commit, 99)), "ms")
	if n, steps := tailSteps(r, 99); n > 0 {
		for i, step := range tailStepNames {
			rec.Add(key+" slowest 1% "+step+" mean", ms(steps[i]), "ms")
		}
	}
	if r.Txns > 0 {
		rec.Add(key+" processor transactions", r.Txns, "transactions")
		rec.Add(key+" processor records per transaction", r.Records/r.Txns, "records")
		rec.Add(key+" processor poll to commit mean", 1000*r.TxnSec/r.Txns, "ms")
		rec.Add(key+" destination call mean", 1000*r.Handler, "ms")
	}
	recordCPU(rec, key, r)
}

// withoutCPU is r without its CPU figures, the machine's included.
func withoutCPU(r phaseReport) phaseReport {
	r.CPU, r.Busy, r.All = nil, 0, 0
	return r
}

// recordCPU records each service's CPU per event of r.
func recordCPU(rec *benchreport.Recorder, key string, r phaseReport) {
	if r.Events == 0 {
		return
	}
	names := make([]string, 0, len(r.CPU))
	for k := range r.CPU {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		rec.Add(key+" CPU per event "+k, float64(r.CPU[k].Microseconds())/float64(r.Events), "µs/event")
	}
	if r.All > 0 {
		rec.Add(key+" machine busy", r.busyPct(), "% of the machine")
	}
}
