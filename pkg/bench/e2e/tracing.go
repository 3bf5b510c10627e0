package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The tracing comparison (issue 35, -tracing): the same services run three
// times in one run, alternated -tracing-rounds times: tracing off (no
// OTEL_* set), on at 1 % (parentbased_traceidratio 0.01) and on at 100 %,
// exporting by OTLP/HTTP to a sink in this process that answers every
// export 200 (the services' cost is the spans and their export, not a
// backend's). Each run: a warm-up, the closed loop (ingest's 202s/s and
// the end-to-end events/s, and each service's CPU per event there: on a
// shared machine the rates follow the other jobs, while a saturated
// service's capacity is the CPU it gets over its CPU per event) and the
// open loop at -tracing-rate events/s (CPU per event of each service).
// Round r starts with setting r mod 3 (off first, then on 1 % first, then
// on 100 % first, ...), so no setting always runs first, right after the
// broker was idle. Ratios are against the off run of the same round.

// tracingSetting is one tracing configuration of the services.
type tracingSetting struct {
	name string
	env  []string
}

func tracingSettings(sink string) []tracingSetting {
	on := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
	return []tracingSetting{
		{"off", nil},
		{"on 1%", append(append([]string(nil), on...), "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.01")},
		{"on 100%", append(append([]string(nil), on...), "OTEL_TRACES_SAMPLER=parentbased_always_on")},
	}
}

// startSink serves OTLP/HTTP exports: every POST is read and answered 200
// with an empty ExportTraceServiceResponse. It returns its base URL and
// how many exports it took.
func startSink() (url string, exports func() int, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() int { return int(n.Load()) }, func() { _ = srv.Close() }, nil
}

func runTracing(ctx context.Context, cfg config, out io.Writer) (err error) {
	b, cleanup, err := openBench(cfg, out, []string{"ingest", "processor", "retrier"})
	if err != nil {
		return err
	}
	defer func() { err = cleanup(err) }()
	sink, exports, stopSink, err := startSink()
	if err != nil {
		return err
	}
	defer stopSink()

	fmt.Fprintf(out, "hookline tracing benchmark: the same pipeline with tracing off, on at 1%% and on at 100%% (OTLP/HTTP to a sink in this process),\n")
	fmt.Fprintf(out, "alternated %d round(s); per run: closed loop %d posters for %s, then open loop %.0f events/s for %s\n", cfg.TracingRounds, cfg.Conns, cfg.Closed, cfg.TracingRate, cfg.Open)
	fmt.Fprintf(out, "%d-byte signed Stripe events, %d partitions, broker %s, topic prefix %s\n\n", cfg.BodySize, cfg.Partitions, strings.Join(b.run.Kafka.Brokers, ","), b.names.Prefix)

	stopReader, err := b.readOutcomes(ctx)
	if err != nil {
		return err
	}
	defer stopReader()

	type result struct{ closed, open phaseReport }
	settings := tracingSettings(sink)
	got := make([][]result, cfg.TracingRounds)
	for round := range cfg.TracingRounds {
		got[round] = make([]result, len(settings))
		for j := range settings {
			i := (round + j) % len(settings)
			st := settings[i]
			b.extraEnv = st.env
			before := exports()
			if err := b.start(ctx); err != nil {
				return err
			}
			tag := fmt.Sprintf("r%d %s", round+1, st.name)
			fmt.Fprintf(out, "round %d, tracing %s ...\n", round+1, st.name)
			var r result
			if _, err = b.closedPhase(ctx, &phase{name: tag + " warm-up"}, max(1, cfg.Conns/8), cfg.Warmup); err == nil {
				if r.closed, err = b.closedPhase(ctx, &phase{name: tag + " closed"}, cfg.Conns, cfg.Closed); err == nil {
					r.open, err = b.openPhase(ctx, &phase{name: tag + " open"}, cfg.TracingRate, cfg.Open)
				}
			}
			var stopErr error
			for i := len(b.procs) - 1; i >= 0; i-- {
				stopErr = errors.Join(stopErr, b.procs[i].Stop(30*time.Second))
			}
			b.procs = nil
			if err = errors.Join(err, stopErr); err != nil {
				return err
			}
			got[round][i] = r
			fmt.Fprintf(out, "  exports received: %d\n", exports()-before)
		}
	}

	fmt.Fprintf(out, "\n%-6s %-8s %8s %8s %8s %8s | %-25s %-13s | CPU per event at %.0f/s (µs)\n", "round", "tracing", "ing 202/s", "e2e ev/s", "×off ing", "×off e2e",
		"closed CPU/event ing, proc", "×off capacity", cfg.TracingRate)
	for round, rs := range got {
		off := rs[0]
		for i, r := range rs {
			per := func(p phaseReport, name string) float64 {
				return float64(p.CPU[name].Microseconds()) / float64(max(p.Events, 1))
			}
			fmt.Fprintf(out, "%-6d %-8s %8.0f %8.0f %8.2f %8.2f | %12.0f %12.0f | %6.2f %6.2f | %.0f, %.0f, %.0f\n", round+1, settings[i].name,
				r.closed.PostRate, r.closed.E2ERate, r.closed.PostRate/off.closed.PostRate, r.closed.E2ERate/off.closed.E2ERate,
				per(r.closed, "ingest"), per(r.closed, "processor"),
				per(off.closed, "ingest")/per(r.closed, "ingest"), per(off.closed, "processor")/per(r.closed, "processor"),
				per(r.open, "ingest"), per(r.open, "processor"), per(r.open, "retrier"))
		}
	}
	if _, verr := b.track.verify(); verr != nil {
		return verr
	}
	return nil
}
