package startup

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/envconf/envconftest"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

func service(t *testing.T, env map[string]string) *Service {
	t.Helper()
	r := envconf.New(envconftest.Env(env))
	c := ReadCommon(r)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return New("processor", c, io.Discard)
}

func client(t *testing.T, svc *Service, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts, err := svc.KafkaOpts("test", extra...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestEnsureTopicsRefused: while Kafka cannot be reached, each failure
// reaches /readyz, the caller and the log as "kafka unavailable", and the
// wait ends with the context.
func TestEnsureTopicsRefused(t *testing.T) {
	svc := service(t, map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "HOOKLINE_TOPIC_PREFIX": "x."})
	cl := client(t, svc, kgo.DialTimeout(200*time.Millisecond))
	health := obs.NewHealth("kafka")
	var refusals []error
	ctx, cancel := context.WithTimeout(t.Context(), 1200*time.Millisecond)
	defer cancel()
	err := svc.EnsureTopics(ctx, cl, svc.Names.Specs(svc.Shape(nil)), health, "trying again", func(err error) { refusals = append(refusals, err) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EnsureTopics: %v, want the context's deadline", err)
	}
	if len(refusals) == 0 || !strings.HasPrefix(refusals[0].Error(), "kafka unavailable: ") {
		t.Fatalf("refusals %v", refusals)
	}
	if ok, checks := health.Ready(); ok || !strings.HasPrefix(checks["kafka"], "kafka unavailable: ") {
		t.Fatalf("ready %v, checks %v", ok, checks)
	}
}

// TestEnsureTopicsCreates: on a reachable cluster the topics are created
// with the service's partition count; the Kafka metrics carry its name.
func TestEnsureTopicsCreates(t *testing.T) {
	addrs := kafkatest.Fake(t)
	svc := service(t, map[string]string{"KAFKA_BROKERS": strings.Join(addrs, ","), "HOOKLINE_PARTITIONS": "3", "HOOKLINE_RETRY_TIERS": "1s"})
	cl := client(t, svc, kgo.WithHooks(svc.KafkaMetrics))
	specs := svc.Names.Specs(svc.Shape(nil))
	if err := svc.EnsureTopics(t.Context(), cl, specs, obs.NewHealth("kafka"), "trying again", nil); err != nil {
		t.Fatal(err)
	}
	if err := topics.Ensure(t.Context(), cl, specs, -1); err != nil {
		t.Fatalf("topics not as specified after EnsureTopics: %v", err)
	}
	mfs, err := svc.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || strings.HasPrefix(mf.GetName(), "hookline_processor_kafka_")
	}
	if !found {
		t.Fatal("no hookline_processor_kafka_* metric after the client's requests")
	}
}
