package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// transformProviders are the providers of the transform comparison: the
// same one topic route, without and with a transform (transformJS).
var transformProviders = [2]string{"tfplain", "tfjs"}

// transformJS is a typical transform on the benchmark's body: fields
// renamed, one derived, one dropped, headers added.
const transformJS = `function transform(request, context) {
  const b = request.body;
  return {
    body: {kind: b.type, size: b.pad.length, head: b.pad.slice(0, 16), route: context.route, provider: context.provider},
    headers: {...request.headers, "x-transformed": "1"},
  };
}
`

// transformCmp shapes the transform comparison: n events a phase, rounds
// rounds, each the route without the transform then with it.
type transformCmp struct{ n, rounds int }

// transformProvidersYAML writes transformJS beside the providers file and
// returns the comparison's providers entries (none when n is 0).
func transformProvidersYAML(dir, prefix string, tc transformCmp) (string, error) {
	if tc.n == 0 {
		return "", nil
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-transform.js"), []byte(transformJS), 0o600); err != nil {
		return "", err
	}
	var b strings.Builder
	for i, p := range transformProviders {
		fmt.Fprintf(&b, "  %s:\n    preset: generic\n    secret_env: [BENCH_SECRET]\n    signature: {header: X-Sig}\n    routes:\n      r1:\n        destination: {topic: %q}\n", p, prefix+"route-"+p)
		if i == 1 {
			b.WriteString("        transform: bench-transform.js\n")
		}
	}
	return b.String(), nil
}

// transformRounds runs tc.rounds rounds, each a backlog of tc.n events for
// the route without a transform and then the same with one.
func transformRounds(ctx context.Context, proc *loadtest.Proc, metrics string, tc transformCmp, produce func(provider string, count int, keyPrefix string) error) ([][2]result, error) {
	out := make([][2]result, tc.rounds)
	for round := range out {
		for i, p := range transformProviders {
			res, err := drained(ctx, proc, metrics, float64(tc.n), func() error { return produce(p, tc.n, fmt.Sprintf("tround%d", round)) })
			if err != nil {
				return nil, fmt.Errorf("transform round %d, %s: %w", round+1, p, err)
			}
			out[round][i] = res
		}
	}
	return out, nil
}

// printTransform prints each round and the ratio with/without, per round
// and pooled over the rounds.
func printTransform(rec *report.Recorder, tc transformCmp, res [][2]result) {
	fmt.Printf("\ntransform: %d events a phase, %d rounds alternating one topic route without / with a transform\n", tc.n, tc.rounds)
	fmt.Printf("%-52s %12s %16s\n", "measure", "events/s", "CPU us/event")
	var sum [2]result
	var rateR []string
	var runs []float64
	for round, rr := range res {
		for i, p := range transformProviders {
			r := rr[i]
			fmt.Printf("%-52s %12.0f %16.1f\n", fmt.Sprintf("round %d, %s", round+1, p), r.rate(), r.cpuPerEvent())
			sum[i].events += r.events
			sum[i].elapsed += r.elapsed
			sum[i].cpu += r.cpu
		}
		runs = append(runs, rr[1].rate()/rr[0].rate())
		rateR = append(rateR, fmt.Sprintf("%.2f", runs[len(runs)-1]))
	}
	fmt.Printf("events/s, with a transform / without: %.2f pooled, rounds %s (target >= 0.5)\n", sum[1].rate()/sum[0].rate(), strings.Join(rateR, " "))
	fmt.Printf("CPU per event, with a transform / without: %.2f pooled\n", sum[1].cpuPerEvent()/sum[0].cpuPerEvent())
	for i, p := range transformProviders {
		rec.Add("transform "+p+" events/s pooled", sum[i].rate(), "events/s")
		rec.Add("transform "+p+" CPU per event pooled", sum[i].cpuPerEvent(), "µs/event")
	}
	rec.Add("ratio transform events/s with/without pooled", sum[1].rate()/sum[0].rate(), "ratio")
	rec.AddRuns("ratio transform events/s with/without by round", "ratio", runs)
	rec.Add("ratio transform CPU per event with/without pooled", sum[1].cpuPerEvent()/sum[0].cpuPerEvent(), "ratio")
}
