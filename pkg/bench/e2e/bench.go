package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/topics"
)

const secret = "bench-e2e-secret"

// report is what run measured.
type report struct {
	Perf           [2]loadtest.Perf // before and after the phases
	Closed, Opened phaseReport
	Isolation      isolation.Report // fastpay alone, then with slowcrm
	Ordering       orderingReport   // phases 5 to 7 (issue 24)
	Verified       int              // keys with exactly one done outcome
	Parked         int              // parked outcomes read (records that waited in a lane before their end)
	Redelivered    int              // keys the destination saw more than once
}

// phaseReport is one load phase's figures.
type phaseReport struct {
	Name     string
	Events   int
	PostRate float64 // 202s per second while posting
	E2ERate  float64 // outcomes / (last visible - first POST)
	Ingest   loadtest.Result
	Total    []time.Duration // 202 -> outcome visible
	Pickup   []time.Duration // 202 -> outcome's time field
	Commit   []time.Duration // outcome's time field -> visible
	// Commit's keys split (tracker.splits): 202 -> taken up, taken up ->
	// outcome produced, -> readable read_uncommitted, -> visible
	// read_committed; index i is one key in all four.
	Taken, Produce, Readable, Committed []time.Duration
	CPU                                 map[string]time.Duration
	// Busy and All are the whole machine's busy and total CPU time over
	// the phase (loadtest.MachineCPU, shared as CPU is): anyone's, so
	// Busy/All is how full the cores were, and Busy less CPU's sum what
	// neither the services, this process nor the broker used.
	Busy, All time.Duration
	Txns      float64 // processor transactions
	TxnSec    float64 // their total poll-to-commit seconds
	Records   float64 // records they committed
	Handler   float64 // mean destination call, seconds
}

// bench is one run's state.
type bench struct {
	cfg     config
	out     io.Writer
	run     *loadtest.Run // cluster, client, binaries, folder, prefix
	names   topics.Names
	track   *tracker
	iso     isolation.Scenario
	tl      *isolation.Timeline // 202 -> destination call of the isolation phases
	dest    *destination
	client  *http.Client
	ingest  string // base URL
	metrics string // processor /metrics
	procs   []*loadtest.Proc
	broker  int                 // the local broker's pid (-broker-pid-file), 0: not measured
	reg     *providers.Registry // signs the posts
	pad     string
	tiers   string // HOOKLINE_RETRY_TIERS of the services (benchTiers)
	// extraEnv is added to every service's environment (tracing.go).
	extraEnv []string
}

// benchTiers are the services' retry tiers: short, so phase 7's failing
// event is retried within the phase (nothing else fails).
const benchTiers = "1s,2s"

