// Package kafkatest gives tests a Kafka to talk to: an in-process kfake
// cluster for fast unit tests, and for integration tests a real broker, taken
// from KAFKA_BROKERS (make test starts one without Docker), else started with
// testcontainers-go where a Docker engine answers, else the test is skipped
// with a message saying how to run it.
//
// Every integration test gets its own topic prefix (Prefix), so tests share
// one broker without seeing each other's records. A test that stops or kills
// brokers starts a private single broker or cluster of its own instead
// (StartCluster), from the same compose/kafka.sh as `make kafka-up`.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/topics"
)

// ContainerImage is the image testcontainers' Kafka module accepts.
const ContainerImage = "confluentinc/confluent-local:7.5.0"

// SkipMessage says how to run a skipped integration test.
const SkipMessage = "no Kafka: set KAFKA_BROKERS=host:port, run `make test` (starts a local broker without Docker), or start a Docker engine for testcontainers"

// Fake starts an in-process kfake cluster (one broker unless opts say otherwise), closed at
// the end of the test, and returns its addresses.
func Fake(tb testing.TB, opts ...kfake.Opt) []string {
	tb.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}

// container is started at most once per test binary (one per package) and
// lives until the process ends: testcontainers' reaper removes it.
var container struct {
	once    sync.Once
	brokers []string
	err     error
}

// Brokers returns the addresses of a real Kafka broker, or skips the test.
func Brokers(tb testing.TB) []string {
	tb.Helper()
	if v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); v != "" {
		return strings.Split(v, ",")
	}
	if !dockerAvailable() {
		tb.Skip(SkipMessage)
	}
	container.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		kc, err := tckafka.Run(ctx, ContainerImage)
		if err != nil {
			container.err = fmt.Errorf("start kafka container: %w", err)
			return
		}
		container.brokers, container.err = kc.Brokers(ctx)
	})
	if container.err != nil {
		tb.Fatalf("%v", container.err)
	}
	return container.brokers
}

func dockerAvailable() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Health(ctx) == nil
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// Prefix returns a topic and group prefix unique to this test run, such as
// "t-TestRoundTrip-3f9a1c.", for HOOKLINE_TOPIC_PREFIX. At the end of the
// test, failed or not, every topic and group named with it on the
// plaintext broker (KAFKA_BROKERS, or the container) is deleted; what a
// killed test left is swept by Sweep at the start of the next make test.
// A test on the secure broker gets the same from SecureBroker.Grant.
func Prefix(tb testing.TB) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(tb.Name(), "_")
	if len(name) > 60 {
		name = name[:60]
	}
	prefix := "t-" + name + "-" + hex.EncodeToString(b[:]) + "."
	tb.Cleanup(func() {
		if brokers := plaintextBrokers(); len(brokers) > 0 {
			deletePrefix(tb, kafkaconf.Config{Brokers: brokers}, prefix)
		}
	})
	return prefix
}

// TestPrefix matches the prefixes Prefix makes and those of the
// benchmarks (loadtest.Prefix: "bench-e2e-3f9a1c."), and no others.
var TestPrefix = regexp.MustCompile(`^(t|bench)-[a-zA-Z0-9_-]{1,60}-[0-9a-f]{6}\.`)

// plaintextBrokers is the broker Brokers gives: KAFKA_BROKERS, or the
// container if one was started; none otherwise.
func plaintextBrokers() []string {
	if v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); v != "" {
		return strings.Split(v, ",")
	}
	return container.brokers
}

// deletePrefix deletes the topics and groups named with prefix, as a
// clean-up: a failure is logged, not failed (the sweep catches it).
func deletePrefix(tb testing.TB, conf kafkaconf.Config, prefix string) {
	cl, err := conf.NewClient()
	if err != nil {
		tb.Logf("deleting the test's topics %s*: %v", prefix, err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := topics.DeletePrefix(ctx, kadm.NewClient(cl), prefix); err != nil {
		tb.Logf("deleting the test's topics %s*: %v", prefix, err)
	}
}

// Sweep deletes every topic and group on brokers named with a test or
// benchmark prefix (TestPrefix): what tests that were killed, or whose
// clean-up failed, left behind. make test runs it (pkg/testkit/kafkatest/sweep)
// before any test makes topics of its own, and after the last.
func Sweep(ctx context.Context, brokers []string) (topics.Deleted, error) {
	cl, err := kafkaconf.Config{Brokers: brokers}.NewClient()
	if err != nil {
		return topics.Deleted{}, err
	}
	defer cl.Close()
	return topics.DeleteMatching(ctx, kadm.NewClient(cl), TestPrefix.MatchString)
}

// Client returns a client for brokers, closed at the end of the test. Like
// every client of the tests and benchmarks, it is made through kafkaconf,
// plaintext (SecureBroker.Client for TLS and SASL), opts last.
func Client(tb testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kafkaconf.Config{Brokers: brokers}.NewClient(opts...)
	if err != nil {
		tb.Fatalf("kafka client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Opts are the plaintext connection options for brokers (from kafkaconf),
// then extra: for code under test that takes options rather than a client.
func Opts(tb testing.TB, brokers []string, extra ...kgo.Opt) []kgo.Opt {
	tb.Helper()
	opts, err := kafkaconf.Config{Brokers: brokers}.Opts(extra...)
	if err != nil {
		tb.Fatalf("kafka options: %v", err)
	}
	return opts
}

// NewClient is a client factory for brokers, for code under test that makes
// its own clients (func(...kgo.Opt) (*kgo.Client, error)); the caller
// closes what it makes.
func NewClient(brokers []string) func(extra ...kgo.Opt) (*kgo.Client, error) {
	return kafkaconf.Config{Brokers: brokers}.NewClient
}

// EndOffsets returns the sum over partitions of topic's end offsets: the
// number of records ever written to it. Tests compare it before and after to
// prove nothing was produced.
func EndOffsets(tb testing.TB, brokers []string, topic string) int64 {
	tb.Helper()
	cl := Client(tb, brokers)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var offs kadm.ListedOffsets
	var err error
	// A topic created a moment ago may not be in the broker's metadata yet.
	for {
		cl.PurgeTopicsFromClient(topic)
		offs, err = adm.ListEndOffsets(ctx, topic)
		if err == nil && offs.Error() == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("end offsets of %s: %v", topic, err)
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			tb.Fatalf("end offset of %s[%d]: %v", topic, o.Partition, o.Err)
		}
		sum += o.Offset
	})
	return sum
}

// ReadN reads n committed records of topic from the start, failing the test
// if they do not arrive within timeout.
func ReadN(tb testing.TB, brokers []string, topic string, n int, timeout time.Duration) []*kgo.Record {
	tb.Helper()
	cl := Client(tb, brokers,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("read %s: got %d of %d records within %s", topic, len(out), n, timeout)
		}
		fs.EachError(func(t string, p int32, err error) {
			tb.Errorf("fetch %s[%d]: %v", t, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}
