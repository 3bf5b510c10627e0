package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// The schema comparison (issue 32): what checking a body against its
// provider's published schema costs the processor, which checks fresh
// records of an on_invalid: dlq provider (ingest checks only on_invalid:
// reject). GitHub's example payloads (package corpus), round and round,
// for a github provider with one topic route and no schema, and for one
// with GitHub's schema mapped per event type, alternated in each round.
const (
	plainProvider  = "ghplain"
	schemaProvider = "ghschema"
)

// schemaBench shapes the comparison: n events a phase, rounds rounds.
type schemaBench struct{ n, rounds int }

// schemaProviders is the providers file's entries for the comparison; ""
// without it.
func schemaProviders(prefix string, sb schemaBench) (string, error) {
	if sb.n == 0 {
		return "", nil
	}
	defs, err := corpus.GitHubMapping()
	if err != nil {
		return "", err
	}
	perEvent, err := json.Marshal(defs) // JSON is YAML: a flow mapping
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range []string{plainProvider, schemaProvider} {
		fmt.Fprintf(&b, "  %s:\n    preset: github\n    secret_env: [BENCH_SECRET]\n", p)
		if p == schemaProvider {
			fmt.Fprintf(&b, "    schema: %s\n    on_invalid: dlq\n", perEvent)
		}
		fmt.Fprintf(&b, "    routes:\n      r1: {destination: {topic: %q}}\n", fmt.Sprintf("%sroute-%s-1", prefix, p))
	}
	return b.String(), nil
}

// schemaRounds runs sb.rounds rounds, each a backlog of sb.n corpus events
// for the provider without schema, then the same for the one with it.
func schemaRounds(ctx context.Context, proc *loadtest.Proc, metrics string, cl *kgo.Client, raw string, sb schemaBench) ([][2]result, int, error) {
	exs, err := corpus.LoadGitHub()
	if err != nil {
		return nil, 0, err
	}
	var size int
	for _, e := range exs {
		size += len(e.Body)
	}
	produce := func(provider string, round int) error {
		now := time.Now()
		for i := range sb.n {
			e := exs[i%len(exs)]
			key := fmt.Sprintf("%s:round%d-%d", provider, round, i)
			cl.Produce(ctx, headers.IngestRecord(raw, key, e.Event, e.Body, headers.IngestMeta{Provider: provider, ReceivedAt: now, RequestID: "bench", ContentType: "application/json"}), nil)
		}
		return cl.Flush(ctx)
	}
	out := make([][2]result, sb.rounds)
	for round := range out {
		for i, p := range []string{plainProvider, schemaProvider} {
			res, err := drained(ctx, proc, metrics, float64(sb.n), func() error { return produce(p, round) })
			if err != nil {
				return nil, 0, fmt.Errorf("schema round %d, %s: %w", round+1, p, err)
			}
			out[round][i] = res
		}
	}
	return out, size / len(exs), nil
}

// printSchema prints each round, and the check's CPU per event: the
// difference of the two, per round, with its range.
func printSchema(rec *report.Recorder, sb schemaBench, meanBody int, res [][2]result) {
	fmt.Printf("\nschema check: %d of GitHub's example payloads (mean %d bytes) a phase, %d rounds alternating no schema / GitHub's schema per event type (on_invalid: dlq: the processor checks)\n", sb.n, meanBody, sb.rounds)
	fmt.Printf("%-52s %12s %14s\n", "measure", "events/s", "CPU us/event")
	var extra, ratio []float64
	for round, rr := range res {
		for i, name := range []string{"no schema", "schema per event type"} {
			fmt.Printf("%-52s %12.0f %14.1f\n", fmt.Sprintf("round %d, %s", round+1, name), rr[i].rate(), rr[i].cpuPerEvent())
		}
		extra = append(extra, rr[1].cpuPerEvent()-rr[0].cpuPerEvent())
		ratio = append(ratio, rr[1].rate()/rr[0].rate())
	}
	rec.AddRuns("schema check CPU per event added", "µs/event", extra)
	rec.AddRuns("ratio schema check events/s with/without", "ratio", ratio)
	slices.Sort(extra)
	slices.Sort(ratio)
	fmt.Printf("processor CPU per event added by the check: %.1f us (range %.1f-%.1f); events/s with / without schema: %.2f (range %.2f-%.2f)\n",
		extra[len(extra)/2], extra[0], extra[len(extra)-1], ratio[len(ratio)/2], ratio[0], ratio[len(ratio)-1])
}
