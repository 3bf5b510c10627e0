package main

import (
	"io"
	"testing"
	"time"

	benchreport "github.com/hookline/hookline/pkg/bench/report"
)

// TestCostFigures: CPU per event per service and rate, the idle share, and
// the processor's ratio at 1,000/s over the processor alone, as recorded
// for the report, from two rounds without a broker.
func TestCostFigures(t *testing.T) {
	round := func(procAt1000, procAlone time.Duration) costRound {
		r := costRound{idle: map[string]float64{"processor": 0.5, "ingest": 0, "retrier": 0.1, "dlq": 0.4}}
		for range len(costRates) + 2 { // the rates, saturated, alone
			r.phases = append(r.phases, phaseReport{Events: 1000, Txns: 10, Records: 1000,
				CPU: map[string]time.Duration{"processor": 100 * time.Millisecond}})
		}
		r.phases[len(costRates)-1].CPU["processor"] = procAt1000
		r.phases[len(costRates)+1].CPU["processor"] = procAlone
		return r
	}
	rec := benchreport.NewRecorder("bench-e2e")
	printCost(io.Discard, []costRound{round(200*time.Millisecond, 50*time.Millisecond), round(300*time.Millisecond, 50*time.Millisecond)}, rec)
	want := map[string]float64{
		"bench-e2e/cost idle CPU processor":                                         0.5,
		"bench-e2e/cost CPU per event processor at 1000/s":                          250, // 200 and 300 µs an event
		"bench-e2e/cost CPU per event processor at processor alone":                 50,
		"bench-e2e/cost CPU per event dlq serve at 10/s":                            0, // no CPU given
		"bench-e2e/cost records per processor transaction at 100/s":                 100,
		"bench-e2e/cost processor CPU per event at 1000/s over the processor alone": 5, // 4 and 6
	}
	got := map[string]float64{}
	for _, e := range rec.Entries() {
		got[e.Name] = e.Value
	}
	for name, v := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s not recorded; recorded: %v", name, got)
			continue
		}
		if g != v {
			t.Errorf("%s = %v, want %v", name, g, v)
		}
	}
}