func run(ctx context.Context, cfg config, out io.Writer) (rep report, err error) {
	b := &bench{cfg: cfg, out: out, track: newTracker(), iso: cfg.isolation(), tl: isolation.NewTimeline(), pad: strings.Repeat("x", cfg.BodySize), tiers: benchTiers,
		broker: loadtest.BrokerPID(cfg.BrokerPIDFile, "bench-e2e")}
	if b.run, err = loadtest.NewRun("bench-e2e", []string{"ingest", "processor", "retrier"}); err != nil {
		return rep, err
	}
	defer func() { err = b.run.Close(err) }()
	sched, err := retry.ParseSchedule(b.tiers)
	if err != nil {
		return rep, err
	}
	b.names = topics.NewNames(b.run.Prefix("bench-e2e"), sched.Names())

	if b.dest, err = startDestination(b.iso.Delay, b.tl.Called); err != nil {
		return rep, err
	}
	defer b.dest.close()
	b.client = loadtest.PostClient(1024, 0)
	defer b.client.CloseIdleConnections()

	fmt.Fprintf(out, "hookline end-to-end benchmark: POST -> ingest -> processor -> destination (200, in this process) -> `done` outcome read back read_committed;\n")
	fmt.Fprintf(out, "then isolation: fastpay's 202 -> destination call alone, and with slowcrm's slow destination loaded;\n")
	fmt.Fprintf(out, "then ordering: an ordered provider at half load, and one entity failing beside the others\n")
	fmt.Fprintf(out, "%d-byte signed Stripe events, %d partitions, broker %s, topic prefix %s\n", cfg.BodySize, cfg.Partitions, strings.Join(b.run.Kafka.Brokers, ","), b.names.Prefix)
	fmt.Fprintf(out, "service settings from the environment: %s\n\n", settings())

	// Baseline: the broker's own producer, before the services start and
	// again after the phases, so the ratio sees the machine's noise.
	perfTopic := b.names.Prefix + "perf"
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = b.run.Admin.CreateTopic(cctx, int32(cfg.Partitions), -1, nil, perfTopic)
	cancel()
	if err != nil {
		return rep, fmt.Errorf("create %s: %w", perfTopic, b.run.Kafka.Explain(err))
	}
	if err := b.baseline(ctx, &rep.Perf[0], perfTopic, "before"); err != nil {
		return rep, err
	}

	if err := b.start(ctx); err != nil {
		return rep, err
	}
	defer func() {
		for _, p := range b.procs {
			p.Kill()
		}
	}()

	stopReader, err := b.readOutcomes(ctx)
	if err != nil {
		return rep, err
	}
	defer stopReader()
	stopUncommitted, err := b.readUncommitted(ctx)
	if err != nil {
		return rep, err
	}
	defer stopUncommitted()

	// Warm-up: the processor joins its group, every connection opens.
	warm := &phase{name: "warm-up"}
	if _, err := b.closedPhase(ctx, warm, max(1, cfg.Conns/8), cfg.Warmup); err != nil {
		return rep, err
	}

	fmt.Fprintf(out, "phase 1: closed loop, %d posters for %s ...\n", cfg.Conns, cfg.Closed)
	p1 := &phase{name: "closed loop"}
	if rep.Closed, err = b.closedPhase(ctx, p1, cfg.Conns, cfg.Closed); err != nil {
		return rep, err
	}
	rate := rep.Closed.E2ERate * cfg.OpenFraction
	if cfg.OpenRate > 0 {
		rate = cfg.OpenRate
	}
	// Phases 2 and 5 alternated, HalfRounds rounds (halfload.go).
	half, err := b.halfLoad(ctx, rate)
	if err != nil {
		return rep, err
	}
	unordered := make([]phaseReport, len(half))
	for i, h := range half {
		unordered[i] = h.Unordered
	}
	rep.Opened = pooled(fmt.Sprintf("open loop, %.0f/s", rate), unordered)

	if rep.Isolation, err = b.isolation(ctx); err != nil {
		fmt.Fprintf(out, "\n%s\n", rep.Isolation)
		return rep, err
	}
	if rep.Ordering, err = b.ordering(ctx, half, rep.Opened); err != nil {
		fmt.Fprintf(out, "\n%s\n", rep.Ordering)
		return rep, err
	}

	// Anything late (a second outcome for a key) shows within this.
	if err := b.baseline(ctx, &rep.Perf[1], perfTopic, "after"); err != nil {
		return rep, err
	}
	// Print what was measured before the checks, which may fail (a
	// processor that cannot isolate slowcrm sends some of it to a retry
	// tier).
	var verr error
	rep.Verified, verr = b.track.verify()
	rep.Parked = b.track.parkedCount()
	for _, k := range b.track.keys() {
		switch c := b.dest.calls(k); {
		case c == 0 && verr == nil:
			verr = fmt.Errorf("%s: a done outcome, but the destination was never called", k)
		case c > 1:
			rep.Redelivered++
		}
	}
	b.print(rep, verr)
	if verr != nil {
		return rep, verr
	}

	var stopErr error
	for i := len(b.procs) - 1; i >= 0; i-- {
		stopErr = errors.Join(stopErr, b.procs[i].Stop(30*time.Second))
	}
	return rep, stopErr
}

// baseline runs ProducerPerformance into p.
func (b *bench) baseline(ctx context.Context, p *loadtest.Perf, topic, when string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var err error
	if *p, err = loadtest.ProducerPerformance(ctx, b.run.Kafka, topic, b.cfg.PerfRecords, 1024); err != nil {
		return err
	}
	fmt.Fprintf(b.out, "baseline %s: ProducerPerformance, %d records of 1024 bytes, acks=all, %d partitions: %.0f records/s (%.1f ms average latency)\n",
		when, p.Records, b.cfg.Partitions, p.RecordsPerSec, p.AvgLatencyMS)
	return nil
}

// PerfRate is the mean of the two baseline runs, in records/s.
func (r report) PerfRate() float64 { return (r.Perf[0].RecordsPerSec + r.Perf[1].RecordsPerSec) / 2 }

