// Command ingest receives signed webhooks over HTTP and answers 202 only once
// each delivery is durably in Kafka's webhooks.raw topic (DESIGN §4).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/ingest/internal/api"
	"github.com/hookline/hookline/ingest/internal/placement"
	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/ingest/internal/selftest"
	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/gcpace"
	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/startup"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/pkg/tracing"
)

func main() {
	providersFlag := flag.String("providers", "", "providers file (overrides HOOKLINE_PROVIDERS)")
	ensureOnly := flag.Bool("ensure-topics", false, "create missing topics, check existing ones, and exit")
	flag.Parse()
	lookup := envconf.Override(os.LookupEnv, "HOOKLINE_PROVIDERS", *providersFlag)
	// First, before anything is opened or started: Apply may start the
	// program again in place with the slack. A wrong setting is run's to
	// report. -ensure-topics runs and ends, as dlq's commands but serve do:
	// no second start for it.
	if cfg, err := loadConfig(lookup); err == nil && !*ensureOnly {
		timerslack.Apply(os.Stderr, "ingest", cfg.TimerSlack)
	}
	gin.SetMode(gin.ReleaseMode)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, lookup, os.Stderr, nil, *ensureOnly); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then drains: /readyz turns false, the
// listener stops, in-flight requests finish, the producer flushes. ready, when
// not nil, receives the listening address once the topics are in place and
// webhooks are accepted (before, they are answered 503 kafka_unavailable).
// With ensureOnly (--ensure-topics) it creates the missing topics, checks the
// others and returns, serving nothing.
func run(ctx context.Context, lookupEnv func(string) (string, bool), logOut io.Writer, ready chan<- string, ensureOnly bool) error {
	cfg, err := loadConfig(lookupEnv)
	if err != nil {
		return err
	}
	svc := startup.New("ingest", cfg.Common, logOut)
	log, names := svc.Log, svc.Names
	secrets := startup.VerifySecrets
	if ensureOnly { // only the dedup TTLs matter: no signing secret needed
		secrets = startup.NoSecrets
	}
	reg, _, err := svc.LoadProviders(cfg.ProvidersFile, secrets, lookupEnv)
	if err != nil {
		return err
	}
	opts, err := svc.KafkaOpts("hookline-ingest",
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), // the caller waits for the ack: send now
		kgo.RecordDeliveryTimeout(cfg.ProduceDeadline),
		kgo.RecordPartitioner(topics.Partitioner()), // an ordered provider's entity in one partition
		kgo.WithHooks(svc.KafkaMetrics),
	)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	specs := names.Specs(svc.Shape(reg))
	if ensureOnly {
		startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := topics.Ensure(startCtx, cl, specs, cfg.Topics.Replication); err != nil {
			return fmt.Errorf("ensure topics on %s: %w", cfg.Kafka, cfg.Kafka.Explain(err))
		}
		// make topics also sets what a setting tunes on an existing topic
		// (the DLQ's retention.ms), which a service only warns about.
		drifts, err := topics.Drifts(startCtx, cl, specs)
		if err == nil {
			err = topics.SetTuned(startCtx, cl, drifts)
		}
		if err != nil {
			return fmt.Errorf("tune topics on %s: %w", cfg.Kafka, cfg.Kafka.Explain(err))
		}
		for _, d := range drifts {
			log.Info("topic config set", "topic", d.Topic, "config", d.Key, "was", d.Have, "now", d.Want, "by", d.Var)
		}
		log.Info("topics are in place", "topics", names.All())
		return nil
	}

	// Until the topics are in place, /readyz says why and every webhook
	// is answered 503 kafka_unavailable: a Kafka that refuses ingest (a
	// wrong password or CA, TLS missing) is reported, not waited out.
	health := obs.NewHealth("kafka")
	gate := &startGate{pub: publish.New(cl, cfg.ProduceDeadline)}
	gate.close(errors.New("kafka unavailable: topics not checked yet"))
	health.Set("kafka", gate.reason())

	// The self-test lists topics and reads its record back with clients of
	// its own, made per self-test with the same connection settings.
	testOpts, err := svc.KafkaOpts("hookline-ingest-selftest")
	if err != nil {
		return err
	}
	newClient := func(opts ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append(append([]kgo.Opt(nil), testOpts...), opts...)...)
	}
	tester := selftest.New(selftest.Config{
		Providers:     reg,
		Topics:        specs,
		SelftestTopic: names.Selftest,
		Producer:      cl,
		NewClient:     newClient,
		Timeout:       cfg.ProduceDeadline,
		Version:       selftest.Version(),
	})

	tracer, err := tracing.Setup(ctx, "ingest", cfg.Tracing)
	if err != nil {
		return err
	}
	defer tracer.Flush(log)
	srv := api.New(api.Config{
		Providers:          reg,
		Publisher:          gate,
		Topic:              names.Raw,
		MaxBodyBytes:       int64(cfg.Topics.MaxBodyBytes),
		RetryAfter:         cfg.ProduceDeadline,
		Health:             health,
		Registry:           svc.Metrics,
		Logger:             log,
		Selftest:           tester,
		IPLimit:            cfg.IPLimit,
		ReplayCacheEntries: cfg.ReplayCacheEntries,
		OutcomesTopic:      names.Outcomes,
		EventTypeLabels:    cfg.EventTypeLabels,
		Tracer:             tracer,
	})
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: cfg.Server.ReadHeader,
		ReadTimeout:       cfg.Server.Read,
		WriteTimeout:      cfg.Server.Write,
		IdleTimeout:       cfg.Server.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("HOOKLINE_INGEST_ADDR=%s: %w", cfg.Addr, err)
	}
	// The operator's GOGC wins over the floor.
	gcFloor := "off"
	if _, set := lookupEnv("GOGC"); set {
		gcFloor = "off (GOGC is set)"
	} else if cfg.GCFloor > 0 {
		defer gcpace.Start(uint64(cfg.GCFloor))()
		gcFloor = envconf.Size(cfg.GCFloor)
	}
	log.Info("ingest listening", "addr", ln.Addr().String(), "kafka", cfg.Kafka.String(), "topic", names.Raw, "providers", reg.Names(), "version", selftest.Version(), "gc_floor", gcFloor, "timer_slack", timerslack.Text())

	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	ensured := make(chan error, 1)
	places := placement.ControlStore{NewClient: newClient, Client: cl, Topic: names.Control}
	go func() {
		ensured <- ensureTopics(ctx, svc, cl, specs, gate, health, func(ctx context.Context) error {
			return placement.Settle(ctx, places, placement.Wants(reg), time.Now(), log)
		})
	}()
