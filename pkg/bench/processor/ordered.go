package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// The ordering comparison (issue 24): a provider with one topic route and
// ordering by the body's /entity over orderedEntities entities, against
// the same provider without ordering, alternated in each round.
const (
	flatProvider    = "fanflat"
	orderedProvider = "fanord"
	orderedEntities = 10000
)

// orderedProviders is the providers file's entries for the comparison.
func orderedProviders(prefix string) string {
	var b strings.Builder
	for _, p := range []string{flatProvider, orderedProvider} {
		fmt.Fprintf(&b, "  %s:\n    preset: generic\n    secret_env: [BENCH_SECRET]\n    signature: {header: X-Sig}\n", p)
		if p == orderedProvider {
			b.WriteString("    ordering: {json: /entity}\n")
		}
		fmt.Fprintf(&b, "    routes:\n      r1: {destination: {topic: %q}}\n", fmt.Sprintf("%sroute-%s-1", prefix, p))
	}
	return b.String()
}

// entityOf is the entity of the i-th event of a backlog of provider: one
// of orderedEntities for the ordered provider, none for any other.
func entityOf(provider string, i int) string {
	if provider != orderedProvider {
		return ""
	}
	return fmt.Sprintf("ent-%d", i%orderedEntities)
}

// orderedRounds runs fan.rounds rounds, each a backlog of fan.n events for
// the unordered provider and then the same for the ordered one; a result
// counts events.
func orderedRounds(ctx context.Context, proc *loadtest.Proc, metrics string, fan fanOut, produce func(provider string, count int, keyPrefix string) error) ([][2]result, error) {
	out := make([][2]result, fan.rounds)
	for round := range out {
		for i, p := range []string{flatProvider, orderedProvider} {
			res, err := drained(ctx, proc, metrics, float64(fan.n), func() error { return produce(p, fan.n, fmt.Sprintf("round%d", round)) })
			if err != nil {
				return nil, fmt.Errorf("ordering round %d, %s: %w", round+1, p, err)
			}
			out[round][i] = res
		}
	}
	return out, nil
}

// printOrdered prints each round and the pooled ratio.
func printOrdered(rec *report.Recorder, fan fanOut, res [][2]result) {
	fmt.Printf("\nordering: %d events a phase over %d entities, %d rounds alternating one topic route unordered / ordered\n", fan.n, orderedEntities, fan.rounds)
	fmt.Printf("%-52s %12s %16s\n", "measure", "events/s", "CPU us/event")
	var sum [2]result
	var rates []string
	var runs []float64
	for round, rr := range res {
		for i, name := range []string{"unordered", "ordered"} {
			fmt.Printf("%-52s %12.0f %16.1f\n", fmt.Sprintf("round %d, %s", round+1, name), rr[i].rate(), rr[i].cpuPerEvent())
			sum[i].events += rr[i].events
			sum[i].elapsed += rr[i].elapsed
			sum[i].cpu += rr[i].cpu
		}
		runs = append(runs, rr[1].rate()/rr[0].rate())
		rates = append(rates, fmt.Sprintf("%.2f", runs[len(runs)-1]))
	}
	fmt.Printf("events/s, ordered / unordered: %.2f pooled, rounds %s (target >= 0.8)\n", sum[1].rate()/sum[0].rate(), strings.Join(rates, " "))
	for i, name := range []string{"unordered", "ordered"} {
		rec.Add("ordering "+name+" events/s pooled", sum[i].rate(), "events/s")
		rec.Add("ordering "+name+" CPU per event pooled", sum[i].cpuPerEvent(), "µs/event")
	}
	rec.Add("ratio ordered/unordered events/s pooled", sum[1].rate()/sum[0].rate(), "ratio")
	rec.AddRuns("ratio ordered/unordered events/s by round", "ratio", runs)
}
