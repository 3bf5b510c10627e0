// Command bench is the retrier's benchmark (make bench-retrier). It runs the
// real retrier binary against the local broker and prints every figure next
// to its baseline, all taken in one run on one machine:
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
// refuses a KAFKA_BROKERS that is not a loopback address. Its topics and
// groups are deleted at the end.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/loadtest"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100
// on every Linux architecture Go supports).
const userHZ = 100

func main() {
	n := flag.Int("n", 100000, "records per phase (at most 1,000,000)")
	size := flag.Int("size", 1024, "record value size in bytes")
	idle := flag.Duration("idle", 60*time.Second, "idle measurement window")
	partitions := flag.Int("partitions", topics.DefaultPartitions, "partitions per topic")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *n < 1 || *n > 1000000 || *size < 1 || *size > 1<<20 || *idle <= 0 || *idle > 10*time.Minute || *partitions < 1 || *partitions > 100 {
		fmt.Fprintln(os.Stderr, "bench: -n 1..1000000, -size 1..1048576, -idle up to 10m, -partitions 1..100")
		os.Exit(2)
	}
	if err := run(ctx, *n, *size, *idle, int32(*partitions)); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	brokers []string
	root    string
	bin     string
	cl      *kgo.Client
	adm     *kadm.Client
	parts   int32
	topics  []string // to delete at the end
	groups  []string
}

func run(ctx context.Context, n, size int, idle time.Duration, parts int32) (err error) {
	b := &bench{parts: parts}
	if b.brokers, err = loadtest.LoopbackBrokers(); err != nil {
		return err
	}
	if b.root, err = repoRoot(); err != nil {
		return err
	}
	if b.bin, err = retrierBinary(b.root); err != nil {
		return err
	}
	b.cl, err = kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000))
	if err != nil {
		return err
	}
	defer b.cl.Close()
	b.adm = kadm.NewClient(b.cl)
	defer b.cleanup()

	sched := retry.DefaultSchedule()
	parked := topics.NewNames(prefix("bench"), sched.Names())
	empty := topics.NewNames(prefix("bench-empty"), sched.Names())
	for _, nm := range []topics.Names{parked, empty} {
		if err := b.ensure(ctx, nm); err != nil {
			return err
		}
	}
	fmt.Printf("retrier benchmark: %d records of %d bytes per phase, %d partitions per topic, tiers %s, broker %s\n\n",
		n, size, parts, sched.String(), strings.Join(b.brokers, ","))

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
	defer full.stop()
	bare, err := b.startRetrier(ctx, empty, "empty")
	if err != nil {
		return err
	}
	defer bare.stop()
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
	perf, perfLine, err := b.producerPerformance(ctx, perfTopic, n, size)
	if err != nil {
		return err
	}
	fmt.Printf("  moved: %d records, first %s after due, last %s after due (mean lateness %s)\n", n,
		first.Sub(due).Round(time.Millisecond), last.Sub(due).Round(time.Millisecond), (time.Duration(lat / latN * float64(time.Second))).Round(time.Millisecond))
	fmt.Printf("  retrier moved/s (due -> last in raw): %9.0f records/s | ProducerPerformance %9.0f records/s: ratio %.2f\n", rate, perf, rate/perf)
	fmt.Printf("  retrier moved/s (first -> last):      %9.0f records/s | ProducerPerformance %9.0f records/s: ratio %.2f\n", steady, perf, steady/perf)
	fmt.Printf("  retrier CPU for the move: %.2f s (%.1f µs per record)\n", moveCPU.Seconds(), float64(moveCPU.Microseconds())/float64(n))
	fmt.Printf("  ProducerPerformance: %s\n", perfLine)

	// A clean stop: SIGTERM, exit 0.
	for _, r := range []*retrier{full, bare} {
		if err := r.terminate(); err != nil {
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

func prefix(name string) string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return name + "-" + hex.EncodeToString(r[:]) + "."
}

// repoRoot is the nearest folder up from the working directory holding
// compose/kafka.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "compose", "kafka.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from the repository (compose/kafka.sh not found above the working directory)")
		}
		dir = parent
	}
}

// retrierBinary is $HOOKLINE_BIN_DIR/retrier, or a fresh build.
func retrierBinary(root string) (string, error) {
	if dir := os.Getenv("HOOKLINE_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, "retrier")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("HOOKLINE_BIN_DIR=%s: %w (run make build)", dir, err)
		}
		return p, nil
	}
	dir, err := os.MkdirTemp("", "hookline-bench-")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "retrier")
	cmd := exec.Command("go", "build", "-o", p, "./retrier")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./retrier: %w\n%s", err, out)
	}
	return p, nil
}