// settings lists the HOOKLINE_* variables this run inherits (they change
// the services' configuration), or says the defaults apply.
func settings() string {
	var s []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOOKLINE_") && !strings.HasPrefix(kv, "HOOKLINE_BIN_DIR=") {
			s = append(s, kv)
		}
	}
	if len(s) == 0 {
		return "none, every default (processor HOOKLINE_BATCH_MAX_RECORDS=500, HOOKLINE_MAX_INFLIGHT=64)"
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// start runs ingest (which creates the topics), then processor and retrier,
// and waits until each is ready.
func (b *bench) start(ctx context.Context) error {
	prov := filepath.Join(b.run.Dir, "providers.yaml")
	if err := os.WriteFile(prov, []byte(fmt.Sprintf(`providers:
  stripe:
    preset: stripe
    secret_env: [BENCH_E2E_SECRET]
    destination: {url: %q, timeout: 5s}
`, b.dest.url)+b.iso.Providers(b.dest.url, "BENCH_E2E_SECRET")+orderedProviders(b.dest.url, "BENCH_E2E_SECRET")), 0o600); err != nil {
		return err
	}
	reg, err := providers.Load(prov, func(k string) (string, bool) { return secret, k == "BENCH_E2E_SECRET" })
	if err != nil {
		return err
	}
	b.reg = reg
	// KAFKA_* (TLS, SASL too) come with this process's environment.
	common := []string{"HOOKLINE_TOPIC_PREFIX=" + b.names.Prefix,
		fmt.Sprintf("HOOKLINE_PARTITIONS=%d", b.cfg.Partitions), "HOOKLINE_PROVIDERS=" + prov,
		"BENCH_E2E_SECRET=" + secret, "HOOKLINE_LOG_LEVEL=warn", "HOOKLINE_RETRY_TIERS=" + b.tiers}
	common = append(common, b.extraEnv...)
	addrs := make([]string, 3)
	for i := range addrs {
		a, err := loadtest.FreeAddr()
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	envs := [3][]string{
		{"HOOKLINE_INGEST_ADDR=" + addrs[0]},
		{"HOOKLINE_METRICS_ADDR=" + addrs[1], "HOOKLINE_STATE_DIR=" + filepath.Join(b.run.Dir, "state"), "HOOKLINE_INSTANCE_ID=bench-e2e"},
		{"HOOKLINE_METRICS_ADDR=" + addrs[2]},
	}
	for i, name := range []string{"ingest", "processor", "retrier"} {
		bin := b.run.Bins[name]
		p, err := loadtest.Start(bin, append(append([]string(nil), common...), envs[i]...), filepath.Join(b.run.Dir, filepath.Base(bin)+".log"))
		if err != nil {
			return err
		}
		b.procs = append(b.procs, p)
		if err := p.WaitReady(ctx, "http://"+addrs[i]+"/readyz", 90*time.Second); err != nil {
			return err
		}
	}
	b.ingest = "http://" + addrs[0]
	b.metrics = "http://" + addrs[1] + "/metrics"
	return nil
}

// post sends one signed event of Stripe's shape to the provider ph names
// (stripe by default) and records its 202.
func (b *bench) post(ctx context.Context, ph *phase, i int) error {
	provider := cmp.Or(ph.provider, "stripe")
	id := postID(ph, i)
	head, iso := `{"id":"`+id+`","object":"event","type":"invoice.paid","pad":"`, ph.iso
	if ph.ents != nil {
		head, iso = ph.ents.body(id, i, iso)
	}
	body := []byte(head + b.padding(b.cfg.BodySize-len(head)-2) + `"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.ingest+"/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	p, ok := b.reg.Get(provider)
	if !ok {
		return fmt.Errorf("no provider %s in the providers file", provider)
	}
	if err := p.Sign(body, time.Now(), req.Header); err != nil {
		return err
	}
	key := provider + ":" + id
	e := b.track.posting(ph, key, time.Now())
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST %s: %d %s", id, resp.StatusCode, msg)
	}
	now := time.Now()
	b.track.accept(e, now)
	if iso != "" {
		b.tl.Accepted(iso, now, key)
	}
	return nil
}

// postID is the id of ph's post i.
func postID(ph *phase, i int) string {
	return fmt.Sprintf("evt_%s_%d", strings.ReplaceAll(ph.name, " ", "-"), i)
}

// padding is n bytes of filler (b.pad holds BodySize of them).
func (b *bench) padding(n int) string { return b.pad[:max(0, min(n, len(b.pad)))] }

// closedPhase runs ph as a closed loop and waits for its outcomes.
func (b *bench) closedPhase(ctx context.Context, ph *phase, conns int, dur time.Duration) (phaseReport, error) {
	return b.measure(ctx, ph, func(do func(context.Context, int) error) loadtest.Result {
		return loadtest.ClosedLoop(ctx, conns, dur, do)
	})
}

// openPhase runs ph as an open loop at rate and waits for its outcomes.
func (b *bench) openPhase(ctx context.Context, ph *phase, rate float64, dur time.Duration) (phaseReport, error) {
	return b.measure(ctx, ph, func(do func(context.Context, int) error) loadtest.Result {
		return loadtest.OpenLoop(ctx, rate, dur, do)
	})
}

// pairPhase runs phases x and y interleaved on one open loop at rate: post
// i is x's post i/2 when i is even, y's when odd, so each runs at rate/2,
// and every moment of the machine (a collection, a fetch, the other
// programs on the cores, a stall of this program's own) falls on both
// alike. Their latencies are their own keys'; the services' CPU and the
// processor's transactions are the pair's (measureAll). (Two open loops,
// one half an interval behind the other, gave the second the longer tail:
// after a stall each loop's late posts went out in a burst, the first
// loop's burst first.)
func (b *bench) pairPhase(ctx context.Context, x, y *phase, rate float64, dur time.Duration) (rx, ry phaseReport, err error) {
	rs, err := b.measureAll(ctx, []*phase{x, y}, func(dos []func(context.Context, int) error) []loadtest.Result {
		return loadtest.OpenLoops(ctx, rate, dur, len(dos), func(ctx context.Context, load, i int) error { return dos[load](ctx, i) })
	})
	return rs[0], rs[1], err
}

// load posts phs' events as drive drives them, dos[j] posting phs[j]'s
// post i; the error names the first POST that failed in each phase that
// had one.
func (b *bench) load(phs []*phase, drive driver) ([]loadtest.Result, error) {
	var mu sync.Mutex
	first := make([]error, len(phs))
	dos := make([]func(context.Context, int) error, len(phs))
	for j, ph := range phs {
		dos[j] = func(ctx context.Context, i int) error {
			err := b.post(ctx, ph, i)
			if err != nil {
				mu.Lock()
				first[j] = cmp.Or(first[j], err)
				mu.Unlock()
			}
			return err
		}
	}
	res := drive(dos)
	var errs []error
	for j, r := range res {
		if r.Errors > 0 {
			errs = append(errs, fmt.Errorf("%s: %d POSTs failed; the first: %w", phs[j].name, r.Errors, first[j]))
		}
	}
	return res, errors.Join(errs...)
}

// measure runs ph, driven by load, waits for its outcomes and reports it.
func (b *bench) measure(ctx context.Context, ph *phase, load func(do func(context.Context, int) error) loadtest.Result) (phaseReport, error) {
	rs, err := b.measureAll(ctx, []*phase{ph}, func(dos []func(context.Context, int) error) []loadtest.Result {
		return []loadtest.Result{load(dos[0])}
	})
	return rs[0], err
}

// driver drives the posts of one or more phases at once, dos[j] posting
// phase j's post i, and gives each phase's answers.
type driver func(dos []func(context.Context, int) error) []loadtest.Result

// measureAll runs phs at once as drive drives them, waits for their
// outcomes and reports each: its own posts, answers and latencies; the
// services' CPU of the whole, shared by the phases in proportion to their
// events; the processor's transactions of the whole, in each.
func (b *bench) measureAll(ctx context.Context, phs []*phase, drive driver) ([]phaseReport, error) {
	rs := make([]phaseReport, len(phs))
	for i, ph := range phs {
		rs[i] = phaseReport{Name: ph.name, CPU: map[string]time.Duration{}}
	}
	cpu0 := b.cpu()
	busy0, all0, err := loadtest.MachineCPU()
	if err != nil {
		return rs, err
	}
	m0, err := b.processorMetrics(ctx)
	if err != nil {
		return rs, err
	}
	ingest, err := b.load(phs, drive)
	for i, r := range ingest {
		rs[i].Ingest = r
	}
	if err != nil {
		return rs, err
	}
	for _, ph := range phs {
		if err := b.track.wait(ctx, ph, b.cfg.Drain); err != nil {
			return rs, err
		}
	}
	cpu1 := b.cpu()
	busy1, all1, err := loadtest.MachineCPU()
	if err != nil {
		return rs, err
	}
	m1, err := b.processorMetrics(ctx)
	if err != nil {
		return rs, err
	}
	for _, p := range b.procs {
		if err := p.Err(); err != nil {
			return rs, err
		}
	}
	b.track.mu.Lock()
	seen := 0
	for _, ph := range phs {
		seen += ph.seen
	}
	for i, ph := range phs {
		r := &rs[i]
		share := 1 / float64(len(phs))
		if seen > 0 {
			share = float64(ph.seen) / float64(seen)
		}
		for k, v := range cpu1 {
			r.CPU[k] = time.Duration(float64(v-cpu0[k]) * share)
		}
		r.Busy, r.All = time.Duration(float64(busy1-busy0)*share), time.Duration(float64(all1-all0)*share)
		r.Events = ph.seen
		r.E2ERate = float64(ph.seen) / ph.lastSeen.Sub(ph.firstPost).Seconds()
	}
	b.track.mu.Unlock()
	for i, ph := range phs {
		r := &rs[i]
		r.PostRate = r.Ingest.Rate()
		r.Total, r.Pickup, r.Commit = b.track.latencies(ph)
		r.Taken, r.Produce, r.Readable, r.Committed = b.track.splits(ph)
		r.Txns = m1.txns - m0.txns
		r.TxnSec = m1.txnSec - m0.txnSec
		r.Records = m1.records - m0.records
		if n := m1.handlerN - m0.handlerN; n > 0 {
			r.Handler = (m1.handlerSec - m0.handlerSec) / n
		}
	}
	return rs, nil
}

// cpu is the CPU time used so far by each service, by this process
// (posters, destination and reader) and by the local broker, if known.
func (b *bench) cpu() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, p := range b.procs {
		out[p.Name], _ = loadtest.CPU(p.Pid())
	}
	out["bench"], _ = loadtest.CPU(os.Getpid())
	if b.broker > 0 {
		out["broker"], _ = loadtest.CPU(b.broker)
	}
	return out
}

type procMetrics struct{ txns, txnSec, records, handlerSec, handlerN float64 }

func (b *bench) processorMetrics(ctx context.Context) (procMetrics, error) {
	var m procMetrics
	for _, f := range []struct {
		name string
		v    *float64
	}{
		{"hookline_processor_transaction_seconds_count", &m.txns},
		{"hookline_processor_transaction_seconds_sum", &m.txnSec},
		{"hookline_processor_records_total", &m.records},
		{"hookline_processor_handler_seconds_sum", &m.handlerSec},
		{"hookline_processor_handler_seconds_count", &m.handlerN},
	} {
		v, err := loadtest.CounterSum(ctx, b.metrics, f.name)
		if err != nil {
			return m, fmt.Errorf("processor metrics: %w", err)
		}
		*f.v = v
	}
	return m, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// print prints the figures, and the exactly-once verdict (verr, when it
// failed).
func (b *bench) print(rep report, verr error) {
	out := b.out
	fmt.Fprintf(out, "\n%-28s %8s %10s %12s %9s %9s %9s\n", "phase", "events", "POST 202/s", "e2e events/s", "p50 ms", "p99 ms", "max ms")
	for _, r := range []phaseReport{rep.Closed, rep.Opened} {
		fmt.Fprintf(out, "%-28s %8d %10.0f %12.0f %9.1f %9.1f %9.1f\n", r.Name, r.Events, r.PostRate, r.E2ERate,
			ms(loadtest.Percentile(r.Total, 50)), ms(loadtest.Percentile(r.Total, 99)), ms(loadtest.Percentile(r.Total, 100)))
	}
	fmt.Fprintf(out, "(latency: ingest's 202 read by the poster -> the `done` outcome read by a read_committed consumer)\n\n")
	for _, r := range []phaseReport{rep.Closed, rep.Opened} {
		fmt.Fprintf(out, "%s:\n", r.Name)
		fmt.Fprintf(out, "  POST -> 202 (ingest, acks=all)            p50 %7.1f ms  p99 %7.1f ms\n", ms(r.Ingest.Pct(50)), ms(r.Ingest.Pct(99)))
		fmt.Fprintf(out, "  202 -> processor took it up (its `time`)  p50 %7.1f ms  p99 %7.1f ms\n", ms(loadtest.Percentile(r.Pickup, 50)), ms(loadtest.Percentile(r.Pickup, 99)))
		fmt.Fprintf(out, "  taken up -> outcome visible (commit)      p50 %7.1f ms  p99 %7.1f ms\n", ms(loadtest.Percentile(r.Commit, 50)), ms(loadtest.Percentile(r.Commit, 99)))
		printShares(out, r)
		if r.Txns > 0 {
			fmt.Fprintf(out, "  processor: %.0f transactions, %.1f records each, %.1f ms poll -> commit on average; destination call %.2f ms on average\n",
				r.Txns, r.Records/r.Txns, 1000*r.TxnSec/r.Txns, 1000*r.Handler)
		}
		printCPU(out, r)
	}
	fmt.Fprintf(out, "\nratio e2e events/s / ProducerPerformance records/s: %.3f (closed loop %.0f / mean baseline %.0f; %.3f against the run before, %.3f after)\n",
		rep.Closed.E2ERate/rep.PerfRate(), rep.Closed.E2ERate, rep.PerfRate(), rep.Closed.E2ERate/rep.Perf[0].RecordsPerSec, rep.Closed.E2ERate/rep.Perf[1].RecordsPerSec)
	fmt.Fprintf(out, "ratio e2e events/s / ingest POST 202/s, closed loop: %.3f\n", rep.Closed.E2ERate/rep.Closed.PostRate)
	printHalfLoad(out, rep.Ordering.Rounds, rep.Ordering.Twin, rep.Ordering.HalfLoad)
	fmt.Fprintf(out, "\n%s\n", rep.Isolation)
	fmt.Fprintf(out, "\n%s\n", rep.Ordering)
	if verr != nil {
		fmt.Fprintf(out, "NOT verified: %v\n", verr)
		return
	}
	fmt.Fprintf(out, "verified: each of the %d keys accepted (warm-up included) has exactly one end, `done` (%d were parked on the way); the destination saw %d of them more than once\n",
		rep.Verified, rep.Parked, rep.Redelivered)
}

// printCPU prints r's CPU per event, by process.
func printCPU(out io.Writer, r phaseReport) {
	names := make([]string, 0, len(r.CPU))
	for k := range r.CPU {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(out, "  CPU per event:")
	for _, k := range names {
		fmt.Fprintf(out, " %s %.0f µs", k, float64(r.CPU[k].Microseconds())/float64(max(r.Events, 1)))
	}
	fmt.Fprintln(out)
	if r.All > 0 {
		var ours time.Duration
		for _, v := range r.CPU {
			ours += v
		}
		fmt.Fprintf(out, "  machine: %.0f %% of its %d cores busy (%.0f %% by the programs above, %.0f %% by anything else)\n",
			r.busyPct(), runtime.NumCPU(), 100*ours.Seconds()/r.All.Seconds(), 100*(r.Busy-ours).Seconds()/r.All.Seconds())
	}
}

// busyPct is the share of the machine's cores that were busy over r, %.
func (r phaseReport) busyPct() float64 {
	if r.All <= 0 {
		return 0
	}
	return 100 * r.Busy.Seconds() / r.All.Seconds()
}

// destination is the HTTP server every provider delivers to: 200 to
// everything (but the first two calls of a key fail says: 503), after
// delay(key), counting calls per Idempotency-Key and telling called of
// each call as it arrives.
type destination struct {
	srv  *http.Server
	url  string
	mu   sync.Mutex
	n    map[string]int
	fail func(key string) bool
}

// failing makes the first two calls of each key fail names answer 503.
func (d *destination) failing(fail func(key string) bool) {
	d.mu.Lock()
	d.fail = fail
	d.mu.Unlock()
}

func startDestination(delay func(key string) time.Duration, called func(key string, at time.Time)) (*destination, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &destination{url: "http://" + ln.Addr().String() + "/hooks", n: map[string]int{}}
	d.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.n[key]++
		fail := d.fail != nil && d.fail(key) && d.n[key] <= 2
		d.mu.Unlock()
		called(key, at)
		time.Sleep(delay(key))
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

func (d *destination) calls(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[key]
}

func (d *destination) close() { _ = d.srv.Close() }
