package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	benchreport "github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/topics"
)

// The cost by rate (issue 36, -cost): ingest, processor, retrier and `dlq
// serve` started once, then per round: a warm-up, the services idle for
// -cost-idle (each one's CPU as a share of a core), open loops at 10, 100
// and 1,000 events/s, the closed loop (saturated through ingest) and
// -cost-n events produced straight to the raw topic (the processor
// saturated alone, as bench-processor measures it), each service's CPU per
// event in each. The processor's target is against the last. The 10/s phase lasts -cost-slow (its CPU per event is
// mostly the idle cost: a service idle at 0.5 % of a core spends 500 µs a
// second, 50 µs an event at 10/s), the others -cost-d. CPU is read from
// /proc/<pid>/stat (loadtest.CPU, as bench-idle) from the first POST of a
// phase to its last outcome read.

// costRates are the open-loop rates of the cost comparison, events/s; the
// saturated phase follows them.
var costRates = []float64{10, 100, 1000}

// costServices are the services measured, by Proc.Name.
var costServices = []string{"ingest", "processor", "retrier", "dlq"}

// costTargetRatio is issue 36's bound on the processor's CPU per event at
// 1,000/s over its CPU per event saturated.
const costTargetRatio = 3.0

// costRound is one round's figures: the idle share of a core per service,
// and per phase (costRates, then saturated) the events and CPU per event.
type costRound struct {
	idle   map[string]float64 // % of a core
	phases []phaseReport
}

func runCost(ctx context.Context, cfg config, out io.Writer, rec *benchreport.Recorder) (err error) {
	b, cleanup, err := openBench(cfg, out, []string{"ingest", "processor", "retrier", "dlq"})
	if err != nil {
		return err
	}
	defer func() { err = cleanup(err) }()
	fmt.Fprintf(out, "hookline cost by rate: ingest, processor, retrier and dlq serve; %d round(s) of: idle %s, open loop at %v events/s (10/s for %s, the others %s), closed loop %d posters for %s (saturated)\n",
		cfg.CostRounds, cfg.CostIdle, costRates, cfg.CostSlow, cfg.CostD, cfg.Conns, cfg.Closed)
	fmt.Fprintf(out, "%d-byte signed Stripe events, %d partitions, broker %s, topic prefix %s\n\n", cfg.BodySize, cfg.Partitions, strings.Join(b.run.Kafka.Brokers, ","), b.names.Prefix)
	if err := b.start(ctx); err != nil {
		return err
	}
	defer func() {
		for _, p := range b.procs {
			p.Kill()
		}
	}()
	if err := b.startDLQ(ctx); err != nil {
		return err
	}
	stopReader, err := b.readOutcomes(ctx)
	if err != nil {
		return err
	}
	defer stopReader()

	rounds := make([]costRound, cfg.CostRounds)
	for i := range rounds {
		r := &rounds[i]
		tag := fmt.Sprintf("r%d", i+1)
		if _, err := b.closedPhase(ctx, &phase{name: tag + " warm-up"}, max(1, cfg.Conns/8), cfg.Warmup); err != nil {
			return err
		}
		fmt.Fprintf(out, "round %d (load average %v): idle %s ...\n", i+1, benchreport.LoadAverage(), cfg.CostIdle)
		if r.idle, err = b.idleShare(ctx, cfg.CostIdle); err != nil {
			return err
		}
		for _, rate := range costRates {
			d := cfg.CostD
			if rate < 100 {
				d = cfg.CostSlow
			}
			fmt.Fprintf(out, "round %d: open loop %.0f events/s for %s ...\n", i+1, rate, d)
			ph, err := b.openPhase(ctx, &phase{name: fmt.Sprintf("%s %.0f/s", tag, rate)}, rate, d)
			if err != nil {
				return err
			}
			r.phases = append(r.phases, ph)
		}
		fmt.Fprintf(out, "round %d: closed loop, %d posters for %s ...\n", i+1, cfg.Conns, cfg.Closed)
		ph, err := b.closedPhase(ctx, &phase{name: tag + " saturated"}, cfg.Conns, cfg.Closed)
		if err != nil {
			return err
		}
		r.phases = append(r.phases, ph)
		fmt.Fprintf(out, "round %d: processor alone, %d events produced to the raw topic at once ...\n", i+1, cfg.CostN)
		if ph, err = b.processorAlone(ctx, &phase{name: tag + " processor alone"}, cfg.CostN); err != nil {
			return err
		}
		r.phases = append(r.phases, ph)
	}
	if _, err := b.track.verify(); err != nil {
		return err
	}
	printCost(out, rounds, rec)
	var stopErr error
	for i := len(b.procs) - 1; i >= 0; i-- {
		stopErr = errors.Join(stopErr, b.procs[i].Stop(30*time.Second))
	}
	b.procs = nil
	return stopErr
}

