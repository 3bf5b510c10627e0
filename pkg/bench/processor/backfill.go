package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// backfillRoute is the topic route the backfill phase adds to the
// one-route provider of the fan-out comparison once its events are in.
const backfillRoute = "late"

// addBackfillRoute rewrites the providers file at path with the route
// backfillRoute added to the one-route provider.
func addBackfillRoute(path, prefix string, fan fanOut) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	one := fanProviders[0].name
	old := fmt.Sprintf("      r1: {destination: {topic: %q}}\n", fmt.Sprintf("%sroute-%s-1", prefix, one))
	if !bytes.Contains(b, []byte(old)) {
		return fmt.Errorf("the providers file has no route r1 of %s", one)
	}
	added := old + fmt.Sprintf("      %s: {destination: {topic: %q}}\n", backfillRoute, fmt.Sprintf("%sroute-%s-%s", prefix, one, backfillRoute))
	return os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(added), 1), 0o600)
}

// backfillPhase runs `dlq backfill` of the route added since over every
// event of the one-route provider (fan.n a round) from since, and measures
// from the command's start until the processor has ended every record it
// sent: records/s delivered to a topic route by a backfill, reading
// webhooks.raw included.
func backfillPhase(ctx context.Context, dlqBin string, env []string, proc *loadtest.Proc, metrics string, since time.Time, want int) (result, error) {
	from := ended(ctx, metrics)
	start := time.Now()
	cmd := exec.CommandContext(ctx, dlqBin, "backfill", fanProviders[0].name+"/"+backfillRoute, "--since", since.UTC().Format(time.RFC3339Nano), "--json")
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	res, err := phase(ctx, proc, metrics, from, from+float64(want))
	if err != nil {
		return result{}, fmt.Errorf("backfill phase: %w", err)
	}
	if err := <-done; err != nil {
		return result{}, fmt.Errorf("dlq backfill: %w\n%s", err, errb.String())
	}
	var rep struct{ Matched, Sent int }
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return result{}, fmt.Errorf("dlq backfill's report %q: %w", out.String(), err)
	}
	if rep.Matched != want || rep.Sent != want {
		return result{}, fmt.Errorf("dlq backfill matched %d and sent %d records, want %d", rep.Matched, rep.Sent, want)
	}
	// From the command's start: its read of webhooks.raw counts, and so
	// do the records ended before phase saw the first.
	res.events, res.elapsed = float64(want), time.Since(start)
	return res, nil
}

// restartWith stops proc and starts the processor again with the same
// environment, once the providers file has changed.
func restartWith(ctx context.Context, proc *loadtest.Proc, bin string, env []string, dir, metricsAddr string) (*loadtest.Proc, error) {
	if err := proc.Stop(60 * time.Second); err != nil {
		return nil, err
	}
	p, err := loadtest.Start(bin, env, filepath.Join(dir, "processor-2.log"))
	if err != nil {
		return nil, err
	}
	return p, p.WaitReady(ctx, "http://"+metricsAddr+"/healthz", 2*time.Minute)
}

// printBackfill prints the backfill phase against the fan-out's one-route
// phases, first-seen events to one topic route (pooled over the rounds).
func printBackfill(rec *report.Recorder, res result, fanRes [][2]result) {
	var first result
	for _, rr := range fanRes {
		first.events += rr[0].events
		first.elapsed += rr[0].elapsed
	}
	fmt.Printf("\nbackfill of a topic route added since: %.0f records in %s (dlq backfill's start to the last one ended): %.0f records/s, CPU %.1f us/record\n",
		res.events, res.elapsed.Round(time.Millisecond), res.rate(), res.cpuPerEvent())
	fmt.Printf("backfill records/s / first-seen events/s to one topic route (fan-out, pooled): %.2f (target >= 0.5)\n", res.rate()/first.rate())
	rec.Add("backfill records/s", res.rate(), "records/s")
	rec.Add("backfill CPU per record", res.cpuPerEvent(), "µs/record")
	rec.Add("ratio backfill/first-seen to one topic route records/s", res.rate()/first.rate(), "ratio")
}
