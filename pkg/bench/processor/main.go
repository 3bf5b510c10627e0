// Command processor is the processor's benchmark (make bench-processor,
// built as bin/bench-processor). In one run, against one broker, it
// measures:
//
//   - events/s through the real processor binary for a provider without a
//     destination, from a backlog in webhooks.raw, against the broker's own
//     ProducerPerformance records/s for 1 KiB records (target >= 0.45x), and
//     the processor's CPU per event from /proc (target <= 60 us);
//   - CPU per duplicate (the same events again) against CPU per first-seen
//     event (target <= 0.5x);
//   - events/s with a destination that takes 50 ms, 64 in flight, from a
//     backlog (most of it parked in the destination's lane and drained from
//     there), against the in-flight bound 64/50 ms = 1,280/s (target >=
//     0.9x);
//   - transform (-transform-n, -transform-rounds): the same backlog for
//     one topic route without and with a typical transform, alternating,
//     events/s with over without (target >= 0.5);
//   - fan-out (-routes-n, -routes-rounds): the same backlog for a provider
//     with one topic route and for one with three (every event matches
//     every route), alternated round by round on the same processor: CPU
//     per delivery with three routes against CPU per event with one
//     (target <= 0.5x in every run, pooled over its rounds; the read,
//     dedup and transaction are shared), and events/s with three against
//     events/s with one (target >= 0.6x, likewise), with each round's
//     ratio and the spread over the rounds;
//   - the schema check (-schema-n, -schema-rounds; schema.go): GitHub's
//     example payloads for a provider without schema and for one with
//     GitHub's schema per event type, alternated: the processor's CPU per
//     event that the check adds.
//
// Every phase measures the processor draining a backlog produced while it
// was stopped (drained), after a warm-up that no phase counts.
//
// Restore speed is BenchmarkRestore in processor/internal/restore. Every load
// is bounded and stays on loopback; the broker is reached as the services
// reach it (KAFKA_TLS*, KAFKA_SASL_*: pkg/kafkaconf), and the processor it
// starts inherits those settings. Its topics and groups are deleted at the
// end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/topics"
)

func main() {
	n := flag.Int("n", 100000, "events in the backlog")
	slowN := flag.Int("slow-n", 20000, "events for the slow destination")
	parts := flag.Int("partitions", 12, "partitions of the topics (1 measures what one partition takes)")
	fan := fanOut{}
	flag.IntVar(&fan.n, "routes-n", 300000, "events a round of the fan-out comparison, for each of the one-route and three-route providers (0: no comparison, and no backfill or ordering comparison)")
	flag.IntVar(&fan.rounds, "routes-rounds", 3, "rounds of the fan-out comparison, each one route then three (1 to 10)")
	ord := fanOut{}
	flag.IntVar(&ord.n, "ord-n", 50000, "events a phase of the ordering comparison, for each of the unordered and ordered providers (run with the fan-out)")
	flag.IntVar(&ord.rounds, "ord-rounds", 2, "rounds of the ordering comparison, each unordered then ordered (1 to 10)")
	tc := transformCmp{}
	flag.IntVar(&tc.n, "transform-n", 20000, "events a round of the transform comparison, for each of the routes without and with a transform (0: no comparison)")
	flag.IntVar(&tc.rounds, "transform-rounds", 3, "rounds of the transform comparison, each without then with (1 to 10)")
	sb := schemaBench{}
	flag.IntVar(&sb.n, "schema-n", 10000, "events a phase of the schema comparison, for each of the providers without and with a schema (0: no comparison)")
	flag.IntVar(&sb.rounds, "schema-rounds", 2, "rounds of the schema comparison, each without schema then with (1 to 10)")
	flag.Parse()
	if *parts < 1 || *parts > 1000 {
		fmt.Fprintf(os.Stderr, "bench: -partitions=%d: want 1 to 1000\n", *parts)
		os.Exit(2)
	}
	if fan.n < 0 || fan.rounds < 1 || fan.rounds > 10 {
		fmt.Fprintf(os.Stderr, "bench: -routes-n=%d -routes-rounds=%d: want at least 0 events and 1 to 10 rounds\n", fan.n, fan.rounds)
		os.Exit(2)
	}
	if ord.n < 1 || ord.rounds < 1 || ord.rounds > 10 {
		fmt.Fprintf(os.Stderr, "bench: -ord-n=%d -ord-rounds=%d: want at least 1 event and 1 to 10 rounds\n", ord.n, ord.rounds)
		os.Exit(2)
	}
	if tc.n < 0 || tc.rounds < 1 || tc.rounds > 10 {
		fmt.Fprintf(os.Stderr, "bench: -transform-n=%d -transform-rounds=%d: want at least 0 events and 1 to 10 rounds\n", tc.n, tc.rounds)
		os.Exit(2)
	}
	if sb.n < 0 || sb.rounds < 1 || sb.rounds > 10 {
		fmt.Fprintf(os.Stderr, "bench: -schema-n=%d -schema-rounds=%d: want at least 0 events and 1 to 10 rounds\n", sb.n, sb.rounds)
		os.Exit(2)
	}
	partitions = int32(*parts)
	loadtest.Main("bench", func(ctx context.Context) error { return run(ctx, *n, *slowN, fan, ord, tc, sb) })
}