// processorAlone produces n events of ingest's shape (headers.IngestRecord)
// straight to the raw topic, as fast as the client goes, and waits for
// their outcomes (measure): the processor saturated on its own, as
// bench-processor runs it, with no ingest beside it sharing the cores. CPU
// is counted from the first produce to the last outcome read.
func (b *bench) processorAlone(ctx context.Context, ph *phase, n int) (phaseReport, error) {
	var err error
	r, merr := b.measure(ctx, ph, func(func(context.Context, int) error) loadtest.Result {
		t0 := time.Now()
		evs := make([]*event, n)
		for i := range n {
			id := postID(ph, i)
			head := `{"id":"` + id + `","object":"event","type":"invoice.paid","pad":"`
			body := []byte(head + b.padding(b.cfg.BodySize-len(head)-2) + `"}`)
			key := "stripe:" + id
			evs[i] = b.track.posting(ph, key, t0)
			b.run.Client.Produce(ctx, headers.IngestRecord(b.names.Raw, key, "invoice.paid", body,
				headers.IngestMeta{Provider: "stripe", ReceivedAt: t0, RequestID: "bench-e2e", ContentType: "application/json"}), nil)
		}
		if err = b.run.Client.Flush(ctx); err != nil {
			return loadtest.Result{} // nothing accepted: measure's wait ends at once
		}
		for _, e := range evs {
			b.track.accept(e, t0)
		}
		return loadtest.Result{Elapsed: time.Since(t0)}
	})
	return r, errors.Join(err, merr)
}