// ensure creates the raw and tier topics of nm as the retrier would.
func (b *bench) ensure(ctx context.Context, nm topics.Names) error {
	mine := append([]string{nm.Raw}, nm.Retry...)
	var specs []topics.Spec
	for _, s := range nm.Specs(topics.Shape{Partitions: b.parts, MaxMessageBytes: topics.DefaultMaxBodyBytes + topics.HeaderRoom}) {
		if slices.Contains(mine, s.Name) {
			specs = append(specs, s)
		}
	}
	b.topics = append(b.topics, mine...)
	b.groups = append(b.groups, nm.Group(topics.GroupRetrier))
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return topics.Ensure(cctx, b.cl, specs, -1)
}

func (b *bench) createTopic(ctx context.Context, name string) error {
	b.topics = append(b.topics, name)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := b.adm.CreateTopic(cctx, b.parts, -1, nil, name)
	return err
}

// cleanup deletes the benchmark's topics and groups.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.adm.DeleteGroups(ctx, b.groups...); err != nil {
		fmt.Fprintln(os.Stderr, "bench: delete groups:", err)
	}
	if _, err := b.adm.DeleteTopics(ctx, b.topics...); err != nil {
		fmt.Fprintln(os.Stderr, "bench: delete topics:", err)
	}
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
		b.cl.Produce(pctx, r, func(_ *kgo.Record, err error) {
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
	offs, err := b.adm.ListEndOffsets(cctx, topic)
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

var perfRE = regexp.MustCompile(`(\d+) records sent, ([0-9.]+) records/sec`)

// producerPerformance runs the broker's ProducerPerformance tool and returns
// its records/s and its summary line.
func (b *bench) producerPerformance(ctx context.Context, topic string, n, size int) (float64, string, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := []string{"perf", "--bootstrap-server", b.brokers[0], "--topic", topic, "--num-records", strconv.Itoa(n),
		"--record-size", strconv.Itoa(size), "--throughput", "-1", "--command-property", "acks=all"}
	fmt.Printf("baseline: compose/kafka.sh %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(pctx, filepath.Join(b.root, "compose", "kafka.sh"), args...)
	cmd.Dir = b.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, "", fmt.Errorf("compose/kafka.sh perf: %w\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if perfRE.MatchString(l) {
			line = strings.TrimSpace(l) // the last one is the summary
		}
	}
	m := perfRE.FindStringSubmatch(line)
	if m == nil || m[1] != strconv.Itoa(n) {
		return 0, "", fmt.Errorf("no summary line for %d records in the perf output:\n%s", n, out)
	}
	rate, err := strconv.ParseFloat(m[2], 64)
	return rate, line, err
}

// retrier is a running retrier process.
type retrier struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  string
	done chan error
}

func (b *bench) startRetrier(ctx context.Context, nm topics.Names, name string) (*retrier, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.CreateTemp("", "hookline-bench-retrier-"+name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"KAFKA_BROKERS=" + strings.Join(b.brokers, ","), "HOOKLINE_TOPIC_PREFIX=" + nm.Prefix,
		"HOOKLINE_PARTITIONS=" + strconv.Itoa(int(b.parts)), "HOOKLINE_METRICS_ADDR=" + addr, "HOOKLINE_LOG_LEVEL=warn"}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	logf.Close()
	r := &retrier{name: name, cmd: cmd, addr: addr, log: logf.Name(), done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return r, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, fmt.Errorf("retrier %s not healthy within a minute (log %s)", name, r.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop kills the process if it still runs.
func (r *retrier) stop() {
	select {
	case <-r.done:
		r.done <- nil
	default:
		_ = r.cmd.Process.Kill()
	}
}

// terminate sends SIGTERM and requires exit status 0 within 30s.
func (r *retrier) terminate() error {
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			return fmt.Errorf("retrier %s: %w on SIGTERM (log %s)", r.name, err, r.log)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("retrier %s still running 30s after SIGTERM", r.name)
	}
}

// cpu is the process's user plus system CPU time, from /proc/<pid>/stat.
func (r *retrier) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / userHZ
}

// rss returns VmRSS and VmHWM (peak RSS) in bytes, from /proc/<pid>/status.
func (r *retrier) rss() (rss, hwm int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
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
			return fmt.Errorf("retrier %s: %s is %v after %s (log %s)", r.name, name, v, timeout, r.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