// fanOut shapes the fan-out comparison (and the ordering one): n events a
// phase, rounds rounds.
type fanOut struct{ n, rounds int }

// partitions of every topic of the run (-partitions).
var partitions int32 = 12

func run(ctx context.Context, n, slowN int, fan, ord fanOut, tc transformCmp, sb schemaBench) (err error) {
	r, err := loadtest.NewRun("bench-processor", []string{"processor", "dlq"}, kgo.ProducerBatchMaxBytes(2<<20), kgo.RecordPartitioner(topics.Partitioner()))
	if err != nil {
		return err
	}
	defer func() { err = r.Close(err) }()
	tmp, cl := r.Dir, r.Client

	// A destination that takes 50 ms.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		w.WriteHeader(204)
	})}
	go func() { _ = slow.Serve(ln) }()
	defer slow.Close()

	prefix := r.Prefix("bench-proc")
	schemaEntries, err := schemaProviders(prefix, sb)
	if err != nil {
		return err
	}
	prov := filepath.Join(tmp, "providers.yaml")
	tfYAML, err := transformProvidersYAML(tmp, prefix, tc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(prov, []byte(fmt.Sprintf(`providers:
  fast:
    preset: generic
    secret_env: [BENCH_SECRET]
    signature: {header: X-Sig}
  slow:
    preset: generic
    secret_env: [BENCH_SECRET]
    signature: {header: X-Sig}
    destination: {url: "http://%s/hook", timeout: 5s}
`, ln.Addr())+routeProviders(prefix, fan)+tfYAML+schemaEntries), 0o600); err != nil {
		return err
	}
	names := topics.NewNames(prefix, []string{"1m", "5m", "15m", "1h", "6h"})
	if err := topics.Ensure(ctx, cl, names.Specs(topics.Shape{Partitions: partitions, MaxMessageBytes: 2 << 20}), -1); err != nil {
		return r.Kafka.Explain(err)
	}

	// Baseline: the broker's own producer, 1 KiB records, acks=all.
	perfTopic := prefix + "perf"
	if err := topics.Ensure(ctx, cl, []topics.Spec{{Name: perfTopic, Partitions: partitions, Cleanup: "delete", Configs: map[string]string{"cleanup.policy": "delete"}}}, -1); err != nil {
		return err
	}
	fmt.Printf("hookline processor benchmark: %d events of 1 KiB, %d partitions, broker %s\n", n, partitions, strings.Join(r.Kafka.Brokers, ","))
	perf, err := loadtest.ProducerPerformance(ctx, r.Kafka, perfTopic, n, 1024)
	if err != nil {
		return err
	}

	body := []byte(`{"type":"bench","pad":"` + strings.Repeat("x", 1024-26) + `"}`)
	produce := func(provider string, count int, keyPrefix string) error {
		now := time.Now()
		for i := 0; i < count; i++ {
			key := fmt.Sprintf("%s:%s-%d", provider, keyPrefix, i)
			r := headers.IngestRecord(names.Raw, key, "bench", body, headers.IngestMeta{Provider: provider, ReceivedAt: now, RequestID: "bench", ContentType: "application/json"})
			if e := entityOf(provider, i); e != "" {
				headers.Set(r, headers.Entity, e) // as ingest does; the client places it by its entity
			}
			cl.Produce(ctx, r, nil)
		}
		return cl.Flush(ctx)
	}
	metricsAddr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	procEnv := []string{"HOOKLINE_PROVIDERS=" + prov, "HOOKLINE_TOPIC_PREFIX=" + prefix,
		fmt.Sprintf("HOOKLINE_PARTITIONS=%d", partitions), "HOOKLINE_METRICS_ADDR=" + metricsAddr,
		"HOOKLINE_STATE_DIR=" + filepath.Join(tmp, "state"), "HOOKLINE_INSTANCE_ID=bench", "HOOKLINE_LOG_LEVEL=warn"}
	proc, err := loadtest.Start(r.Bins["processor"], procEnv, filepath.Join(tmp, "processor.log"))
	if err != nil {
		return err
	}
	defer func() { _ = proc.Stop(30 * time.Second) }() // the processor running at the end
	metrics := "http://" + metricsAddr + "/metrics"

	// A warm-up no phase counts: the processor joins its group, takes its
	// partitions and commits, so that the first-seen phase drains its
	// backlog like every phase after it (drained).
	warm := max(n/10, 1000)
	if err := produce("fast", warm, "warm"); err != nil {
		return err
	}
	if _, err := phase(ctx, proc, metrics, 0, float64(warm)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	first, err := drained(ctx, proc, metrics, float64(n), func() error { return produce("fast", n, "evt") })
	if err != nil {
		return fmt.Errorf("first-seen phase: %w", err)
	}
	dup, err := drained(ctx, proc, metrics, float64(n), func() error { return produce("fast", n, "evt") })
	if err != nil {
		return fmt.Errorf("duplicate phase: %w", err)
	}
	slowRes, err := drained(ctx, proc, metrics, float64(slowN), func() error { return produce("slow", slowN, "evt") })
	if err != nil {
		return fmt.Errorf("slow destination phase: %w", err)
	}
	rss, _ := loadtest.RSS(proc.Pid())
	var schemaRes [][2]result
	var meanBody int
	if sb.n > 0 { // before the fan-out: the backfill takes the events from the fan-out's start
		if schemaRes, meanBody, err = schemaRounds(ctx, proc, metrics, cl, names.Raw, sb); err != nil {
			return err
		}
	}
	var fanRes, ordRes, tfRes [][2]result
	var bfRes result
	if tc.n > 0 {
		if tfRes, err = transformRounds(ctx, proc, metrics, tc, produce); err != nil {
			return err
		}
	}
	if fan.n > 0 {
		if err := fanOutWarm(ctx, proc, metrics, fan, produce); err != nil {
			return err
		}
		fanStart := time.Now() // after the warm-up: the backfill's range is the rounds' events
		if fanRes, err = fanOutRounds(ctx, proc, metrics, fan, produce); err != nil {
			return err
		}
		// Backfill (issue 24): a topic route added to the one-route
		// provider gets its events again from webhooks.raw.
		if err := addBackfillRoute(prov, prefix, fan); err != nil {
			return err
		}
		if proc, err = restartWith(ctx, proc, r.Bins["processor"], procEnv, tmp, metricsAddr); err != nil {
			return err
		}
		if bfRes, err = backfillPhase(ctx, r.Bins["dlq"], procEnv, proc, metrics, fanStart, fan.n*fan.rounds); err != nil {
			return err
		}
		// Ordering (issue 24), after the backfill so that its range holds
		// the fan-out's events only.
		if ordRes, err = orderedRounds(ctx, proc, metrics, ord, produce); err != nil {
			return err
		}
	}

	fmt.Printf("%-52s %12s %14s\n", "measure", "events/s", "CPU us/event")
	fmt.Printf("%-52s %12.0f %14s\n", "broker ProducerPerformance, 1 KiB, acks=all (baseline)", perf.RecordsPerSec, "-")
	fmt.Printf("%-52s %12.0f %14.1f\n", "processor, first-seen, no destination", first.rate(), first.cpuPerEvent())
	fmt.Printf("%-52s %12.0f %14.1f\n", "processor, duplicates", dup.rate(), dup.cpuPerEvent())
	fmt.Printf("%-52s %12.0f %14.1f\n", "processor, destination 50 ms, 64 in flight", slowRes.rate(), slowRes.cpuPerEvent())
	fmt.Printf("ratio processor/ProducerPerformance: %.2f (target >= 0.45)\n", first.rate()/perf.RecordsPerSec)
	fmt.Printf("CPU per first-seen event: %.1f us (target <= 60)\n", first.cpuPerEvent())
	fmt.Printf("CPU per duplicate / per first-seen: %.2f (target <= 0.5)\n", dup.cpuPerEvent()/first.cpuPerEvent())
	fmt.Printf("50 ms destination, 64 in flight: %.0f events/s = %.2f of the in-flight bound 64/50ms (target >= 0.9)\n", slowRes.rate(), slowRes.rate()/1280)
	fmt.Printf("processor RSS at the end: %.0f MB\n", float64(rss)/1e6)
	rec := report.NewRecorder("bench-processor")
	rec.Add("ProducerPerformance records/s", perf.RecordsPerSec, "records/s")
	for _, p := range []struct {
		name string
		res  result
	}{{"first-seen", first}, {"duplicates", dup}, {"destination 50ms 64 in flight", slowRes}} {
		rec.Add(p.name+" events/s", p.res.rate(), "events/s")
		rec.Add(p.name+" CPU per event", p.res.cpuPerEvent(), "µs/event")
	}
	rec.Add("ratio processor/ProducerPerformance", first.rate()/perf.RecordsPerSec, "ratio")
	rec.Add("ratio CPU per duplicate/first-seen", dup.cpuPerEvent()/first.cpuPerEvent(), "ratio")
	rec.Add("ratio 50ms destination/in-flight bound", slowRes.rate()/1280, "ratio")
	rec.Add("RSS at the end", float64(rss)/1e6, "MB")
	if sb.n > 0 {
		printSchema(rec, sb, meanBody, schemaRes)
	}
	if fan.n > 0 {
		printFanOut(rec, fan, fanRes)
		printOrdered(rec, ord, ordRes)
		printBackfill(rec, bfRes, fanRes)
	}
	if tc.n > 0 {
		printTransform(rec, tc, tfRes)
	}
	return rec.WriteEnv()
}

type result struct {
	events  float64
	elapsed time.Duration
	cpu     time.Duration
}

func (r result) rate() float64 { return r.events / r.elapsed.Seconds() }
func (r result) cpuPerEvent() float64 {
	return float64(r.cpu.Microseconds()) / r.events
}

// phase waits until the processor's committed record count passes from, then
// measures wall time and CPU until it reaches to (at most 10 minutes, or
// until the processor exits).
func phase(ctx context.Context, proc *loadtest.Proc, metrics string, from, to float64) (result, error) {
	pid := proc.Pid()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	count := func() float64 { return ended(ctx, metrics) }
	for count() <= from {
		if err := proc.Err(); err != nil {
			return result{}, err
		}
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("no progress past %.0f records", from)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	cpu0, err := loadtest.CPU(pid)
	if err != nil {
		return result{}, err
	}
	return until(ctx, proc, metrics, count(), to, start, cpu0)
}

// until waits until the processor's count of records ended reaches to (at
// most 10 minutes, or until the processor exits): the result counts the
// records from startCount, the time from start and the CPU from cpu0.
func until(ctx context.Context, proc *loadtest.Proc, metrics string, startCount, to float64, start time.Time, cpu0 time.Duration) (result, error) {
	pid := proc.Pid()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	count := func() float64 { return ended(ctx, metrics) }
	var c float64
	for c = count(); c < to; c = count() {
		if err := proc.Err(); err != nil {
			return result{}, err
		}
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("stuck at %.0f of %.0f records", c, to)
		}
		// Each poll scrapes the processor's /metrics twice, and that CPU
		// counts in the phase: every 20 ms it was about 3 µs per event at
		// 10,000 events/s, in both phases alike, which pulled the
		// duplicate / first-seen ratio toward 1.
		time.Sleep(100 * time.Millisecond)
	}
	cpu1, err := loadtest.CPU(pid)
	if err != nil {
		return result{}, err
	}
	return result{events: c - startCount, elapsed: time.Since(start), cpu: cpu1 - cpu0}, nil
}

// drained measures the processor draining a backlog: it stops the
// processor (SIGSTOP), runs produce, and resumes it (SIGCONT); the phase
// runs from the resume until want more records have ended, with the CPU the
// processor spent from the stop. Every comparison's phase is one. A phase
// produced while the processor ran, and timed from its first commit,
// missed the work done before that commit: with 10,000 GitHub payloads a
// phase, the processor checked most of them against the schema before it
// first committed, and the check's CPU came to 2-111 µs an event by round
// in one run, against 136 µs a payload in BenchmarkCheckGitHub
// (docs/performance.md, "Backlogs, not races"). A stop of seconds is well
// inside the processor's group session and transaction timeouts.
func drained(ctx context.Context, proc *loadtest.Proc, metrics string, want float64, produce func() error) (result, error) {
	pid := proc.Pid()
	from := ended(ctx, metrics) // the phase before ended: nothing is in flight
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return result{}, fmt.Errorf("stop the processor while the backlog is produced: %w", err)
	}
	err := produce()
	cpu0, cerr := loadtest.CPU(pid)
	start := time.Now()
	if kerr := syscall.Kill(pid, syscall.SIGCONT); kerr != nil {
		return result{}, errors.Join(err, cerr, fmt.Errorf("resume the processor: %w", kerr))
	}
	if err := errors.Join(err, cerr); err != nil {
		return result{}, err
	}
	return until(ctx, proc, metrics, from, from+want, start, cpu0)
}

// ended is the processor's count of records ended: a parked record counts
// once its lane copy ends, a record delivered to three routes three times.
func ended(ctx context.Context, metrics string) float64 {
	v, _ := loadtest.CounterSum(ctx, metrics, "hookline_processor_records_total")
	parked, _ := loadtest.CounterSum(ctx, metrics, "hookline_processor_records_total", `status="parked"`)
	return v - parked
}
