package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/dlq/internal/admin"
	"github.com/hookline/hookline/dlq/internal/redrive"
	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
)

// serveTrace opens the trace index and starts what serve runs beside the
// API until ctx ends: the feeder of the index, the parked and raw backlog
// gauges, the follower of the processors' reports, breakers and held
// entities (snapshot gives a copy, for GET /status) and, when the providers file sets redrive on a provider,
// the re-driver, which needs them. closeIndex stops them all, waits for the
// feeder and the re-driver and closes the index.
func (a *app) serveTrace(ctx context.Context, log *slog.Logger, cfg config, reg prometheus.Registerer, interval time.Duration) (ix *trace.Index, closeIndex func(), snapshot func() control.Reports, err error) {
	policies := map[string]providers.Redrive{}
	if cfg.ProvidersFile != "" {
		preg, err := providers.LoadWithoutSecrets(cfg.ProvidersFile)
		if err != nil {
			return nil, nil, nil, usagef("HOOKLINE_PROVIDERS=%s: %v", cfg.ProvidersFile, err)
		}
		for _, n := range preg.Names() {
			if p, _ := preg.Get(n); p.Redrive != nil {
				policies[n] = *p.Redrive
			}
		}
	}
	ix, err = trace.Open(trace.Options{Dir: cfg.TraceDir, Names: a.names, Retention: cfg.Topics.DLQRetention, Logger: log})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("HOOKLINE_TRACE_DIR=%s: %w", cfg.TraceDir, err)
	}
	ctx, stop := context.WithCancel(ctx)
	var users sync.WaitGroup // what writes or scans the index in the background
	closeIndex = func() {
		stop()
		users.Wait()
		if err := ix.Close(); err != nil {
			log.Warn("trace index: close", "err", err)
		}
	}
	feeder := trace.NewFeeder(ix, a.newClient, kadm.NewClient(a.cl), log)
	users.Add(1)
	go func() {
		defer users.Done()
		keep(ctx, log, "trace index", controlRetry, func(ctx context.Context) error {
			start := time.Now()
			return feeder.Follow(ctx, func() { log.Info("trace index caught up", "took", time.Since(start).String()) })
		})
	}()
	pm := admin.NewParkedMetrics(reg)
	go pm.Refresh(ctx, interval, a.parkedReader().Heads, func(err error) { log.Warn("parked gauge", "err", err) })
	rm := admin.NewRawMetrics(reg)
	go rm.Refresh(ctx, interval, func(ctx context.Context) (map[string]time.Time, error) {
		b, _, err := status.RawBacklog(ctx, a.parkedReader(), time.Now())
		if err != nil || b.OldestAt == nil {
			return map[string]time.Time{a.names.Raw: {}}, err
		}
		return map[string]time.Time{a.names.Raw: *b.OldestAt}, nil
	}, func(err error) { log.Warn("raw backlog gauge", "err", err) })

	var mu sync.Mutex
	reports := control.NewReports()
	breakers := reports.Breakers
	locked := func(apply func()) {
		mu.Lock()
		defer mu.Unlock()
		apply()
	}
	go keep(ctx, log, "processor reports", controlRetry, func(ctx context.Context) error {
		return control.FollowAll(ctx, a.newClient, a.names.Control, control.Appliers{
			Breaker: func(b control.Breaker) { locked(func() { breakers.Apply(b) }) },
			Held:    func(h control.HeldReport) { locked(func() { reports.Held.Apply(h) }) },
		}, nil, func(err error) { log.Warn("processor report ignored", "err", err) })
	})
	snapshot = func() control.Reports {
		mu.Lock()
		defer mu.Unlock()
		return reports.Clone()
	}
	if len(policies) == 0 {
		return ix, closeIndex, snapshot, nil
	}
	rd := redrive.New(redrive.Config{
		Policies: policies, Index: ix, Store: a.store, Replayer: replay.New(a.cl), Names: a.names,
		BreakerClosed: func(provider, route string) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return breakers.ClosedRoute(provider, route, time.Now())
		},
		BeforeWrite: a.ensureStatusTopic,
		Registry:    reg,
		Logger:      log,
	})
	log.Info("auto-redrive on", "providers", len(policies), "every", rd.Interval().String())
	users.Add(1)
	go func() {
		defer users.Done()
		rd.Run(ctx)
	}()
	return ix, closeIndex, snapshot, nil
}
