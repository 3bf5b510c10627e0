// Command bench-idle measures what each service costs while nothing
// happens: ingest, processor, retrier and `dlq serve` started against the
// broker with no traffic, then each one's CPU time (/proc/<pid>/stat) over
// -d, -rounds times, as a share of one core, how often its threads were
// switched in (context switches per second: its wake-ups), and its RSS at
// the end.
//
//	make bench-idle BENCH_FLAGS='-d 30s -rounds 3'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

func main() {
	dur := flag.Duration("d", 30*time.Second, "length of each measured round (1s..10m)")
	rounds := flag.Int("rounds", 3, "measured rounds, one after the other (1..20)")
	settle := flag.Duration("settle", 10*time.Second, "wait after every service is ready, before the first round (start-up fetches, GC)")
	flag.Parse()
	if *dur < time.Second || *dur > 10*time.Minute || *rounds < 1 || *rounds > 20 || *settle < 0 {
		fmt.Fprintln(os.Stderr, "bench-idle: -d 1s..10m, -rounds 1..20, -settle >= 0")
		os.Exit(2)
	}
	loadtest.Main("bench-idle", func(ctx context.Context) error { return run(ctx, *dur, *rounds, *settle) })
}

// service is one process to start: its binary, arguments, settings and the
// URL that answers 200 once it is ready.
type service struct {
	name, bin string
	args, env []string
	ready     string
}

// TargetPct is issue 36's bound on an idle service: half a percent of a core.
const TargetPct = 0.5

func run(ctx context.Context, dur time.Duration, rounds int, settle time.Duration) (err error) {
	r, err := loadtest.NewRun("bench-idle", []string{"ingest", "processor", "retrier", "dlq"})
	if err != nil {
		return err
	}
	defer func() { err = r.Close(err) }()
	prefix := r.Prefix("bench-idle")
	prov := filepath.Join(r.Dir, "providers.yaml")
	// A destination nobody calls: there is no traffic.
	if err := os.WriteFile(prov, []byte("providers:\n  stripe:\n    preset: stripe\n    secret_env: [BENCH_IDLE_SECRET]\n    destination: {url: \"http://127.0.0.1:9/hooks\", timeout: 5s}\n"), 0o600); err != nil {
		return err
	}
	common := []string{"HOOKLINE_TOPIC_PREFIX=" + prefix, "HOOKLINE_PROVIDERS=" + prov, "BENCH_IDLE_SECRET=bench-idle-secret", "HOOKLINE_LOG_LEVEL=warn"}
	var addrs [4]string
	for i := range addrs {
		if addrs[i], err = loadtest.FreeAddr(); err != nil {
			return err
		}
	}
	ing, proc, ret, dlq := addrs[0], addrs[1], addrs[2], addrs[3]
	svcs := []service{ // ingest first: it creates the topics the others need
		{name: "ingest", bin: r.Bins["ingest"], env: []string{"HOOKLINE_INGEST_ADDR=" + ing}, ready: "http://" + ing + "/readyz"},
		{name: "processor", bin: r.Bins["processor"], env: []string{"HOOKLINE_METRICS_ADDR=" + proc,
			"HOOKLINE_STATE_DIR=" + filepath.Join(r.Dir, "state"), "HOOKLINE_INSTANCE_ID=bench-idle"}, ready: "http://" + proc + "/readyz"},
		{name: "retrier", bin: r.Bins["retrier"], env: []string{"HOOKLINE_METRICS_ADDR=" + ret}, ready: "http://" + ret + "/readyz"},
		{name: "dlq serve", bin: r.Bins["dlq"], args: []string{"serve"}, env: []string{"HOOKLINE_ADMIN_ADDR=" + dlq,
			"HOOKLINE_TRACE_DIR=" + filepath.Join(r.Dir, "trace")}, ready: "http://" + dlq + "/ui/"},
	}
	procs := make([]*loadtest.Proc, len(svcs))
	for i, s := range svcs {
		log := filepath.Join(r.Dir, strings.ReplaceAll(s.name, " ", "-")+".log")
		p, err := loadtest.Start(s.bin, append(append([]string(nil), common...), s.env...), log, s.args...)
		if err != nil {
			return err
		}
		defer p.Kill()
		if err := p.WaitReady(ctx, s.ready, 2*time.Minute); err != nil {
			return err
		}
		procs[i] = p
	}
	fmt.Printf("hookline idle cost: ingest, processor, retrier and dlq serve, no traffic; %d rounds of %s after %s settling; broker %s\n",
		rounds, dur, settle, strings.Join(r.Kafka.Brokers, ","))
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	pct := make([][]float64, len(svcs))   // per service, per round
	wakes := make([][]float64, len(svcs)) // context switches per second
	for round := 1; round <= rounds; round++ {
		load := report.LoadAverage()
		cpu0, err := cpus(procs)
		if err != nil {
			return err
		}
		sw0 := switches(procs)
		t0 := time.Now()
		select {
		case <-time.After(dur):
		case <-ctx.Done():
			return ctx.Err()
		}
		el := time.Since(t0)
		cpu1, err := cpus(procs)
		if err != nil {
			return err
		}
		sw1 := switches(procs)
		fmt.Printf("round %d (load average %v):", round, load)
		for i, s := range svcs {
			pct[i] = append(pct[i], 100*(cpu1[i]-cpu0[i]).Seconds()/el.Seconds())
			wakes[i] = append(wakes[i], float64(sw1[i]-sw0[i])/el.Seconds())
			fmt.Printf("  %s %.3f%% (%.0f switches/s)", s.name, pct[i][round-1], wakes[i][round-1])
		}
		fmt.Println()
	}
	rec := report.NewRecorder("bench-idle")
	fmt.Printf("\n%-10s %28s %14s %9s %12s\n", "service", "CPU, % of a core (min-max)", "target", "RSS MiB", "switches/s")
	for i, s := range svcs {
		rss, _ := loadtest.RSS(procs[i].Pid())
		lo, med, hi := report.Spread(pct[i])
		verdict := "met"
		if med > TargetPct {
			verdict = "NOT met"
		}
		_, wmed, _ := report.Spread(wakes[i])
		fmt.Printf("%-10s %12.3f (%.3f-%.3f) %5.1f%% %-7s %9.1f %12.0f\n", s.name, med, lo, hi, TargetPct, verdict, float64(rss)/(1<<20), wmed)
		rec.AddRuns("idle CPU "+s.name, "% of a core", pct[i])
		rec.AddRuns("idle context switches "+s.name, "switches/s", wakes[i])
		rec.Add("idle RSS "+s.name, float64(rss)/(1<<20), "MiB")
	}
	for _, p := range procs {
		if err := p.Stop(30 * time.Second); err != nil {
			return err
		}
	}
	return rec.WriteEnv()
}

func cpus(procs []*loadtest.Proc) ([]time.Duration, error) {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		if err := p.Err(); err != nil {
			return nil, err
		}
		c, err := loadtest.CPU(p.Pid())
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// switches sums the voluntary and involuntary context switches of every
// thread of each process (/proc/<pid>/task/*/status): how often it woke.
// A process that cannot be read counts 0.
func switches(procs []*loadtest.Proc) []int64 {
	out := make([]int64, len(procs))
	for i, p := range procs {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.Pid()))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // the thread ended
			}
			for _, l := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					out[i] += n
				}
			}
		}
	}
	return out
}
