// Command e2e is hookline's end-to-end benchmark (make bench-e2e, built as
// bin/bench-e2e). It runs the real bin/ingest, bin/processor and
// bin/retrier against the local broker, with a stripe provider whose destination is an HTTP server in this
// process answering 200, and measures from the POST to the `done` outcome
// becoming visible to a read_committed consumer of webhooks.outcomes:
//
//  1. closed loop: C posters (default 64) send signed 1 KiB Stripe events
//     for D seconds as fast as ingest answers; end-to-end events/s = done
//     outcomes / (last outcome visible - first POST);
//  2. open loop: events at a fixed rate (default half of phase 1's
//     end-to-end rate) for D seconds, where the latency is that of the
//     pipeline, not of a queue; after -half-warm (default 5s) at that
//     rate, not measured, -half-rounds rounds (default 3), each
//     with phase 5 (ordering.go), the ordered provider interleaved with
//     its twin without ordering (the same provider definition and bodies),
//     each at half the rate, so ordered and unordered are compared on the
//     same moments of the machine and differ in ordering only (halfload.go);
//  3. isolation, alone: a second pair of providers on the same processor
//     (pkg/testkit/e2e/isolation): fastpay, answered at once, at 50 events/s for
//     15 s, measuring per key ingest's 202 -> its destination call;
//  4. isolation, together: fastpay at 50/s and slowcrm, whose destination
//     takes 3 s per call (timeout 10s, max_inflight 200), at 40/s for 20 s;
//     fastpay's p99 here against its p99 in phase 3 is the isolation ratio
//     (its baseline is phase 3, in the same run);
//
// and per key, the latency from ingest's 202 to the outcome read (p50, p99,
// max), split at the outcome's own `time` field (when the processor took the
// record up). The baseline, in the same run on the same broker, is the
// broker's own ProducerPerformance: 1 KiB records, acks=all, a topic of the
// same partition count, run before the services start and again after the
// phases (the ratio is taken against their mean, and each is printed).
// Every posted key must end with exactly one `done` outcome, or the run
// fails.
//
// With -tracing it runs only the tracing comparison (tracing.go), with
// -cost only the cost by rate (cost.go, make bench-cost): each service's
// CPU idle and per event at 10, 100 and 1,000 events/s and saturated.
//
// Loopback only (it refuses a KAFKA_BROKERS elsewhere), bounded in time;
// its processes, topics and groups are removed at the end. It reaches the
// broker as the services do (KAFKA_TLS*, KAFKA_SASL_*: pkg/kafkaconf), and
// the services it starts inherit those settings.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	benchreport "github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