// idleShare waits a few seconds for the last phase's commits to settle,
// then measures each service's CPU over d as a share of one core.
func (b *bench) idleShare(ctx context.Context, d time.Duration) (map[string]float64, error) {
	select {
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cpu0, t0 := b.cpu(), time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cpu1, el := b.cpu(), time.Since(t0)
	out := map[string]float64{}
	for k, v := range cpu1 {
		out[k] = 100 * (v - cpu0[k]).Seconds() / el.Seconds()
	}
	for _, p := range b.procs {
		if err := p.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// printCost prints each service's idle share and CPU per event at each
// rate, the median and range over the rounds, and records them.
func printCost(out io.Writer, rounds []costRound, rec *benchreport.Recorder) {
	labels := make([]string, 0, len(costRates)+1)
	for _, r := range costRates {
		labels = append(labels, fmt.Sprintf("%.0f/s", r))
	}
	labels = append(labels, "saturated", "processor alone")
	fmt.Fprintf(out, "\nCPU per event, µs, median (min-max) over %d round(s); idle: %% of a core; in brackets the idle cost's share of the CPU per event\n", len(rounds))
	fmt.Fprintf(out, "%-10s %-22s", "service", "idle %")
	for _, l := range labels {
		fmt.Fprintf(out, " %-30s", l)
	}
	fmt.Fprintln(out)
	perEvent := func(svc string, i int) []float64 { // phase i's CPU per event, µs, per round
		var v []float64
		for _, r := range rounds {
			ph := r.phases[i]
			v = append(v, float64(ph.CPU[svc].Microseconds())/float64(max(ph.Events, 1)))
		}
		return v
	}
	idleShare := func(svc string, i int) []float64 { // idle cost over phase i's CPU
		var v []float64
		for _, r := range rounds {
			ph := r.phases[i]
			if i >= len(costRates) || ph.CPU[svc] <= 0 {
				continue
			}
			idleUS := r.idle[svc] / 100 * 1e6 / costRates[i] // µs of idle cost per event at the rate
			v = append(v, idleUS/(float64(ph.CPU[svc].Microseconds())/float64(max(ph.Events, 1))))
		}
		return v
	}
	for _, svc := range costServices {
		var idle []float64
		for _, r := range rounds {
			idle = append(idle, r.idle[svc])
		}
		name := map[string]string{"dlq": "dlq serve"}[svc]
		if name == "" {
			name = svc
		}
		fmt.Fprintf(out, "%-10s %-22s", name, spreadText(idle, "%.3f"))
		rec.AddRuns("cost idle CPU "+name, "% of a core", idle)
		for i, l := range labels {
			pe := perEvent(svc, i)
			cell := spreadText(pe, "%.0f")
			if sh := idleShare(svc, i); len(sh) > 0 {
				_, m, _ := benchreport.Spread(sh)
				cell += fmt.Sprintf(" [%.0f%%]", 100*min(m, 1))
			}
			fmt.Fprintf(out, " %-30s", cell)
			rec.AddRuns("cost CPU per event "+name+" at "+l, "µs", pe)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%-10s %-22s", "records/txn", "(processor)")
	for i, l := range labels {
		var v []float64
		for _, r := range rounds {
			if ph := r.phases[i]; ph.Txns > 0 {
				v = append(v, ph.Records/ph.Txns)
			}
		}
		fmt.Fprintf(out, " %-30s", spreadText(v, "%.1f"))
		rec.AddRuns("cost records per processor transaction at "+l, "records", v)
	}
	fmt.Fprintln(out)
	var ratio []float64
	for _, r := range rounds {
		k, sat := r.phases[len(costRates)-1], r.phases[len(costRates)+1]
		at := float64(k.CPU["processor"].Microseconds()) / float64(max(k.Events, 1))
		s := float64(sat.CPU["processor"].Microseconds()) / float64(max(sat.Events, 1))
		ratio = append(ratio, at/s)
	}
	_, m, _ := benchreport.Spread(ratio)
	verdict := "met"
	if m > costTargetRatio {
		verdict = "NOT met"
	}
	fmt.Fprintf(out, "processor CPU per event at %.0f/s over the processor alone: %s (target ≤ %.0f×: %s)\n", costRates[len(costRates)-1], spreadText(ratio, "%.2f"), costTargetRatio, verdict)
	rec.AddRuns(fmt.Sprintf("cost processor CPU per event at %.0f/s over the processor alone", costRates[len(costRates)-1]), "ratio", ratio)
	fmt.Fprintf(out, "events/s, saturated (through ingest) and the processor alone, per round:")
	for _, r := range rounds {
		fmt.Fprintf(out, " %.0f and %.0f;", r.phases[len(costRates)].E2ERate, r.phases[len(costRates)+1].E2ERate)
	}
	fmt.Fprintln(out)
}

// spreadText is "median (min-max)" of xs in format f; one value alone.
func spreadText(xs []float64, f string) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, med, hi := benchreport.Spread(xs)
	if len(xs) == 1 {
		return fmt.Sprintf(f, med)
	}
	return fmt.Sprintf(f+" ("+f+"-"+f+")", med, lo, hi)
}

// openBench is a bench of its own run (services as loadtest.NewRun takes
// them), its destination answering 200 at once and its HTTP client:
// cleanup closes what it opened and returns the run's error.
func openBench(cfg config, out io.Writer, services []string) (b *bench, cleanup func(error) error, err error) {
	b = &bench{cfg: cfg, out: out, track: newTracker(), iso: cfg.isolation(), pad: strings.Repeat("x", cfg.BodySize), tiers: benchTiers,
		broker: loadtest.BrokerPID(cfg.BrokerPIDFile, "bench-e2e")}
	if b.run, err = loadtest.NewRun("bench-e2e", services); err != nil {
		return nil, nil, err
	}
	sched, err := retry.ParseSchedule(b.tiers)
	if err != nil {
		return nil, nil, b.run.Close(err)
	}
	b.names = topics.NewNames(b.run.Prefix("bench-e2e"), sched.Names())
	if b.dest, err = startDestination(b.iso.Delay, func(string, time.Time) {}); err != nil {
		return nil, nil, b.run.Close(err)
	}
	b.client = loadtest.PostClient(1024, 0)
	return b, func(err error) error {
		b.client.CloseIdleConnections()
		b.dest.close()
		return b.run.Close(err)
	}, nil
}

// readOutcomes starts reading the outcome topic into b.track; stop ends it.
func (b *bench) readOutcomes(ctx context.Context) (stop func(), err error) {
	return b.followOutcomes(ctx, b.track.read, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

// followOutcomes runs read over a client of the outcomes topic from its
// start (with opts) until stop.
func (b *bench) followOutcomes(ctx context.Context, read func(context.Context, *kgo.Client), opts ...kgo.Opt) (stop func(), err error) {
	reader, err := b.run.Kafka.NewClient(append([]kgo.Opt{kgo.ConsumeTopics(b.names.Outcomes),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Bounds how late the reader may see an outcome when the broker
		// does not answer its fetch at once; with data waiting it does.
		kgo.FetchMaxWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); read(rctx, reader) }()
	return func() { cancel(); <-done; reader.Close() }, nil
}

// startDLQ runs `dlq serve` beside the services b.start ran (its admin
// console on a free address, its trace index in the run's folder) and
// waits until it answers.
func (b *bench) startDLQ(ctx context.Context) error {
	addr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	env := []string{"HOOKLINE_TOPIC_PREFIX=" + b.names.Prefix, "HOOKLINE_LOG_LEVEL=warn", "HOOKLINE_RETRY_TIERS=" + b.tiers,
		"HOOKLINE_PROVIDERS=" + filepath.Join(b.run.Dir, "providers.yaml"), "BENCH_E2E_SECRET=" + secret,
		"HOOKLINE_ADMIN_ADDR=" + addr, "HOOKLINE_TRACE_DIR=" + filepath.Join(b.run.Dir, "trace")}
	p, err := loadtest.Start(b.run.Bins["dlq"], env, filepath.Join(b.run.Dir, "dlq.log"), "serve")
	if err != nil {
		return err
	}
	b.procs = append(b.procs, p)
	return p.WaitReady(ctx, "http://"+addr+"/ui/", 90*time.Second)
}
