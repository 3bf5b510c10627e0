package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// Issue 36's targets for the fan-out, in every run: CPU per delivery with
// three topic routes at most maxFanCPU of CPU per event with one, and
// events/s with three at least minFanRate of events/s with one, pooled
// over the run's rounds (CPU and time summed). Each round's ratio is
// printed and reported with the spread: a round's ratio moves with the
// machine by more than the pooled one (docs/performance.md, "Fan-out by
// run").
const (
	maxFanCPU  = 0.5
	minFanRate = 0.6
)

// fanProviders are the providers of the fan-out comparison, with the count
// of topic routes each has; every event matches every route.
var fanProviders = [2]struct {
	name   string
	routes int
}{{"fanone", 1}, {"fanthree", 3}}

// routeProviders is the providers file's entries for the fan-out
// comparison: each route a topic destination of its own under prefix, so
// the run deletes them at the end (the processor creates them at start).
// Without the comparison there are none, and the file is the one the
// benchmark had before routes.
func routeProviders(prefix string, fan fanOut) string {
	if fan.n == 0 {
		return ""
	}
	var b strings.Builder
	for _, p := range fanProviders {
		fmt.Fprintf(&b, "  %s:\n    preset: generic\n    secret_env: [BENCH_SECRET]\n    signature: {header: X-Sig}\n    routes:\n", p.name)
		for i := range p.routes {
			fmt.Fprintf(&b, "      r%d: {destination: {topic: %q}}\n", i+1, fmt.Sprintf("%sroute-%s-%d", prefix, p.name, i+1))
		}
	}
	return b.String() + orderedProviders(prefix)
}

// fanOutWarm runs a round not measured before fanOutRounds' rounds. The
// processor's first records to the route topics (partitions new to its
// transactions, the broker's first segments there; which of these costs
// it was not isolated) made the first measured round's three-route phase
// cost 15.6-15.9 us a delivery against 10.9-13.2 in the rounds after it
// (two runs of six).
func fanOutWarm(ctx context.Context, proc *loadtest.Proc, metrics string, fan fanOut, produce func(provider string, count int, keyPrefix string) error) error {
	warm := max(fan.n/5, 1000)
	fmt.Printf("fan-out warm-up: %d events for each of the one-route and three-route providers, not measured ...\n", warm)
	for _, p := range fanProviders {
		from := ended(ctx, metrics)
		if err := produce(p.name, warm, "warm"); err != nil {
			return err
		}
		if _, err := phase(ctx, proc, metrics, from, from+float64(warm*p.routes)); err != nil {
			return fmt.Errorf("fan-out warm-up, %d routes: %w", p.routes, err)
		}
	}
	return nil
}

// fanOutRounds runs fan.rounds rounds, each a backlog of fan.n events for
// the one-route provider and then the same for the three-route one, on the
// processor that ran the phases before; a result counts deliveries. The
// processor is stopped while each backlog is produced (drained), so a
// phase measures it draining the backlog, not racing this producer.
func fanOutRounds(ctx context.Context, proc *loadtest.Proc, metrics string, fan fanOut, produce func(provider string, count int, keyPrefix string) error) ([][2]result, error) {
	out := make([][2]result, fan.rounds)
	for round := range out {
		for i, p := range fanProviders {
			res, err := drained(ctx, proc, metrics, float64(fan.n*p.routes), func() error { return produce(p.name, fan.n, fmt.Sprintf("round%d", round)) })
			if err != nil {
				return nil, fmt.Errorf("fan-out round %d, %d routes: %w", round+1, p.routes, err)
			}
			out[round][i] = res
		}
	}
	return out, nil
}

// spread is the highest of vs less the lowest.
func spread(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	return slices.Max(vs) - slices.Min(vs)
}

// printFanOut prints each round and the ratios: per round, and pooled
// over the rounds (CPU and time summed).
func printFanOut(rec *report.Recorder, fan fanOut, res [][2]result) {
	fmt.Printf("\nfan-out: %d events a phase, %d rounds alternating one topic route / three topic routes, each event matching every route\n", fan.n, fan.rounds)
	fmt.Printf("%-52s %12s %12s %16s\n", "measure", "events/s", "deliveries/s", "CPU us/delivery")
	var sum [2]result
	var cpuR, rateR []string
	var cpuRuns, rateRuns []float64
	for round, rr := range res {
		for i, p := range fanProviders {
			r := rr[i]
			fmt.Printf("%-52s %12.0f %12.0f %16.1f\n", fmt.Sprintf("round %d, %d topic route(s)", round+1, p.routes), perEvent(rr, i), r.rate(), r.cpuPerEvent())
			sum[i].events += r.events
			sum[i].elapsed += r.elapsed
			sum[i].cpu += r.cpu
		}
		cpuRuns = append(cpuRuns, rr[1].cpuPerEvent()/rr[0].cpuPerEvent())
		rateRuns = append(rateRuns, perEvent(rr, 1)/perEvent(rr, 0))
		cpuR = append(cpuR, fmt.Sprintf("%.2f", cpuRuns[len(cpuRuns)-1]))
		rateR = append(rateR, fmt.Sprintf("%.2f", rateRuns[len(rateRuns)-1]))
	}
	fmt.Printf("CPU per delivery, 3 routes / per event, 1 route: %.2f pooled (target <= %.1f), rounds %s, spread %.2f\n",
		sum[1].cpuPerEvent()/sum[0].cpuPerEvent(), maxFanCPU, strings.Join(cpuR, " "), spread(cpuRuns))
	fmt.Printf("events/s, 3 routes / 1 route: %.2f pooled (target >= %.1f), rounds %s, spread %.2f\n",
		perEvent(sum, 1)/perEvent(sum, 0), minFanRate, strings.Join(rateR, " "), spread(rateRuns))
	for i, p := range fanProviders {
		rec.Add(fmt.Sprintf("fan-out %d route(s) events/s pooled", p.routes), perEvent(sum, i), "events/s")
		rec.Add(fmt.Sprintf("fan-out %d route(s) CPU per delivery pooled", p.routes), sum[i].cpuPerEvent(), "µs/delivery")
	}
	rec.Add("ratio fan-out CPU per delivery 3 routes/per event 1 route pooled", sum[1].cpuPerEvent()/sum[0].cpuPerEvent(), "ratio")
	rec.AddRuns("ratio fan-out CPU per delivery 3 routes/per event 1 route by round", "ratio", cpuRuns)
	rec.Add("ratio fan-out events/s 3 routes/1 route pooled", perEvent(sum, 1)/perEvent(sum, 0), "ratio")
	rec.AddRuns("ratio fan-out events/s 3 routes/1 route by round", "ratio", rateRuns)
}

// perEvent is the events/s of res[i], which counts deliveries.
func perEvent(res [2]result, i int) float64 { return res[i].rate() / float64(fanProviders[i].routes) }
