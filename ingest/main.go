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
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/hookline/hookline/ingest/internal/api"
	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/ingest/internal/selftest"
	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/topics"
)

func main() {
	providersFlag := flag.String("providers", "", "providers file (overrides HOOKLINE_PROVIDERS)")
	ensureOnly := flag.Bool("ensure-topics", false, "create missing topics, check existing ones, and exit")
	flag.Parse()
	gin.SetMode(gin.ReleaseMode)
	lookup := os.LookupEnv
	if *providersFlag != "" {
		lookup = withEnv(lookup, "HOOKLINE_PROVIDERS", *providersFlag)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *ensureOnly {
		lookup = withEnv(lookup, "HOOKLINE_ENSURE_TOPICS_ONLY", "true")
	}
	if err := run(ctx, lookup, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

// withEnv overrides one variable of lookup.
func withEnv(lookup func(string) (string, bool), name, value string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == name {
			return value, true
		}
		return lookup(k)
	}
}

// run serves until ctx is done, then drains: /readyz turns false, the
// listener stops, in-flight requests finish, the producer flushes. ready, when
// not nil, receives the listening address once the topics are in place and
// webhooks are accepted (before, they are answered 503 kafka_unavailable).
func run(ctx context.Context, lookupEnv func(string) (string, bool), logOut io.Writer, ready chan<- string) error {
	cfg, err := loadConfig(lookupEnv)
	if err != nil {
		return err
	}
	log, err := obs.NewLogger(logOut, cfg.LogLevel, "ingest")
	if err != nil {
		return err
	}
	ensureOnly := false
	if v, _ := lookupEnv("HOOKLINE_ENSURE_TOPICS_ONLY"); v == "true" {
		ensureOnly = true
	}
	var reg *providers.Registry
	if ensureOnly { // only the dedup TTLs matter: no signing secret needed
		reg, err = providers.LoadWithoutSecrets(cfg.ProvidersFile)
	} else {
		reg, err = providers.Load(cfg.ProvidersFile, lookupEnv)
	}
	if err != nil {
		return err
	}
	// The processor applies retry policies; refusing a bad one here too
	// keeps every service that reads the file in agreement.
	if _, err := reg.RetrySchedules(cfg.Retry); err != nil {
		return err
	}
	names := topics.NewNames(cfg.Topics.Prefix, cfg.Retry.Names())
	promReg := obs.NewRegistry()
	kmetrics := kprom.NewMetrics("hookline_ingest_kafka", kprom.Registerer(promReg), kprom.Gatherer(promReg))

	opts, err := cfg.Kafka.Opts(
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), // the caller waits for the ack: send now
		kgo.ProducerBatchMaxBytes(int32(cfg.Topics.MaxRecordBytes())),
		kgo.RecordDeliveryTimeout(cfg.ProduceDeadline),
		kgo.WithHooks(kmetrics),
		kgo.ClientID("hookline-ingest"),
		kgo.WithLogger(obs.KafkaLogger(log)),
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

	specs := names.Specs(topics.Shape{
		Partitions:         cfg.Topics.Partitions,
		ChangelogRetention: reg.MaxDedupTTL(),
		MaxMessageBytes:    cfg.Topics.MaxRecordBytes(),
	})
	if ensureOnly {
		startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = topics.Ensure(startCtx, cl, specs, cfg.Topics.Replication)
		cancel()
		if err != nil {
			return fmt.Errorf("ensure topics on %s: %w", cfg.Kafka, cfg.Kafka.Explain(err))
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
	testOpts, err := cfg.Kafka.Opts(kgo.ClientID("hookline-ingest-selftest"), kgo.WithLogger(obs.KafkaLogger(log)))
	if err != nil {
		return err
	}
	tester := selftest.New(selftest.Config{
		Providers:     reg,
		Topics:        specs,
		SelftestTopic: names.Selftest,
		Producer:      cl,
		NewClient: func(opts ...kgo.Opt) (*kgo.Client, error) {
			return kgo.NewClient(append(append([]kgo.Opt(nil), testOpts...), opts...)...)
		},
		Timeout: cfg.ProduceDeadline,
		Version: selftest.Version(),
	})

	srv := api.New(api.Config{
		Providers:    reg,
		Publisher:    gate,
		Topic:        names.Raw,
		MaxBodyBytes: int64(cfg.Topics.MaxBodyBytes),
		RetryAfter:   cfg.ProduceDeadline,
		Health:       health,
		Registry:     promReg,
		Logger:       log,
		Selftest:     tester,
		IPLimit:      cfg.IPLimit,
	})
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30*time.Second + cfg.ProduceDeadline,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("HOOKLINE_INGEST_ADDR=%s: %w", cfg.Addr, err)
	}
	log.Info("ingest listening", "addr", ln.Addr().String(), "kafka", cfg.Kafka.String(), "topic", names.Raw, "providers", reg.Names(), "version", selftest.Version())

	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	ensured := make(chan error, 1)
	go func() {
		ensured <- ensureTopics(ctx, cl, specs, cfg, gate, health, log)
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
// the log and on /readyz (topics.EnsureRetrying); then it opens the gate.
// Topics of the wrong shape end it with an error: an operator must decide.
// It returns nil when ctx ends first.
func ensureTopics(ctx context.Context, cl *kgo.Client, specs []topics.Spec, cfg config, gate *startGate, health *obs.Health, log *slog.Logger) error {
	err := topics.EnsureRetrying(ctx, cl, specs, cfg.Topics.Replication, 15*time.Second, func(err error, retryIn time.Duration) {
		err = fmt.Errorf("kafka unavailable: %w", cfg.Kafka.Explain(err))
		gate.close(err)
		health.Set("kafka", err)
		log.Error("cannot check the topics; answering 503 kafka_unavailable until Kafka lets ingest in", "kafka", cfg.Kafka.String(), "err", err, "retry_in", retryIn.String())
	})
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return fmt.Errorf("ensure topics on %s: %w", cfg.Kafka, err)
	}
	gate.open()
	health.Set("kafka", nil)
	log.Info("topics are in place; accepting webhooks", "kafka", cfg.Kafka.String())
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