func main() {
	// The tracker keeps every key of the run (about 400,000 by its end,
	// each a timeline with pointers), and the benchmark shares the two
	// cores with what it measures: with the default GOGC its collector
	// marked that growing heap every few seconds. Marking a fifth as
	// often: the benchmark's own CPU per event at 3,218 events/s 122-131
	// -> 116-122 us (docs/performance.md, "The benchmark's own collector").
	debug.SetGCPercent(400)
	c := defaultConfig()
	flag.IntVar(&c.Conns, "c", c.Conns, "posters of the closed-loop phase (1..1024)")
	flag.DurationVar(&c.Closed, "d", c.Closed, "posting time of the closed-loop phase (up to 60s)")
	flag.DurationVar(&c.Open, "open-d", c.Open, "length of the open-loop phase (up to 60s)")
	flag.Float64Var(&c.OpenFraction, "open-fraction", c.OpenFraction, "open-loop rate as a fraction of the closed loop's end-to-end rate (0..1]")
	flag.Float64Var(&c.OpenRate, "open-rate", c.OpenRate, "open-loop rate in events/s, instead of -open-fraction (for comparing two builds at one rate; 0: use the fraction)")
	flag.StringVar(&c.BrokerPIDFile, "broker-pid-file", "", "the local broker's pid file: its CPU per event is measured too (the broker shares the cores; make bench-e2e names it when it started the broker)")
	flag.IntVar(&c.PerfRecords, "perf-n", c.PerfRecords, "ProducerPerformance records (1,000..1,000,000)")
	flag.IntVar(&c.BodySize, "body", c.BodySize, "request body size in bytes (128..65536)")
	flag.DurationVar(&c.IsoAlone, "iso-alone", c.IsoAlone, "length of isolation phase 3, fastpay alone (up to 60s)")
	flag.DurationVar(&c.IsoTogether, "iso-together", c.IsoTogether, "length of isolation phase 4, fastpay with slowcrm (up to 60s)")
	flag.IntVar(&c.HalfRounds, "half-rounds", c.HalfRounds, "rounds of phases 2 and 5 alternated (stripe's open loop; the ordered provider and its twin without ordering, interleaved at the same rate in all) (1..10)")
	flag.DurationVar(&c.HalfWarm, "half-warm", c.HalfWarm, "open loop at the half-load rate before the first round, not measured (0 to 60s)")
	flag.IntVar(&c.OrdEntities, "ord-entities", c.OrdEntities, "entities of ordering phase 5, at phase 2's rate for -open-d (1..1,000,000)")
	flag.IntVar(&c.OrdFailEntities, "ord-fail-entities", c.OrdFailEntities, "entities of ordering phases 6 and 7, without and with one failing (8..100,000)")
	flag.Float64Var(&c.OrdRate, "ord-rate", c.OrdRate, "events/s of ordering phases 6 and 7 (1..10,000)")
	flag.DurationVar(&c.OrdDur, "ord-d", c.OrdDur, "length of ordering phases 6 and 7 each (up to 5m; the failing entity needs 4 events: -ord-rate × -ord-d ≥ 4 × -ord-fail-entities)")
	flag.BoolVar(&c.Tracing, "tracing", false, "run only the tracing comparison (tracing.go): off, on at 1%, on at 100%, alternated")
	flag.IntVar(&c.TracingRounds, "tracing-rounds", c.TracingRounds, "rounds of the tracing comparison (1..10)")
	flag.Float64Var(&c.TracingRate, "tracing-rate", c.TracingRate, "open-loop rate of the tracing comparison, events/s (1..100,000)")
	flag.BoolVar(&c.Cost, "cost", false, "run only the cost by rate (cost.go): ingest, processor, retrier and dlq serve idle, at 10, 100 and 1,000 events/s and saturated")
	flag.IntVar(&c.CostRounds, "cost-rounds", c.CostRounds, "rounds of the cost by rate (1..10)")
	flag.DurationVar(&c.CostIdle, "cost-idle", c.CostIdle, "idle phase of the cost by rate (5s..5m)")
	flag.DurationVar(&c.CostSlow, "cost-slow", c.CostSlow, "10 events/s phase of the cost by rate (5s..5m)")
	flag.IntVar(&c.CostN, "cost-n", c.CostN, "events produced straight to the raw topic in the cost by rate's processor-alone phase (1,000..1,000,000)")
	flag.DurationVar(&c.CostD, "cost-d", c.CostD, "100 and 1,000 events/s phases of the cost by rate (5s..5m)")
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(2)
	}
	loadtest.Main("bench-e2e", func(ctx context.Context) error {
		if c.Tracing { // its own comparison, in the terminal only
			return runTracing(ctx, c, os.Stdout)
		}
		if c.Cost {
			rec := benchreport.NewRecorder("bench-e2e")
			if err := runCost(ctx, c, os.Stdout, rec); err != nil {
				return err
			}
			return rec.WriteEnv()
		}
		rep, err := run(ctx, c, os.Stdout)
		if err != nil {
			return err
		}
		rec := benchreport.NewRecorder("bench-e2e")
		rep.record(rec)
		return rec.WriteEnv()
	})
}

// config shapes one run.
type config struct {
	Conns        int
	Closed       time.Duration
	Open         time.Duration
	OpenFraction float64
	OpenRate     float64 // events/s; 0: OpenFraction of the closed loop's
	PerfRecords  int
	BodySize     int
	// BrokerPIDFile names the local broker's pid file (loadtest.BrokerPID):
	// its CPU is counted with the services'.
	BrokerPIDFile string
	Partitions    int
	// Warmup is the closed-loop posting time, with Conns/8 posters, before
	// phase 1: it joins the processor's group and opens every connection.
	Warmup time.Duration
	// Drain bounds the wait for the outcomes after a phase's last POST.
	Drain time.Duration
	// HalfRounds are the rounds of phases 2 and 5, alternated.
	HalfRounds int
	// HalfWarm is the open loop at the half-load rate, not measured,
	// before the first round: the broker and the processor warmed at the
	// transaction size the rounds run at (the closed loop's are several
	// times larger).
	HalfWarm time.Duration
	// IsoAlone and IsoTogether are the lengths of the isolation phases.
	IsoAlone, IsoTogether time.Duration
	// OrdEntities are phase 5's entities; OrdFailEntities, OrdRate and
	// OrdDur phases 6 and 7's entities, rate and length (ordering.go).
	OrdEntities, OrdFailEntities int
	OrdRate                      float64
	OrdDur                       time.Duration
	// Tracing runs only the tracing comparison (tracing.go), TracingRounds
	// times, its open loop at TracingRate.
	Tracing       bool
	TracingRounds int
	TracingRate   float64
	// Cost runs only the cost by rate (cost.go), CostRounds times: idle
	// for CostIdle, 10 events/s for CostSlow, 100 and 1,000 for CostD,
	// then the closed loop for Closed.
	Cost                      bool
	CostRounds, CostN         int
	CostIdle, CostSlow, CostD time.Duration
}

// isolation is the isolation scenario with this run's phase lengths.
func (c config) isolation() isolation.Scenario {
	s := isolation.Default()
	s.Alone, s.Together = c.IsoAlone, c.IsoTogether
	return s
}

