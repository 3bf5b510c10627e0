// Command retrier is the retrier's benchmark (make bench-retrier, built as
// bin/retrier-bench). It runs the real retrier binary against the local
// broker and prints every figure next to its baseline, all taken in one run
// on one machine:
//
//  1. Idle: N records (default 100,000, 1 KiB) parked in the 1h tier of the
//     default schedule. CPU of the retrier over 60 idle seconds, read from
//     /proc/<pid>/stat, against the 1%-of-a-core target and against a
//     second retrier with nothing parked, measured over the same seconds;
//     RSS against that empty retrier's.
//  2. Due at once: N more records parked in the 1m tier, all with the same
//     due-at. Moved records per second (from the due time to the last
//     record in webhooks.raw), against the broker's own ProducerPerformance
//     (compose/kafka.sh perf, acks=all, same record size and count) run
//     right after on the same broker.
//
// Everything is bounded (counts, timeouts) and talks to loopback only: it
// refuses a KAFKA_BROKERS that is not a loopback address. It reaches the
// broker as the services do (KAFKA_TLS*, KAFKA_SASL_*: pkg/kafkaconf), and
// the retriers it starts inherit those settings. Its topics and groups are
// deleted at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/topics"
)

func main() {
	n := flag.Int("n", 100000, "records per phase (at most 1,000,000)")
	size := flag.Int("size", 1024, "record value size in bytes")
	idle := flag.Duration("idle", 60*time.Second, "idle measurement window")
	partitions := flag.Int("partitions", topics.DefaultPartitions, "partitions per topic")
	flag.Parse()
	if *n < 1 || *n > 1000000 || *size < 1 || *size > 1<<20 || *idle <= 0 || *idle > 10*time.Minute || *partitions < 1 || *partitions > 100 {
		fmt.Fprintln(os.Stderr, "bench: -n 1..1000000, -size 1..1048576, -idle up to 10m, -partitions 1..100")
		os.Exit(2)
	}
	loadtest.Main("bench", func(ctx context.Context) error { return run(ctx, *n, *size, *idle, int32(*partitions)) })
}

type bench struct {
	*loadtest.Run
	parts int32
}

