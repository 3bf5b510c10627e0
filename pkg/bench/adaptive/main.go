// Command adaptive is the benchmark of adaptive delivery (issue 34; make
// bench-adaptive, built as bin/bench-adaptive). In one run, against one
// broker and one processor, three routes one after the other each call
// their own hidden-capacity receiver (pkg/testkit/capacity: at most C
// calls at a time, 429 with Retry-After: 1 above it, latency rising to
// 1.5× its 50 ms base at C), each fed 1.25× what C allows, open loop:
//
//   - adaptive: max_inflight 64, adaptive (the default);
//   - fixed 64: max_inflight 64, adaptive: false (too high for C = 8 and 32);
//   - fixed 8: max_inflight 8, adaptive: false (too low for C = 32 and 64).
//
// Before them a fourth route, not measured, is fed for 15 s (warmup) so
// the first phase does not measure a cold broker and processor.
//
// C is 32, then 8, then 64, for -phase each. Per route and phase it prints
// the goodput (2xx a second) from 10 s after the change to the phase's end
// against what C allows (C / 75 ms; target >= 0.9 for adaptive), the
// seconds after the change until a second's goodput first reached 0.9× of
// it, and over the run the share of calls answered 429 (target <= 5 % for
// adaptive). Every ratio is taken in the same run on the same machine;
// -runs repeats the run and prints each one's, then the range.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/capacity"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/topics"
)

// capacities are C in each phase, in order.
var capacities = []int{32, 8, 64}

// settle is how long after a change of C the goodput is not counted.
const settle = 10 * time.Second

// route is one of the three compared.
type route struct {
	name        string
	maxInflight int
	adaptive    bool
}

var routes = []route{{"adaptive", 64, true}, {"fixed64", 64, false}, {"fixed8", 8, false}}

// warmup is the route fed before the three, not measured: the first
// seconds of a run (a broker whose JVM has not compiled its hot paths yet,
// the processor's first transactions) are not the limiter's doing, and a
// route of its own leaves the compared routes' limits where they start.
// Its receiver's capacity is the first phase's.
var warmup = route{"warmup", 64, false}

// warmFor is how long the warm-up route is fed.
const warmFor = 15 * time.Second

func main() {
	phase := flag.Duration("phase", 20*time.Second, "how long each capacity (32, 8, 64) holds; at least 15s")
	runs := flag.Int("runs", 1, "runs, one after the other (1 to 10)")
	flag.Parse()
	if *phase < 15*time.Second || *runs < 1 || *runs > 10 {
		fmt.Fprintf(os.Stderr, "bench: -phase=%s -runs=%d: want at least 15s and 1 to 10 runs\n", *phase, *runs)
		os.Exit(2)
	}
	loadtest.Main("bench", func(ctx context.Context) error {
		var all []map[string]outcome
		for i := range *runs {
			res, err := runOnce(ctx, *phase)
			if err != nil {
				return fmt.Errorf("run %d: %w", i+1, err)
			}
			fmt.Printf("\nrun %d of %d\n", i+1, *runs)
			printRun(res)
			all = append(all, res)
		}
		if *runs > 1 {
			printRanges(all)
		}
		rec := report.NewRecorder("bench-adaptive")
		record(rec, all)
		return rec.WriteEnv()
	})
}

// record puts each route's figures over the runs into rec: goodput against
// what C allows and the seconds to reach 0.9× of it by capacity (runs that
// never reached it left out), the 429 share and the calls.
func record(rec *report.Recorder, all []map[string]outcome) {
	for _, rt := range routes {
		for i, c := range capacities {
			var good, reached []float64
			for _, res := range all {
				good = append(good, res[rt.name].goodput[i])
				if r := res[rt.name].reached[i]; r >= 0 {
					reached = append(reached, r)
				}
			}
			rec.AddRuns(fmt.Sprintf("%s C=%d goodput/allowed", rt.name, c), "ratio", good)
			rec.AddRuns(fmt.Sprintf("%s C=%d reached 0.9x", rt.name, c), "s", reached)
		}
		var refused, calls []float64
		for _, res := range all {
			refused = append(refused, 100*res[rt.name].refused)
			calls = append(calls, float64(res[rt.name].calls))
		}
		rec.AddRuns(rt.name+" 429 share", "%", refused)
		rec.AddRuns(rt.name+" calls", "calls", calls)
		for _, cause := range cutCauses {
			var cuts []float64
			for _, res := range all {
				if v, ok := res[rt.name].cuts[cause]; ok {
					cuts = append(cuts, v)
				}
			}
			rec.AddRuns(rt.name+" limit cuts "+cause, "cuts", cuts)
		}
	}
}

