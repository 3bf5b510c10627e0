// Command processor consumes webhooks.raw exactly once in effect (DESIGN
// §6): dedup against a Badger store rebuilt from the compacted changelog, the
// destination handler, and the routing of failures to retry tiers or the DLQ,
// committed in short Kafka transactions that never wait for a slow call
// (docs/processor.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
	"github.com/hookline/hookline/pkg/startup"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/consume"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/state"
)

func main() {
	providersFlag := flag.String("providers", "", "providers file (overrides HOOKLINE_PROVIDERS)")
	flag.Parse()
	lookup := envconf.Override(os.LookupEnv, "HOOKLINE_PROVIDERS", *providersFlag)
	// First, before anything is opened: Ensure may start the program again
	// in place with the slack. A wrong setting is run's to report.
	if cfg, err := loadConfig(lookup); err == nil {
		timerslack.Apply(os.Stderr, "processor", cfg.TimerSlack)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, lookup, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "processor:", err)
		os.Exit(1)
	}
}

// run processes until ctx is done. Shutdown order: proc.Run stops polling,
// lets calls in flight finish for HOOKLINE_SHUTDOWN_GRACE, commits what
// finished (what did not is read again by the next owner), leaves the group
// and closes its clients;
// then the deferred calls run, last deferred first: Badger closes (flushing
// its memtable), then the metrics server stops. The metrics server goes
// last so that /healthz, /readyz (draining) and /metrics answer until the
// process has let go of everything; nothing it serves reads Badger (the key
// gauge reads a counter kept in memory).
func run(ctx context.Context, lookupEnv func(string) (string, bool), logOut io.Writer) (err error) {
	cfg, err := loadConfig(lookupEnv)
	if err != nil {
		return err
	}
	svc := startup.New("processor", cfg.Common, logOut)
	log, names := svc.Log, svc.Names
	// The processor verifies no signature: it needs TTLs, routes and the
	// routes' signing secrets, not the providers' verification secrets.
	reg, policies, err := svc.LoadProviders(cfg.ProvidersFile, startup.SigningSecrets, lookupEnv)
	if err != nil {
		return err
	}
	if err := ownTopics(reg, names); err != nil {
		return err
	}
	if cfg.InstanceID == "" {
		if cfg.InstanceID, err = state.InstanceID(cfg.StateDir); err != nil {
			return fmt.Errorf("HOOKLINE_STATE_DIR=%s: %w (or set HOOKLINE_INSTANCE_ID)", cfg.StateDir, err)
		}
	}
	connOpts, err := svc.KafkaOpts("hookline-processor-" + cfg.InstanceID)
	if err != nil {
		return err
	}
	newClient := func(extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append(append([]kgo.Opt(nil), connOpts...), extra...)...)
	}

	// /readyz is served from the start: while Kafka cannot be reached or
	// refuses the processor, it says why.
	health := obs.NewHealth("kafka", "restore", "control")
	metricsAddr, stopMetrics, err := obs.ServeSide(cfg.MetricsAddr, health, svc.Metrics)
	if err != nil {
		return err
	}
	defer stopMetrics() // deferred first: runs last, after Badger is closed

	adminCl, err := newClient()
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	shape := svc.Shape(reg)
	// A lane per route with an HTTP destination; the routes' topic
	// destinations, created when missing, taken as they are otherwise.
	var lanes []string
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		for _, r := range p.Routes() {
			if r.Destination != nil && r.Destination.URL != "" {
				lanes = append(lanes, laneName(name, r.Name))
			}
		}
	}
	specs := append(names.Specs(shape), names.LaneSpecs(lanes, shape)...)
	specs = append(specs, topics.RouteTopicSpecs(reg.RouteTopics(), shape)...)
	err = svc.EnsureTopics(ctx, adminCl, specs, health, "trying again", nil)
	adminCl.Close()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}

	// The Go runtime honours GOMEMLIMIT by itself; the store's memory
	// (HOOKLINE_STATE_MEMORY) is most of the heap, so a limit close to it
	// makes the collector run without pause.
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 && lim < 2*cfg.StateMemory {
		log.Warn("GOMEMLIMIT is below twice HOOKLINE_STATE_MEMORY: the Go collector will run very often", "gomemlimit", lim, "state_memory", cfg.StateMemory)
	}
	store, reset, err := state.OpenOrReset(state.Options{Dir: cfg.StateDir, Logger: log, Memory: cfg.StateMemory})
	if err != nil {
		return fmt.Errorf("HOOKLINE_STATE_DIR=%s: %w", cfg.StateDir, err)
	}
	if reset {
		log.Warn("state dir was unreadable and has been reset; partitions are rebuilt from the changelog", "dir", cfg.StateDir)
	}
	defer func() { // deferred after stopMetrics: runs before it
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()

	router, err := buildRouter(reg, cfg)
	if err != nil {
		return err
	}
	health.Set("kafka", nil) // topics ensured above
	health.Set("restore", nil)

	tracer, err := tracing.Setup(ctx, "processor", cfg.Tracing)
	if err != nil {
		return err
	}
	defer tracer.Flush(log)
	proc, err := consume.New(consume.Config{
		Names:              names,
		Schedule:           cfg.Retry,
		RetryPolicies:      policies,
		Jitter:             cfg.Jitter,
		Providers:          reg,
		Router:             router,
		Store:              store,
		MaxInflight:        cfg.MaxInflight,
		MaxPending:         cfg.MaxPending,
		StandbyReplicas:    cfg.StandbyReplicas,
		EventTypeLabels:    cfg.EventTypeLabels,
		MaxPendingBytes:    cfg.MaxPendingBytes,
		MaxBatch:           cfg.MaxBatch,
		ShutdownGrace:      cfg.ShutdownGrace,
		TransactionTimeout: cfg.TransactionTimeout,
		MaxRecordBytes:     cfg.Topics.MaxRecordBytes(),
		SessionOpts: append(append([]kgo.Opt(nil), connOpts...), kgo.WithHooks(svc.KafkaMetrics),
			kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(cfg.SessionTimeout/10)),
		NewClient:       newClient,
		TransactionalID: cfg.Topics.Prefix + "hookline-processor-" + cfg.InstanceID,
		InstanceID:      cfg.InstanceID,
		Logger:          log,
		Registry:        svc.Metrics,
		Health:          health,
		Tracer:          tracer,
	})
	if err != nil {
		return err
	}
	log.Info("processor starting", "kafka", cfg.Kafka.String(), "topic", names.Raw, "instance", cfg.InstanceID,
		"state_dir", cfg.StateDir, "state_memory", state.Split(cfg.StateMemory).String(), "metrics", metricsAddr, "tiers", cfg.Retry.String(), "max_inflight", cfg.MaxInflight, "max_pending", cfg.MaxPending,
		"timer_slack", timerslack.Text())
	if err := proc.Run(ctx); err != nil {
		return err
	}
	health.Drain()
	log.Info("processor stopped cleanly")
	return nil
}

