package selftest

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// cuttable dials the broker until cut, then refuses to and closes every
// connection it made: the broker gone, as the client sees it.
type cuttable struct {
	down  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func (c *cuttable) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if c.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errBrokerDown}
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, host)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *cuttable) cut(down bool) {
	c.down.Store(down)
	if !down {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

type dialError string

func (e dialError) Error() string { return string(e) }

const errBrokerDown = dialError("broker stopped by the test")

const (
	secretOne = "selftest-secret-one-7Qw"
	secretTwo = "selftest-secret-two-9Zk"
)

// TestSelftestAgainstBroker: with the broker reachable every check passes,
// listing the providers with their secret counts (never a secret), every
// topic with its partition count, and a timed round trip read back from
// webhooks.selftest; with the broker cut off, the report fails naming the
// kafka check (and topics, whose metadata is gone too); reachable again, it
// passes again.
func TestSelftestAgainstBroker(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	prefix := kafkatest.Prefix(t)
	names := topics.NewNames(prefix, retry.DefaultSchedule().Names()[:1])
	specs := names.Specs(topics.Shape{Partitions: 2, ChangelogRetention: time.Hour, MaxMessageBytes: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topics.Ensure(ctx, kafkatest.Client(t, brokers), specs, -1); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ONE": secretOne, "TWO": secretTwo}
	reg, err := providers.Parse([]byte(`
providers:
  stripe: {preset: stripe, secret_env: [ONE, TWO]}
  github: {preset: github, secret_env: [ONE]}
  open:   {preset: generic, signature: {none: true}}
`), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var net cuttable
	conn := kafkatest.Opts(t, brokers, kgo.Dialer(net.dial), kgo.RetryTimeout(time.Second))
	cl := kafkatest.Client(t, brokers, append(conn, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))...)
	now := time.Now()
	clock := func() time.Time { return now } // frozen: every Run is a new self-test only when the test moves it
	cfg := Config{
		Providers:     reg,
		Topics:        specs,
		SelftestTopic: names.Selftest,
		Producer:      cl,
		NewClient: func(opts ...kgo.Opt) (*kgo.Client, error) {
			return kgo.NewClient(append(append([]kgo.Opt(nil), conn...), opts...)...)
		},
		Timeout: 20 * time.Second, // generous: the shared broker can be slow to take a first produce
		Version: "v-test",
		Now:     func() time.Time { return clock() },
	}
	r := New(cfg)

	rep := r.Run(ctx)
	body, _ := json.Marshal(rep)
	if rep.Status != Pass || len(rep.Failed) != 0 || rep.Version != "v-test" {
		t.Fatalf("report %s, want a pass", body)
	}
	for _, secret := range []string{secretOne, secretTwo} {
		if strings.Contains(string(body), secret) {
			t.Fatalf("report holds a secret value: %s", body)
		}
	}
	wantProviders := []Provider{{"github", "github", 1}, {"open", "generic", 0}, {"stripe", "stripe", 2}}
	if len(rep.Providers) != 3 || rep.Providers[0] != wantProviders[0] || rep.Providers[1] != wantProviders[1] || rep.Providers[2] != wantProviders[2] {
		t.Fatalf("providers %+v, want %+v", rep.Providers, wantProviders)
	}
	if len(rep.Checks.Topics.Topics) != len(specs) {
		t.Fatalf("%d topics listed, want %d", len(rep.Checks.Topics.Topics), len(specs))
	}
	for _, tp := range rep.Checks.Topics.Topics {
		want := int32(2)
		if tp.Name == names.Control || tp.Name == names.Selftest {
			want = 1
		}
		if tp.Partitions != want || tp.WantPartitions != want {
			t.Errorf("topic %s: %d partitions (want %d listed as %d)", tp.Name, tp.Partitions, want, tp.WantPartitions)
		}
	}
	k := rep.Checks.Kafka
	if k.Topic != names.Selftest || k.Offset < 0 || k.ProduceMS <= 0 || k.RoundTripMS < k.ProduceMS {
		t.Fatalf("kafka check %+v, want a timed round trip on %s", k, names.Selftest)
	}
	// The record is there, as the report says.
	back := kafkatest.ReadN(t, brokers, names.Selftest, 1, 10*time.Second)
	if !strings.HasPrefix(string(back[0].Key), "selftest:") || back[0].Offset != k.Offset {
		t.Fatalf("selftest topic holds %s at %d, want a selftest key at %d", back[0].Key, back[0].Offset, k.Offset)
	}

	// Within MinInterval the same report is answered: nothing produced.
	if again := r.Run(ctx); again.At != rep.At || again.Checks.Kafka.Offset != k.Offset {
		t.Fatalf("a second self-test within %s ran anew: %+v", MinInterval, again.Checks.Kafka)
	}

	net.cut(true)
	now = now.Add(MinInterval)
	cfg.Timeout = 2 * time.Second // the failing self-test takes its whole timeout: keep it short
	rep = New(cfg).Run(ctx)
	body, _ = json.Marshal(rep)
	if rep.Status != Fail || !slices.Contains(rep.Failed, CheckKafka) || rep.Checks.Kafka.Status != Fail || rep.Checks.Kafka.Error == "" {
		t.Fatalf("broker cut off: report %s, want a failure naming kafka", body)
	}
	if msg := rep.Message(); !strings.Contains(msg, "kafka: produce to "+names.Selftest) {
		t.Fatalf("message %q does not name the kafka check", msg)
	}
	if rep.TookMS > 4000 {
		t.Fatalf("a failing self-test took %.0f ms, over twice its %s timeout", rep.TookMS, cfg.Timeout)
	}

	t.Logf("broker cut off: failed %v: %s", rep.Failed, rep.Message())

	// Back: the producer reconnects (with its backoff) and the record it
	// kept in flight goes first; a self-test passes again within seconds.
	net.cut(false)
	back0 := time.Now()
	for {
		now = now.Add(MinInterval)
		if rep = r.Run(ctx); rep.Status == Pass {
			break
		}
		if time.Since(back0) > 30*time.Second {
			body, _ = json.Marshal(rep)
			t.Fatalf("broker back for 30s: report %s, want a pass", body)
		}
	}
	t.Logf("broker back: passing again after %s", time.Since(back0).Round(time.Millisecond))
}

// TestMessage: a failed report's message names each failed check with its
// error, in check order.
func TestMessage(t *testing.T) {
	rep := Report{Status: Fail, Failed: []string{CheckTopics, CheckKafka}}
	rep.Checks.Topics.Error = "x missing"
	rep.Checks.Kafka.Error = "produce: timeout"
	if got, want := rep.Message(), "self-test failed: topics: x missing; kafka: produce: timeout"; got != want {
		t.Fatalf("Message() = %q, want %q", got, want)
	}
	if (Report{Status: Pass}).Message() != "" {
		t.Fatal("a passing report has a message")
	}
}