// outcome is what one route got in a run.
type outcome struct {
	// goodput and reached by phase: the goodput after settle against what
	// C allows, and the seconds from the change until a second's goodput
	// reached 0.9× of it (-1: never).
	goodput []float64
	reached []float64
	// limit is the mean of the processor's concurrency limit of the route
	// by phase, sampled every second.
	limit []float64
	// refused is the share of calls answered 429 over the run.
	refused float64
	calls   int
	// cuts are the route's limit cuts over the run by cause
	// (hookline_processor_destination_limit_cuts_total; 0 for a fixed
	// route, which has no limit to cut).
	cuts map[string]float64
}

// cutCauses are the causes of hookline_processor_destination_limit_cuts_total.
var cutCauses = []string{"overload", "latency", "retry_after"}

func runOnce(ctx context.Context, phase time.Duration) (res map[string]outcome, err error) {
	r, err := loadtest.NewRun("bench-adaptive", []string{"processor"}, kgo.RecordPartitioner(topics.Partitioner()))
	if err != nil {
		return nil, err
	}
	defer func() { err = r.Close(err) }()

	recv := map[string]*capacity.Receiver{}
	yml := "providers:\n"
	for _, rt := range append([]route{warmup}, routes...) {
		rc := capacity.New(capacity.Options{Capacity: capacities[0]})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: rc}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		recv[rt.name] = rc
		yml += fmt.Sprintf(`  %s:
    preset: generic
    secret_env: [BENCH_SECRET]
    signature: {header: X-Sig}
    destination: {url: "http://%s/hook", timeout: 5s, max_inflight: %d, adaptive: %v}
`, rt.name, ln.Addr(), rt.maxInflight, rt.adaptive)
	}
	prov := filepath.Join(r.Dir, "providers.yaml")
	if err := os.WriteFile(prov, []byte(yml), 0o600); err != nil {
		return nil, err
	}
	prefix := r.Prefix("bench-adaptive")
	tiers := []string{"10s", "1m", "5m", "15m", "1h"}
	names := topics.NewNames(prefix, tiers)
	if err := topics.Ensure(ctx, r.Client, names.Specs(topics.Shape{Partitions: 12, MaxMessageBytes: 1 << 20}), -1); err != nil {
		return nil, r.Kafka.Explain(err)
	}

	metricsAddr, err := loadtest.FreeAddr()
	if err != nil {
		return nil, err
	}
	env := []string{"HOOKLINE_PROVIDERS=" + prov, "HOOKLINE_TOPIC_PREFIX=" + prefix, "HOOKLINE_PARTITIONS=12",
		"HOOKLINE_METRICS_ADDR=" + metricsAddr, "HOOKLINE_STATE_DIR=" + filepath.Join(r.Dir, "state"),
		"HOOKLINE_INSTANCE_ID=bench", "HOOKLINE_LOG_LEVEL=warn", "HOOKLINE_RETRY_TIERS=" + strings.Join(tiers, ","),
		"BENCH_SECRET=x"}
	proc, err := loadtest.Start(r.Bins["processor"], env, filepath.Join(r.Dir, "processor.log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := proc.Stop(30 * time.Second); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := proc.WaitReady(ctx, "http://"+metricsAddr+"/readyz", 2*time.Minute); err != nil {
		return nil, err
	}

	// The warm-up, at half what its receiver allows: no 429, so no retry of
	// it comes back during the measured phases.
	if err := feed(ctx, r.Client, names.Raw, warmup.name, 0, recv[warmup.name].Allows(capacities[0])/2, warmFor, func() {}); err != nil {
		return nil, err
	}

	// One route after the other on the same processor and broker: C
	// changes every phase, and the route is fed loadOver times what C
	// allows, open loop.
	res = map[string]outcome{}
	for _, rt := range routes {
		rc := recv[rt.name]
		changes := make([]time.Duration, len(capacities)+1)
		before := rc.Stats()
		var limits []float64
		cutsOf := func() map[string]float64 {
			m := map[string]float64{}
			for _, cause := range cutCauses {
				v, err := loadtest.CounterSum(ctx, "http://"+metricsAddr+"/metrics", "hookline_processor_destination_limit_cuts_total", `provider="`+rt.name+`"`, `cause="`+cause+`"`)
				if err == nil {
					m[cause] = v
				}
			}
			return m
		}
		cutsBefore := cutsOf()
		for i, c := range capacities {
			rc.SetCapacity(c)
			changes[i] = rc.Since()
			var sampled []float64
			sample := func() {
				if v, err := loadtest.CounterSum(ctx, "http://"+metricsAddr+"/metrics", "hookline_processor_destination_concurrency_limit", `provider="`+rt.name+`"`); err == nil {
					sampled = append(sampled, v)
				}
			}
			if err := feed(ctx, r.Client, names.Raw, rt.name, i, loadOver*rc.Allows(c), phase, sample); err != nil {
				return nil, err
			}
			var m float64
			for _, v := range sampled {
				m += v / float64(len(sampled))
			}
			limits = append(limits, m)
			if err := proc.Err(); err != nil {
				return nil, err
			}
		}
		changes[len(capacities)] = rc.Since()
		ok, _ := rc.Series()
		o := outcome{limit: limits, cuts: cutsOf()}
		for cause, v := range cutsBefore {
			o.cuts[cause] -= v
		}
		for i, c := range capacities {
			allows := rc.Allows(c)
			from, to := ceilSec(changes[i]+settle), int(changes[i+1]/time.Second)
			o.goodput = append(o.goodput, mean(ok, from, to)/allows)
			o.reached = append(o.reached, -1)
			for s := ceilSec(changes[i]); s < to; s++ {
				if s < len(ok) && float64(ok[s]) >= 0.9*allows {
					o.reached[i] = float64(s) - changes[i].Seconds()
					break
				}
			}
		}
		st := rc.Stats()
		o.calls = st.Calls - before.Calls
		if o.calls > 0 {
			o.refused = float64(st.Refused-before.Refused) / float64(o.calls)
		}
		res[rt.name] = o
		// The route's backlog is left behind: C drops to 0 so it is not
		// called beside the next route (it parks in its lane).
		rc.SetCapacity(0)
	}
	return res, nil
}

