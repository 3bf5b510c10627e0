// Package startup holds the start-up steps ingest, the processor and the
// retrier share, written once: the settings they all read, their logger,
// their Prometheus registry with franz-go's client metrics, their topic
// names, the providers file with its retry policies, their Kafka options,
// and the wait until Kafka lets them create or check their topics. What a
// service does with these (its HTTP server, its consumer) stays in its main.
package startup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
)

// Common is the part of the configuration every service reads.
type Common struct {
	LogLevel slog.Level       // HOOKLINE_LOG_LEVEL
	Kafka    kafkaconf.Config // KAFKA_BROKERS, KAFKA_TLS*, KAFKA_SASL_*
	Topics   topics.Env       // HOOKLINE_TOPIC_PREFIX, _PARTITIONS, _REPLICATION_FACTOR, _MAX_BODY_BYTES
	Retry    retry.Schedule   // HOOKLINE_RETRY_TIERS: tier topics' names
	// Jitter is HOOKLINE_RETRY_JITTER. Only the processor applies it; every
	// service checks it, so a wrong value stops them all alike.
	Jitter float64
}

// ReadCommon reads Common with r, which collects every problem.
func ReadCommon(r *envconf.Reader) Common {
	c := Common{LogLevel: obs.ReadLogLevel(r), Kafka: kafkaconf.Read(r), Topics: topics.ReadEnv(r)}
	c.Retry, c.Jitter = retry.Read(r)
	return c
}

// ReadProvidersFile reads HOOKLINE_PROVIDERS with r: the providers file,
// which ingest and the processor require (their --providers flag sets it:
// envconf.Override).
func ReadProvidersFile(r *envconf.Reader) string {
	return r.Required("HOOKLINE_PROVIDERS", "the providers file's path (or --providers)")
}

// Service is what a service builds first from Common.
type Service struct {
	Common
	Name  string // "ingest", "processor", "retrier"
	Log   *slog.Logger
	Names topics.Names
	// Metrics is the service's Prometheus registry (never the global one),
	// with the Go and process collectors; KafkaMetrics, registered in it as
	// hookline_<name>_kafka_*, is the franz-go hook (kgo.WithHooks) of the
	// service's main client.
	Metrics      *prometheus.Registry
	KafkaMetrics *kprom.Metrics
}

// New returns the Service named name: its JSON logger on logOut, its
// registry and topic names.
func New(name string, c Common, logOut io.Writer) *Service {
	reg := obs.NewRegistry()
	return &Service{
		Common:       c,
		Name:         name,
		Log:          obs.NewLogger(logOut, c.LogLevel, name),
		Names:        topics.NewNames(c.Topics.Prefix, c.Retry.Names()),
		Metrics:      reg,
		KafkaMetrics: kprom.NewMetrics("hookline_"+name+"_kafka", kprom.Registerer(reg), kprom.Gatherer(reg)),
	}
}

// Secrets says which secrets of the providers file a service reads from
// its environment.
type Secrets int

const (
	// NoSecrets reads none: a service that neither verifies nor signs
	// (ingest -ensure-topics reads only the dedup TTLs).
	NoSecrets Secrets = iota
	// VerifySecrets reads the providers' secret_env (ingest verifies
	// requests).
	VerifySecrets
	// SigningSecrets reads the routes' signing.secret_env (the processor
	// signs its calls and verifies nothing).
	SigningSecrets
)

// LoadProviders reads the providers file at path with the secrets which
// says, from lookupEnv (providers.Load, LoadForProcessor or
// LoadWithoutSecrets). It also returns each route's retry policy keyed by
// route.Key (providers.Registry.RetrySchedules): a policy that
// does not fit HOOKLINE_RETRY_TIERS is refused by every service that reads
// the file.
func (s *Service) LoadProviders(path string, which Secrets, lookupEnv func(string) (string, bool)) (*providers.Registry, map[string]retry.Schedule, error) {
	var reg *providers.Registry
	var err error
	switch which {
	case VerifySecrets:
		reg, err = providers.Load(path, lookupEnv)
	case SigningSecrets:
		reg, err = providers.LoadForProcessor(path, lookupEnv)
	default:
		reg, err = providers.LoadWithoutSecrets(path)
	}
	if err != nil {
		return nil, nil, err
	}
	policies, err := reg.RetrySchedules(s.Retry)
	if err != nil {
		return nil, nil, err
	}
	return reg, policies, nil
}

// Shape is the shape of the topics the service creates: HOOKLINE_PARTITIONS,
// records of the body limit plus headers, and a changelog kept as long as
// the longest dedup TTL of reg (none when reg is nil: a service without the
// providers file must not create the changelog).
func (s *Service) Shape(reg *providers.Registry) topics.Shape {
	sh := topics.Shape{Partitions: s.Topics.Partitions, MaxMessageBytes: s.Topics.MaxRecordBytes(), DLQRetention: s.Topics.DLQRetention}
	if reg != nil {
		sh.ChangelogRetention = reg.MaxDedupTTL()
	}
	return sh
}

// KafkaOpts returns the Kafka connection options (kafkaconf) with a
// producer batch that fits the largest record, clientID, the client's log
// lines in the service's log, then extra.
func (s *Service) KafkaOpts(clientID string, extra ...kgo.Opt) ([]kgo.Opt, error) {
	return s.Kafka.Opts(append([]kgo.Opt{
		kgo.ProducerBatchMaxBytes(int32(s.Topics.MaxRecordBytes())),
		kgo.ClientID(clientID),
		kgo.WithLogger(obs.KafkaLogger(s.Log)),
	}, extra...)...)
}

// EnsureTopics creates the missing topics of specs and checks the others
// (topics.EnsureRetrying, 15 s an attempt), trying again while Kafka cannot
// be reached or refuses the service. Each refusal, explained (a wrong
// password, a missing CA: kafkaconf.Explain) and prefixed "kafka
// unavailable", goes to health's "kafka" check, to onRefused when it is not
// nil, and to the log saying what the service does meanwhile (while). It
// returns ctx's error when ctx ends first, and an error naming the cluster
// when a topic has the wrong shape (an operator must decide).
func (s *Service) EnsureTopics(ctx context.Context, cl *kgo.Client, specs []topics.Spec, health *obs.Health, while string, onRefused func(error)) error {
	err := topics.EnsureRetrying(ctx, cl, specs, s.Topics.Replication, 15*time.Second, func(err error, retryIn time.Duration) {
		err = fmt.Errorf("kafka unavailable: %w", s.Kafka.Explain(err))
		if onRefused != nil {
			onRefused(err)
		}
		health.Set("kafka", err)
		s.Log.Error("cannot check the topics; "+while, "kafka", s.Kafka.String(), "err", err, "retry_in", retryIn.String())
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("ensure topics on %s: %w", s.Kafka, err)
	}
	s.WarnDrifts(ctx, cl, specs)
	return nil
}

// WarnDrifts logs a warning for each tuned config of an existing topic
// that differs from its spec (topics.Drifts: the DLQ's retention.ms set
// under another HOOKLINE_DLQ_RETENTION), saying how to fix it. It never
// stops the service: a failed check is a warning too.
func (s *Service) WarnDrifts(ctx context.Context, cl *kgo.Client, specs []topics.Spec) {
	drifts, err := topics.Drifts(ctx, cl, specs)
	if err != nil {
		s.Log.Warn("cannot compare the topics' tuned configs with the settings", "err", err)
	}
	for _, d := range drifts {
		s.Log.Warn("topic config differs from the setting: "+d.String(), "topic", d.Topic, "config", d.Key, "have", d.Have, "want", d.Want)
	}
}