// ownTopics refuses a route's topic destination in hookline's own
// namespace (the prefixed "webhooks."): a route writing to webhooks.raw, a
// lane or the changelog would corrupt the pipeline, and the providers file
// cannot know HOOKLINE_TOPIC_PREFIX.
func ownTopics(reg *providers.Registry, names topics.Names) error {
	own := names.Prefix + "webhooks."
	var errs []error
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		for _, r := range p.Routes() {
			if d := r.Destination; d != nil && strings.HasPrefix(d.Topic, own) {
				errs = append(errs, fmt.Errorf("providers file: provider %q: route %q: destination.topic: %s is in hookline's own topics (%s...): name a topic of your consumers'", name, r.Name, d.Topic, own))
			}
		}
	}
	return errors.Join(errs...)
}

// laneName is what Names.LaneSpecs takes for a route's lane: the
// provider's name for its route default, "provider.route" for another
// (Names.RouteLane).
func laneName(provider, name string) string {
	if name == route.Default {
		return provider
	}
	return provider + "." + name
}

// buildRouter gives every route with an HTTP destination its handler, keyed
// route.Key, signing its calls when the route has signing secrets.
func buildRouter(reg *providers.Registry, cfg config) (*deliver.Router, error) {
	handlers := map[string]deliver.Handler{}
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		for _, r := range p.Routes() {
			d := r.Destination
			if d == nil || d.URL == "" {
				continue
			}
			o := deliver.HTTPOptions{
				URL:             d.URL,
				Timeout:         d.Timeout,
				BreakerFailures: cfg.BreakerFailures,
				BreakerCooldown: cfg.BreakerCooldown,
				MaxRetryAfter:   cfg.RetryAfterMax,
			}
			if rl := d.RateLimit; rl != nil {
				o.RatePerSecond, o.Burst = rl.PerSecond, rl.Burst
			}
			if r.Signing != nil {
				o.SigningSecrets = r.Signing.Secrets
			}
			h, err := deliver.NewHTTP(o)
			if err != nil {
				return nil, fmt.Errorf("provider %s route %s destination: %w", name, r.Name, err)
			}
			handlers[route.Key(name, r.Name)] = h
		}
	}
	return deliver.NewRouter(handlers), nil
}