// loadOver is the load on a route as a multiple of what C allows.
const loadOver = 1.25

// feed produces rate records a second for provider to raw for d, in
// ticks of 100 ms, calling sample every second.
func feed(ctx context.Context, cl *kgo.Client, raw, provider string, phase int, rate float64, d time.Duration, sample func()) error {
	body := []byte(`{"type":"bench"}`)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	sent, ticks := 0, 0
	for time.Since(start) < d {
		if ticks++; ticks%10 == 0 {
			sample()
		}
		due := int(rate * time.Since(start).Seconds())
		for ; sent < due; sent++ {
			key := fmt.Sprintf("%s:p%d-%d", provider, phase, sent)
			cl.Produce(ctx, headers.IngestRecord(raw, key, "bench", body, headers.IngestMeta{Provider: provider, ReceivedAt: time.Now(), RequestID: "bench", ContentType: "application/json"}), func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench: produce: %v\n", err)
				}
			})
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func ceilSec(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// mean is the mean of s[from:to] (seconds past its end count as 0).
func mean(s []int, from, to int) float64 {
	if to <= from {
		return 0
	}
	var n int
	for i := from; i < to && i < len(s); i++ {
		n += s[i]
	}
	return float64(n) / float64(to-from)
}

// fmtLimits rounds the mean limits for printing.
func fmtLimits(ls []float64) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = int(l + 0.5)
	}
	return out
}

func printRun(res map[string]outcome) {
	fmt.Printf("%-9s", "route")
	for _, c := range capacities {
		fmt.Printf("  C=%-2d goodput/allowed  reached 0.9x", c)
	}
	fmt.Printf("  %8s  %9s  %-22s  %s\n", "calls", "429 share", "mean limit by phase", "limit cuts by cause")
	for _, rt := range routes {
		o := res[rt.name]
		fmt.Printf("%-9s", rt.name)
		for i := range capacities {
			reached := "never"
			if o.reached[i] >= 0 {
				reached = fmt.Sprintf("%.0f s", o.reached[i])
			}
			fmt.Printf("  %20.2f  %12s", o.goodput[i], reached)
		}
		var cuts []string
		for _, cause := range cutCauses {
			if v, ok := o.cuts[cause]; ok {
				cuts = append(cuts, fmt.Sprintf("%s %.0f", cause, v))
			}
		}
		fmt.Printf("  %8d  %7.1f %%  %-22s  %s\n", o.calls, 100*o.refused, fmt.Sprint(fmtLimits(o.limit)), strings.Join(cuts, ", "))
	}
	a := res["adaptive"]
	fmt.Printf("adaptive: goodput >= 0.9x of what C allows from 10 s after each change: %v; 429 share %.1f %% (target <= 5 %%)\n",
		slices.IndexFunc(a.goodput, func(g float64) bool { return g < 0.9 }) < 0, 100*a.refused)
	fmt.Printf("fixed 64 (too high): 429 share %.1f %%; fixed 8 (too low): goodput at C=32 %.2f, at C=64 %.2f of what C allows\n",
		100*res["fixed64"].refused, res["fixed8"].goodput[0], res["fixed8"].goodput[2])
}

func printRanges(all []map[string]outcome) {
	fmt.Printf("\nranges over %d runs (min-max)\n", len(all))
	for _, rt := range routes {
		fmt.Printf("%-9s", rt.name)
		for i, c := range capacities {
			lo, hi := 1e9, -1e9
			for _, res := range all {
				g := res[rt.name].goodput[i]
				lo, hi = min(lo, g), max(hi, g)
			}
			fmt.Printf("  C=%d goodput %.2f-%.2f", c, lo, hi)
		}
		lo, hi := 1e9, -1e9
		for _, res := range all {
			s := 100 * res[rt.name].refused
			lo, hi = min(lo, s), max(hi, s)
		}
		fmt.Printf("  429 share %.1f-%.1f %%\n", lo, hi)
	}
}
