// Command retrier is hookline's delay line (DESIGN §7): it holds the records
// of every webhooks.retry.<tier> topic until their hookline.due-at and then
// re-produces them to webhooks.raw with hookline.origin=retry, never early,
// committing only what it moved. Metrics, /healthz and /readyz are served on
// HOOKLINE_METRICS_ADDR (default :9102). SIGTERM or SIGINT finishes the move
// in progress, commits it, leaves the group and exits 0.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/startup"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/retrier/internal/tier"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.LookupEnv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "retrier:", err)
		os.Exit(1)
	}
}

// run moves records until ctx is done. Shutdown order: finish and commit the
// move in progress, stop the timers, leave the group and close the client,
// then stop the metrics server.
func run(ctx context.Context, lookupEnv func(string) (string, bool), logOut io.Writer) error {
	cfg, err := loadConfig(lookupEnv)
	if err != nil {
		return err
	}
	svc := startup.New("retrier", cfg.Common, logOut)
	log, names := svc.Log, svc.Names
	connOpts, err := svc.KafkaOpts("hookline-retrier")
	if err != nil {
		return err
	}

	// /readyz is served from the start: while Kafka cannot be reached or
	// refuses the retrier, it says why.
	health := obs.NewHealth("kafka")
	metricsAddr, stopMetrics, err := obs.ServeSide(cfg.MetricsAddr, health, svc.Metrics)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := ensureTopics(ctx, svc, connOpts, health); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	health.Set("kafka", nil) // topics ensured

	tracer, err := tracing.Setup(ctx, "retrier", cfg.Tracing)
	if err != nil {
		return err
	}
	defer tracer.Flush(log)
	mover, err := tier.New(tier.Config{
		Names:      names,
		Schedule:   cfg.Retry,
		ClientOpts: append(slices.Clone(connOpts), kgo.WithHooks(svc.KafkaMetrics)),
		Logger:     log,
		Registry:   svc.Metrics,
		Health:     health,
		Tracer:     tracer,
		// A copy for raw fits raw's max.message.bytes.
		MaxRecordBytes: cfg.Topics.MaxRecordBytes(),
	})
	if err != nil {
		return err
	}
	log.Info("retrier starting", "kafka", cfg.Kafka.String(), "tiers", cfg.Retry.String(), "topics", names.Retry,
		"group", names.Group(topics.GroupRetrier), "metrics", metricsAddr)
	if err := mover.Run(ctx); err != nil {
		return err
	}
	health.Drain()
	log.Info("retrier stopped cleanly")
	return nil
}

// ensureTopics creates the topics the retrier reads and writes (the tier
// topics and webhooks.raw) when they are missing, and refuses to start when
// one has the wrong partition count or cleanup policy. While Kafka cannot be
// reached or refuses the retrier it tries again, saying why in the log and
// on /readyz. It leaves the others
// to the services that own them: in particular the dedup changelog, whose
// retention follows the providers' dedup TTLs, which only the processor and
// ingest read; Ensure does not check retention on an existing topic, so a
// retrier creating it with a default would go unnoticed.
func ensureTopics(ctx context.Context, svc *startup.Service, connOpts []kgo.Opt, health *obs.Health) error {
	cl, err := kgo.NewClient(connOpts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	mine := append([]string{svc.Names.Raw}, svc.Names.Retry...)
	var specs []topics.Spec
	for _, s := range svc.Names.Specs(svc.Shape(nil)) {
		if slices.Contains(mine, s.Name) {
			specs = append(specs, s)
		}
	}
	return svc.EnsureTopics(ctx, cl, specs, health, "trying again", nil)
}