func run(ctx context.Context, n, size int, idle time.Duration, parts int32) (err error) {
	r, err := loadtest.NewRun("bench-retrier", []string{"retrier"}, kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000))
	if err != nil {
		return err
	}
	defer func() { err = r.Close(err) }()
	b := &bench{Run: r, parts: parts}

	sched := retry.DefaultSchedule()
	parked := topics.NewNames(b.Prefix("bench"), sched.Names())
	empty := topics.NewNames(b.Prefix("bench-empty"), sched.Names())
	for _, nm := range []topics.Names{parked, empty} {
		if err := b.ensure(ctx, nm); err != nil {
			return b.Kafka.Explain(err)
		}
	}
	fmt.Printf("retrier benchmark: %d records of %d bytes per phase, %d partitions per topic, tiers %s, broker %s\n\n",
		n, size, parts, sched.String(), strings.Join(b.Kafka.Brokers, ","))

	// Phase 1: park n records in the 1h tier, due in an hour.
	hourTier := parked.Retry[slices.Index(sched.Names(), "1h")]
	took, err := b.park(ctx, hourTier, n, size, time.Now().Add(time.Hour))
	if err != nil {
		return err
	}
	fmt.Printf("parked %d records in %s in %s (%.0f records/s from this load generator)\n", n, hourTier, took.Round(time.Millisecond), float64(n)/took.Seconds())

	full, err := b.startRetrier(ctx, parked, "parked")
	if err != nil {
		return err
	}
	defer full.Kill()
	bare, err := b.startRetrier(ctx, empty, "empty")
	if err != nil {
		return err
	}
	defer bare.Kill()
	wantAssigned := float64(int(parts) * sched.Len())
	if err := full.waitMetric(ctx, "hookline_retrier_paused_partitions", 2*time.Minute, func(v float64) bool { return v == float64(parts) }); err != nil {
		return err
	}
	if err := bare.waitMetric(ctx, "hookline_retrier_assigned_partitions", 2*time.Minute, func(v float64) bool { return v == wantAssigned }); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the start-up fetches and GC settle
	f0, e0 := full.cpu(), bare.cpu()
	t0 := time.Now()
	fmt.Printf("idle: measuring both retrier processes for %s ...\n", idle)
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	el := time.Since(t0)
	f1, e1 := full.cpu(), bare.cpu()
	fullPct := 100 * (f1 - f0).Seconds() / el.Seconds()
	barePct := 100 * (e1 - e0).Seconds() / el.Seconds()
	fullRSS, fullHWM := full.rss()
	bareRSS, _ := bare.rss()
	fullHeap, _ := full.metricValue("go_memstats_heap_inuse_bytes")
	bareHeap, _ := bare.metricValue("go_memstats_heap_inuse_bytes")
	if moved := b.count(ctx, parked.Raw); moved != 0 {
		return fmt.Errorf("%d records moved from a tier due in an hour", moved)
	}
	fmt.Printf("  retrier CPU, %d records parked:  %6.3f%% of one core  | target 1%%: ratio %.3f | empty retrier %.3f%%: ratio %s\n",
		n, fullPct, fullPct/1, barePct, ratio(fullPct, barePct))
	fmt.Printf("  retrier RSS, %d records parked:  %6.1f MiB (peak %.1f) | empty retrier %.1f MiB: ratio %.2f\n",
		n, mib(fullRSS), mib(fullHWM), mib(bareRSS), float64(fullRSS)/float64(bareRSS))
	fmt.Printf("  retrier Go heap in use:            %6.1f MiB              | empty retrier %.1f MiB: ratio %.2f\n",
		fullHeap/(1<<20), bareHeap/(1<<20), fullHeap/bareHeap)
	fmt.Printf("  records moved while parked: 0 (none early)\n\n")
	rec := report.NewRecorder("bench-retrier")
	rec.Add("idle CPU with records parked", fullPct, "% of a core")
	rec.Add("idle CPU empty", barePct, "% of a core")
	rec.Add("idle RSS with records parked", mib(fullRSS), "MiB")
	rec.Add("idle RSS peak with records parked", mib(fullHWM), "MiB")
	rec.Add("idle RSS empty", mib(bareRSS), "MiB")
	rec.Add("idle heap in use with records parked", fullHeap/(1<<20), "MiB")
	rec.Add("idle heap in use empty", bareHeap/(1<<20), "MiB")
	rec.Add("ratio idle RSS parked/empty", float64(fullRSS)/float64(bareRSS), "ratio")

	// Phase 2: n records in the 1m tier, all due at the same instant, far
	// enough ahead that every one is parked (and its partition paused)
	// before it.
	minuteTier := parked.Retry[slices.Index(sched.Names(), "1m")]
	lead := 2*took + 10*time.Second
	due := time.Now().Add(lead).Truncate(time.Millisecond)
	before := full.cpu()
	if _, err := b.park(ctx, minuteTier, n, size, due); err != nil {
		return err
	}
	if time.Until(due) < 2*time.Second {
		return fmt.Errorf("parking took too long: the records came due before all were parked")
	}
	if err := full.waitMetric(ctx, "hookline_retrier_paused_partitions", time.Until(due), func(v float64) bool { return v == 2*float64(parts) }); err != nil {
		return err
	}
	fmt.Printf("due at once: %d records parked in %s, all due at %s; waiting ...\n", n, minuteTier, due.Format("15:04:05.000"))
	first, last, err := b.waitMoved(ctx, parked.Raw, n, due)
	if err != nil {
		return err
	}
	moveCPU := full.cpu() - before
	rate := float64(n) / last.Sub(due).Seconds()
	steady := float64(n) / max(last.Sub(first), time.Millisecond).Seconds()
	lat, err := full.metricValue("hookline_retrier_lateness_seconds_sum")
	if err != nil {
		return err
	}
	latN, _ := full.metricValue("hookline_retrier_lateness_seconds_count")

	// Baseline: the broker's own producer, same count and size, acks=all.
	perfTopic := parked.Prefix + "perf"
	if err := b.createTopic(ctx, perfTopic); err != nil {
		return err
	}
	perf, err := b.producerPerformance(ctx, perfTopic, n, size)
	if err != nil {
		return err
	}
	fmt.Printf("  moved: %d records, first %s after due, last %s after due (mean lateness %s)\n", n,
		first.Sub(due).Round(time.Millisecond), last.Sub(due).Round(time.Millisecond), (time.Duration(lat / latN * float64(time.Second))).Round(time.Millisecond))
	pr := perf.RecordsPerSec
	fmt.Printf("  retrier moved/s (due -> last in raw): %9.0f records/s | ProducerPerformance %9.0f records/s: ratio %.2f\n", rate, pr, rate/pr)
	fmt.Printf("  retrier moved/s (first -> last):      %9.0f records/s | ProducerPerformance %9.0f records/s: ratio %.2f\n", steady, pr, steady/pr)
	fmt.Printf("  retrier CPU for the move: %.2f s (%.1f µs per record)\n", moveCPU.Seconds(), float64(moveCPU.Microseconds())/float64(n))
	fmt.Printf("  ProducerPerformance: %s\n", perf.Line)
	rec.Add("due at once first moved after due", ms(first.Sub(due)), "ms")
	rec.Add("due at once last moved after due", ms(last.Sub(due)), "ms")
	rec.Add("due at once mean lateness", 1000*lat/latN, "ms")
	rec.Add("moved/s due to last", rate, "records/s")
	rec.Add("moved/s first to last", steady, "records/s")
	rec.Add("ProducerPerformance records/s", pr, "records/s")
	rec.Add("ratio moved/s due to last/ProducerPerformance", rate/pr, "ratio")
	rec.Add("ratio moved/s first to last/ProducerPerformance", steady/pr, "ratio")
	rec.Add("CPU per record moved", float64(moveCPU.Microseconds())/float64(n), "µs/record")
	if err := rec.WriteEnv(); err != nil {
		return err
	}

	// A clean stop: SIGTERM, exit 0.
	for _, r := range []*retrier{full, bare} {
		if err := r.Stop(30 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a (baseline 0)"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// ensure creates the raw and tier topics of nm as the retrier would.
func (b *bench) ensure(ctx context.Context, nm topics.Names) error {
	mine := append([]string{nm.Raw}, nm.Retry...)
	var specs []topics.Spec
	for _, s := range nm.Specs(topics.Shape{Partitions: b.parts, MaxMessageBytes: topics.DefaultMaxBodyBytes + topics.HeaderRoom}) {
		if slices.Contains(mine, s.Name) {
			specs = append(specs, s)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return topics.Ensure(cctx, b.Client, specs, -1)
}

// createTopic creates a topic named with one of the run's prefixes.
func (b *bench) createTopic(ctx context.Context, name string) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := b.Admin.CreateTopic(cctx, b.parts, -1, nil, name)
	return err
}

// park writes n records to a tier topic, each shaped as the processor
// writes them (attempt 2, one error, due-at), with distinct keys. Bodies are
// random capital letters, as ProducerPerformance's are: compression gains
// little on them, so fetch sizes and memory are those of real traffic at
// worst, not flattered by a body that compresses twentyfold.
func (b *bench) park(ctx context.Context, topic string, n, size int, due time.Time) (time.Duration, error) {
	pool := make([]byte, 1<<20+size)
	for i := range pool {
		pool[i] = 'A' + byte(mrand.IntN(26))
	}
	now := time.Now()
	errs := `[{"attempt":1,"at":"` + headers.FormatTime(now) + `","error":"destination answered 503","retryable":true}]`
	start := time.Now()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("stripe:evt_bench_%s_%d", topic, i)
		off := mrand.IntN(1 << 20)
		r := &kgo.Record{Topic: topic, Key: []byte(key), Value: pool[off : off+size]}
		for _, h := range [][2]string{
			{headers.Provider, "stripe"}, {headers.EventType, "invoice.paid"}, {headers.IdempotencyKey, key},
			{headers.ReceivedAt, headers.FormatTime(now)}, {headers.RequestID, strconv.Itoa(i)}, {headers.ContentType, "application/json"},
			{headers.Origin, headers.OriginIngest}, {headers.Attempt, "2"}, {headers.Errors, errs},
			{headers.FirstSeenAt, headers.FormatTime(now)}, {headers.DueAt, headers.FormatTime(due)},
			{headers.SourceTopic, "webhooks.raw"}, {headers.SourcePartition, "0"}, {headers.SourceOffset, strconv.Itoa(i)},
			{headers.HTTPName("Stripe-Signature"), "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
		} {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		wg.Add(1)
		b.Client.Produce(pctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				first = cmpOr(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, fmt.Errorf("park in %s: %w", topic, first)
	}
	return time.Since(start), nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// count is the number of records written to topic (sum of end offsets).
func (b *bench) count(ctx context.Context, topic string) int64 {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := b.Admin.ListEndOffsets(cctx, topic)
	if err != nil {
		return -1
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum
}

// waitMoved polls raw's end offsets every 20ms until n records are there,
// and returns when the first and the last were seen.
func (b *bench) waitMoved(ctx context.Context, raw string, n int, due time.Time) (first, last time.Time, err error) {
	deadline := time.Now().Add(time.Until(due) + 5*time.Minute)
	for time.Now().Before(deadline) {
		c := b.count(ctx, raw)
		now := time.Now()
		if c > 0 && first.IsZero() {
			if now.Before(due) {
				return first, last, fmt.Errorf("%d records in raw at %s, before their due time %s", c, now, due)
			}
			first = now
		}
		if c >= int64(n) {
			return first, now, nil
		}
		select {
		case <-ctx.Done():
			return first, last, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return first, last, fmt.Errorf("not every record moved within 5 minutes of its due time")
}

// producerPerformance runs the broker's ProducerPerformance tool, saying
// how.
func (b *bench) producerPerformance(ctx context.Context, topic string, n, size int) (loadtest.Perf, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	p, err := loadtest.ProducerPerformance(pctx, b.Kafka, topic, n, size)
	if p.Command != "" {
		fmt.Printf("baseline: %s\n", p.Command)
	}
	return p, err
}

// retrier is a running retrier process and its metrics address.
type retrier struct {
	*loadtest.Proc
	addr string
}

// startRetrier runs the retrier on the topics of nm (its settings from this
// process's environment, KAFKA_* included) and waits until it is healthy.
func (b *bench) startRetrier(ctx context.Context, nm topics.Names, name string) (*retrier, error) {
	addr, err := loadtest.FreeAddr()
	if err != nil {
		return nil, err
	}
	p, err := loadtest.Start(b.Bins["retrier"], []string{"HOOKLINE_TOPIC_PREFIX=" + nm.Prefix,
		"HOOKLINE_PARTITIONS=" + strconv.Itoa(int(b.parts)), "HOOKLINE_METRICS_ADDR=" + addr, "HOOKLINE_LOG_LEVEL=warn"},
		filepath.Join(b.Dir, "retrier-"+name+".log"))
	if err != nil {
		return nil, err
	}
	p.Name = "retrier " + name
	r := &retrier{Proc: p, addr: addr}
	if err := p.WaitReady(ctx, "http://"+addr+"/healthz", time.Minute); err != nil {
		p.Kill()
		return nil, err
	}
	return r, nil
}

// cpu is the process's user plus system CPU time.
func (r *retrier) cpu() time.Duration {
	d, _ := loadtest.CPU(r.Pid())
	return d
}

// rss returns the process's RSS and its peak, in bytes.
func (r *retrier) rss() (rss, hwm int64) {
	rss, _ = loadtest.RSS(r.Pid())
	hwm, _ = loadtest.PeakRSS(r.Pid())
	return rss, hwm
}

// metricValue sums the samples of a metric on the retrier's /metrics.
func (r *retrier) metricValue(name string) (float64, error) {
	return loadtest.CounterSum(context.Background(), "http://"+r.addr+"/metrics", name)
}

func (r *retrier) waitMetric(ctx context.Context, name string, timeout time.Duration, ok func(float64) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		v, err := r.metricValue(name)
		if err == nil && ok(v) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s is %v after %s (log %s)", r.Name, name, v, timeout, r.Log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