wait:
	for {
		select {
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case err := <-ensured:
			if err != nil {
				_ = hs.Close()
				return err
			}
			ensured = nil
			if ready != nil {
				ready <- ln.Addr().String()
			}
			go watchKafka(ctx, adm, names.Raw, cfg.Kafka, health, log)
		case <-ctx.Done():
			break wait
		}
	}

	log.Info("shutting down: draining in-flight requests")
	health.Drain()
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := hs.Shutdown(shutCtx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := cl.Flush(shutCtx); err != nil {
		errs = append(errs, fmt.Errorf("flush: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("ingest stopped cleanly")
	return nil
}

// startGate is the publisher while the topics are not in place: it answers
// every publish with the reason, so ingest answers 503 kafka_unavailable.
type startGate struct {
	pub api.Publisher
	why atomic.Pointer[error]
}

func (g *startGate) close(why error) { g.why.Store(&why) }
func (g *startGate) open()           { g.why.Store(nil) }

func (g *startGate) reason() error {
	if p := g.why.Load(); p != nil {
		return *p
	}
	return nil
}

// Publish is the publisher's, once the gate is open.
func (g *startGate) Publish(ctx context.Context, recs []*kgo.Record) error {
	if err := g.reason(); err != nil {
		return err
	}
	return g.pub.Publish(ctx, recs)
}

// ensureTopics creates the missing topics and checks the others, trying
// again while Kafka cannot be reached or refuses ingest, with the reason in
// the log, on /readyz and in every 503 (startup.Service.EnsureTopics); then
// it checks and records the providers' placements (placement.Settle, given
// as settle) and opens the gate. Topics of the wrong shape, or a
// placement changed without acknowledgement, end it with an error: an
// operator must decide. It returns nil when ctx ends first.
func ensureTopics(ctx context.Context, svc *startup.Service, cl *kgo.Client, specs []topics.Spec, gate *startGate, health *obs.Health,
	settle func(context.Context) error) error {
	err := svc.EnsureTopics(ctx, cl, specs, health, "answering 503 kafka_unavailable until Kafka lets ingest in", gate.close)
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = settle(sctx)
		cancel()
	}
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return err
	}
	gate.open()
	health.Set("kafka", nil)
	svc.Log.Info("topics are in place; accepting webhooks", "kafka", svc.Kafka.String())
	return nil
}

// watchKafka keeps the "kafka" readiness check current: the raw topic must
// be visible in the metadata with a leader for every partition.
func watchKafka(ctx context.Context, adm *kadm.Client, topic string, kc kafkaconf.Config, h *obs.Health, log *slog.Logger) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := kc.Explain(topicReady(cctx, adm, topic))
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("kafka not ready", "topic", topic, "err", err)
		}
		h.Set("kafka", err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func topicReady(ctx context.Context, adm *kadm.Client, topic string) error {
	d, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	td, ok := d[topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("topic %s missing: %v", topic, td.Err)
	}
	for _, p := range td.Partitions {
		if p.Leader < 0 || p.Err != nil {
			return fmt.Errorf("topic %s partition %d has no leader", topic, p.Partition)
		}
	}
	return nil
}