func defaultConfig() config {
	return config{Conns: 64, Closed: 10 * time.Second, Open: 10 * time.Second, OpenFraction: 0.5,
		PerfRecords: 100000, BodySize: 1024, Partitions: 12, Warmup: 2 * time.Second, Drain: 90 * time.Second,
		IsoAlone: isolation.Default().Alone, IsoTogether: isolation.Default().Together,
		HalfRounds: 3, HalfWarm: 5 * time.Second, OrdEntities: 10000, OrdFailEntities: 1000, OrdRate: 200, OrdDur: 25 * time.Second,
		TracingRounds: 1, TracingRate: 1000,
		CostRounds: 3, CostN: 20000, CostIdle: 30 * time.Second, CostSlow: time.Minute, CostD: 20 * time.Second}
}

func (c config) validate() error {
	switch {
	case c.Conns < 1 || c.Conns > 1024:
		return fmt.Errorf("-c %d: want 1..1024", c.Conns)
	case c.Closed <= 0 || c.Closed > time.Minute:
		return fmt.Errorf("-d %s: want up to 60s", c.Closed)
	case c.Open <= 0 || c.Open > time.Minute:
		return fmt.Errorf("-open-d %s: want up to 60s", c.Open)
	case c.OpenFraction <= 0 || c.OpenFraction > 1:
		return fmt.Errorf("-open-fraction %g: want more than 0, at most 1", c.OpenFraction)
	case c.OpenRate < 0 || c.OpenRate > 100000:
		return fmt.Errorf("-open-rate %g: want 0 (the fraction) up to 100,000 events/s", c.OpenRate)
	case c.PerfRecords < 1000 || c.PerfRecords > 1000000:
		return fmt.Errorf("-perf-n %d: want 1,000..1,000,000", c.PerfRecords)
	case c.BodySize < 128 || c.BodySize > 65536:
		return fmt.Errorf("-body %d: want 128..65536", c.BodySize)
	case c.IsoAlone <= 0 || c.IsoAlone > time.Minute:
		return fmt.Errorf("-iso-alone %s: want up to 60s", c.IsoAlone)
	case c.IsoTogether <= 0 || c.IsoTogether > time.Minute:
		return fmt.Errorf("-iso-together %s: want up to 60s", c.IsoTogether)
	case c.HalfRounds < 1 || c.HalfRounds > 10:
		return fmt.Errorf("-half-rounds %d: want 1..10", c.HalfRounds)
	case c.HalfWarm < 0 || c.HalfWarm > time.Minute:
		return fmt.Errorf("-half-warm %s: want 0 to 60s", c.HalfWarm)
	case c.OrdEntities < 1 || c.OrdEntities > 1000000:
		return fmt.Errorf("-ord-entities %d: want 1..1,000,000", c.OrdEntities)
	case c.OrdFailEntities < 8 || c.OrdFailEntities > 100000:
		return fmt.Errorf("-ord-fail-entities %d: want 8..100,000 (entity 7 fails)", c.OrdFailEntities)
	case c.OrdRate < 1 || c.OrdRate > 10000:
		return fmt.Errorf("-ord-rate %g: want 1..10,000 events/s", c.OrdRate)
	case c.TracingRounds < 1 || c.TracingRounds > 10:
		return fmt.Errorf("-tracing-rounds %d: want 1..10", c.TracingRounds)
	case c.TracingRate < 1 || c.TracingRate > 100000:
		return fmt.Errorf("-tracing-rate %g: want 1..100,000 events/s", c.TracingRate)
	case c.CostRounds < 1 || c.CostRounds > 10:
		return fmt.Errorf("-cost-rounds %d: want 1..10", c.CostRounds)
	case c.CostN < 1000 || c.CostN > 1000000:
		return fmt.Errorf("-cost-n %d: want 1,000..1,000,000", c.CostN)
	case !between(c.CostIdle, 5*time.Second, 5*time.Minute) || !between(c.CostSlow, 5*time.Second, 5*time.Minute) || !between(c.CostD, 5*time.Second, 5*time.Minute):
		return fmt.Errorf("-cost-idle %s, -cost-slow %s, -cost-d %s: want each 5s..5m", c.CostIdle, c.CostSlow, c.CostD)
	case c.OrdDur <= 0 || c.OrdDur > 5*time.Minute:
		return fmt.Errorf("-ord-d %s: want up to 5m", c.OrdDur)
	case c.OrdRate*c.OrdDur.Seconds() < 4*float64(c.OrdFailEntities):
		return fmt.Errorf("-ord-rate %g × -ord-d %s gives fewer than 4 events per entity of -ord-fail-entities %d: entity 7's 3rd event fails, its 4th waits behind it",
			c.OrdRate, c.OrdDur, c.OrdFailEntities)
	}
	return nil
}

// between reports lo <= d <= hi.
func between(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }
