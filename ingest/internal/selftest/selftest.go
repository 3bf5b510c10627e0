// Package selftest is ingest's GET /selftest: what an operator (or a probe)
// asks to know that this ingest can take webhooks. It reports the providers
// loaded (name, preset, how many secrets are set; never a secret), and runs
// two checks against Kafka:
//
//   - topics: every topic ingest ensures at start exists, with a leader for
//     each partition and the partition count it should have;
//   - kafka: one record produced to webhooks.selftest with acks=all by
//     ingest's own producer, then read back by a fresh consumer, timed.
//
// The report's status is "pass" when both pass, "fail" otherwise, with the
// failing checks named in Failed. Self-tests run one at a time, and a
// report less than MinInterval old is answered again instead of running
// anew, so a flood of requests costs Kafka at most one record a
// MinInterval.
package selftest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/topics"
)

// MinInterval is how long a report is answered again instead of running a
// new self-test.
const MinInterval = time.Second

// Statuses of a report and of each check.
const (
	Pass = "pass"
	Fail = "fail"
)

// Names of the checks, as Failed lists them.
const (
	CheckTopics = "topics"
	CheckKafka  = "kafka"
)

// Producer sends the round-trip record; ingest's *kgo.Client (acks=all).
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

var _ Producer = (*kgo.Client)(nil)

// Config is what a self-test needs; every field is required unless noted.
type Config struct {
	Providers *providers.Registry
	// Topics are the topics ingest ensures (topics.Names.Specs), the
	// self-test topic among them.
	Topics []topics.Spec
	// SelftestTopic is the topic of the round trip (topics.Names.Selftest).
	SelftestTopic string
	Producer      Producer
	// NewClient makes a client with the connection options ingest uses.
	// Each self-test makes two and closes them: one lists the topics (a
	// new client has no metadata cache to answer from), one reads the
	// record back.
	NewClient func(opts ...kgo.Opt) (*kgo.Client, error)
	// Timeout bounds each check (HOOKLINE_PRODUCE_DEADLINE in ingest); they
	// run at the same time, so it bounds a self-test.
	Timeout time.Duration
	// Version is the build's version (Version() in production).
	Version string
	// Now dates reports and ages them for MinInterval; time.Now unless a
	// test says otherwise. Durations are measured on the real clock.
	Now func() time.Time
}

// Report is the body of GET /selftest.
type Report struct {
	Status    string     `json:"status"`           // Pass or Fail
	Failed    []string   `json:"failed,omitempty"` // names of the failed checks, in check order
	Version   string     `json:"version"`
	At        string     `json:"at"` // when the self-test started, RFC 3339 UTC with milliseconds
	TookMS    float64    `json:"took_ms"`
	Providers []Provider `json:"providers"`
	Checks    Checks     `json:"checks"`
}

// Provider is one loaded provider, without any secret.
type Provider struct {
	Name   string `json:"name"`
	Preset string `json:"preset"`
	// Secrets is how many signing secrets are set (0 for an unsigned
	// generic provider).
	Secrets int `json:"secrets"`
}

// Checks are the checks' results.
type Checks struct {
	Topics TopicsCheck `json:"topics"`
	Kafka  KafkaCheck  `json:"kafka"`
}

// TopicsCheck lists every topic ingest ensures with its partition count.
type TopicsCheck struct {
	Status string  `json:"status"`
	Error  string  `json:"error,omitempty"`
	TookMS float64 `json:"took_ms"`
	Topics []Topic `json:"topics"`
}

// Topic is one topic as the broker's metadata shows it.
type Topic struct {
	Name string `json:"name"`
	// Partitions is the count in the metadata, 0 for a topic missing.
	Partitions int32 `json:"partitions"`
	// WantPartitions is the count ingest creates it with.
	WantPartitions int32 `json:"want_partitions"`
}

// KafkaCheck is the produce-and-read round trip.
type KafkaCheck struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Topic  string `json:"topic"`
	// Partition and Offset of the record produced; -1 when the produce
	// failed.
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// ProduceMS is the produce until acks=all; RoundTripMS adds the read
	// back; both 0 when not reached.
	ProduceMS   float64 `json:"produce_ms"`
	RoundTripMS float64 `json:"round_trip_ms"`
}

// Runner runs self-tests, one at a time. Safe for concurrent use.
type Runner struct {
	cfg Config

	mu     sync.Mutex // held while a self-test runs
	last   *Report
	lastAt time.Time
}

// New returns a Runner over cfg.
func New(cfg Config) *Runner {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg}
}

// Run returns a report: a new one, or the last one when it is under
// MinInterval old. Callers arriving while a self-test runs wait for it and
// get its report. Cost: two new clients (connections and a metadata request
// each), one produce with acks=all and one fetch; at most Timeout.
func (r *Runner) Run(ctx context.Context) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && r.cfg.Now().Sub(r.lastAt) < MinInterval {
		return *r.last
	}
	rep := r.run(ctx)
	r.last, r.lastAt = &rep, r.cfg.Now()
	return rep
}

func (r *Runner) run(ctx context.Context) Report {
	start := time.Now() // durations on the real clock; cfg.Now only dates reports
	rep := Report{Version: r.cfg.Version, At: headers.FormatTime(r.cfg.Now()), Providers: r.providers()}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); rep.Checks.Topics = r.topics(ctx) }()
	go func() { defer wg.Done(); rep.Checks.Kafka = r.roundTrip(ctx) }()
	wg.Wait()
	rep.Status = Pass
	for _, c := range []struct{ name, status string }{{CheckTopics, rep.Checks.Topics.Status}, {CheckKafka, rep.Checks.Kafka.Status}} {
		if c.status != Pass {
			rep.Status = Fail
			rep.Failed = append(rep.Failed, c.name)
		}
	}
	rep.TookMS = ms(time.Since(start))
	return rep
}

// Message summarises a failed report in one line, naming each failed check
// and its error; "" for a report that passed.
func (rep Report) Message() string {
	var parts []string
	for _, name := range rep.Failed {
		e := rep.Checks.Topics.Error
		if name == CheckKafka {
			e = rep.Checks.Kafka.Error
		}
		parts = append(parts, name+": "+e)
	}
	if len(parts) == 0 {
		return ""
	}
	return "self-test failed: " + strings.Join(parts, "; ")
}

func (r *Runner) providers() []Provider {
	out := []Provider{}
	for _, name := range r.cfg.Providers.Names() {
		p, _ := r.cfg.Providers.Get(name)
		out = append(out, Provider{Name: p.Name, Preset: p.Preset, Secrets: p.SecretCount()})
	}
	return out
}

// topics checks every topic ingest ensures: present, a leader for each
// partition, the partition count it is created with.
func (r *Runner) topics(ctx context.Context) TopicsCheck {
	start := time.Now()
	c := TopicsCheck{Topics: []Topic{}}
	names := make([]string, len(r.cfg.Topics))
	for i, s := range r.cfg.Topics {
		names[i] = s.Name
		c.Topics = append(c.Topics, Topic{Name: s.Name, WantPartitions: s.Partitions})
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	cl, err := r.cfg.NewClient()
	if err != nil {
		c.Status, c.Error = Fail, "client: "+err.Error()
		return c
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, names...)
	c.TookMS = ms(time.Since(start))
	if err != nil {
		c.Status, c.Error = Fail, "metadata: "+err.Error()
		return c
	}
	var problems []string
	for i := range c.Topics {
		t := &c.Topics[i]
		d, ok := details[t.Name]
		if !ok || d.Err != nil {
			problems = append(problems, fmt.Sprintf("%s missing (%v)", t.Name, d.Err))
			continue
		}
		t.Partitions = int32(len(d.Partitions))
		if t.Partitions != t.WantPartitions {
			problems = append(problems, fmt.Sprintf("%s has %d partitions, want %d", t.Name, t.Partitions, t.WantPartitions))
		}
		for _, p := range d.Partitions.Sorted() {
			if p.Leader < 0 || p.Err != nil {
				problems = append(problems, fmt.Sprintf("%s partition %d has no leader", t.Name, p.Partition))
				break
			}
		}
	}
	c.Status = Pass
	if len(problems) > 0 {
		c.Status, c.Error = Fail, strings.Join(problems, "; ")
	}
	return c
}

// roundTrip produces one record to the self-test topic and reads it back
// from its partition and offset with a new client.
func (r *Runner) roundTrip(ctx context.Context) KafkaCheck {
	c := KafkaCheck{Topic: r.cfg.SelftestTopic, Partition: -1, Offset: -1}
	fail := func(format string, args ...any) KafkaCheck {
		c.Status, c.Error = Fail, fmt.Sprintf(format, args...)
		return c
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id) // crypto/rand.Read never fails
	start := time.Now()
	value, _ := json.Marshal(map[string]string{"selftest": hex.EncodeToString(id), "at": headers.FormatTime(r.cfg.Now())}) // strings: cannot fail
	rec := &kgo.Record{Topic: r.cfg.SelftestTopic, Key: []byte("selftest:" + hex.EncodeToString(id)), Value: value}

	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	// Wait for the ack or the deadline, whichever comes first: an idempotent
	// producer keeps a record in flight past its context while the broker
	// is away.
	acked := make(chan error, 1)
	r.cfg.Producer.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		if err != nil {
			return fail("produce to %s: %v", r.cfg.SelftestTopic, err)
		}
	case <-ctx.Done():
		return fail("produce to %s: no acknowledgement within %s", r.cfg.SelftestTopic, r.cfg.Timeout)
	}
	got := rec // the promise has set its partition and offset
	c.Partition, c.Offset, c.ProduceMS = got.Partition, got.Offset, ms(time.Since(start))

	cl, err := r.cfg.NewClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.SelftestTopic: {got.Partition: kgo.NewOffset().At(got.Offset)}}),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return fail("reader client: %v", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fail("read back %s[%d] at offset %d: not within %s", r.cfg.SelftestTopic, got.Partition, got.Offset, r.cfg.Timeout)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("%s[%d]: %w", t, p, err)) })
		if ferr != nil {
			return fail("read back: %v", ferr)
		}
		for _, back := range fs.Records() {
			if back.Offset != got.Offset {
				continue
			}
			if string(back.Key) != string(rec.Key) || !slices.Equal(back.Value, rec.Value) {
				return fail("read back %s[%d] at offset %d: another record (key %q)", r.cfg.SelftestTopic, got.Partition, got.Offset, back.Key)
			}
			c.Status, c.RoundTripMS = Pass, ms(time.Since(start))
			return c
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Version returns the build's version: the module version when built from a
// tagged module, else "devel" with the VCS revision (12 hex digits) and
// "-dirty" for a modified tree, as far as the build recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		v += "+" + rev[:min(12, len(rev))] + dirty
	}
	return v
}
