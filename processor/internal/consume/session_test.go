package consume

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/offsets"
	"github.com/hookline/hookline/processor/internal/state"
)

// fakeKafka is a kfake cluster with hookline's topics, one partition each (so every key, raw and lane and changelog, is in partition 0).
type fakeKafka struct {
	c     *kfake.Cluster
	names topics.Names
}

func newFakeKafka(t *testing.T) *fakeKafka { return newFakeKafkaN(t, 1) }

// newFakeKafkaN has n partitions per topic; produce with produceKeyed then,
// so every key is in the same partition of every topic.
func newFakeKafkaN(t *testing.T, n int32) *fakeKafka {
	t.Helper()
	sched, err := retry.ParseSchedule("1s,2s")
	if err != nil {
		t.Fatal(err)
	}
	names := topics.NewNames("", sched.Names())
	all := append([]string{names.Raw, names.Changelog, names.Outcomes, names.DLQ, names.Lane("slowcrm"), names.Lane("fastpay"), names.Control}, names.Retry...)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(n, all...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeKafka{c: c, names: names}
}

func (f *fakeKafka) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kafkatest.NewClient(f.c.ListenAddrs())(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes ingest records for provider to raw partition 0, in order.
func (f *fakeKafka) produce(t *testing.T, provider string, keys ...string) {
	t.Helper()
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, k := range keys {
		r := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: []byte(k), Value: []byte(`{"id":"` + k + `"}`)}
		headers.Set(r, headers.Provider, provider)
		headers.Set(r, headers.Origin, headers.OriginIngest)
		headers.SetAttempt(r, 1)
		headers.SetTime(r, headers.ReceivedAt, time.Now())
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// produceKeyed writes ingest records for provider, partitioned by key as
// ingest partitions them.
func (f *fakeKafka) produceKeyed(t *testing.T, provider string, keys ...string) {
	t.Helper()
	cl := f.client(t)
	for _, k := range keys {
		r := &kgo.Record{Topic: f.names.Raw, Key: []byte(k), Value: []byte(`{"id":"` + k + `"}`)}
		headers.Set(r, headers.Provider, provider)
		headers.Set(r, headers.Origin, headers.OriginIngest)
		headers.SetAttempt(r, 1)
		headers.SetTime(r, headers.ReceivedAt, time.Now())
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// outcomes reads the committed outcomes, by key.
func (f *fakeKafka) outcomes(t *testing.T) map[string][]outcome.Outcome {
	t.Helper()
	cl := f.client(t, kgo.ConsumeTopics(f.names.Outcomes), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	out := map[string][]outcome.Outcome{}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		fs.EachRecord(func(r *kgo.Record) {
			var o outcome.Outcome
			if err := json.Unmarshal(r.Value, &o); err != nil {
				t.Errorf("outcome %s: %v", r.Value, err)
			}
			out[o.Key] = append(out[o.Key], o)
		})
	}
}

// committed is the processor group's committed offset and metadata of raw
// partition 0.
func (f *fakeKafka) committed(t *testing.T) (int64, string) {
	t.Helper()
	offs, err := kadm.NewClient(f.client(t)).FetchOffsetsForTopics(context.Background(), f.names.Group(topics.GroupProcessor), f.names.Raw)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(f.names.Raw, 0)
	if !ok || o.Err != nil {
		return -1, ""
	}
	return o.At, o.Metadata
}

// count is how many of key's outcomes have status.
func count(out map[string][]outcome.Outcome, key, status string) int {
	n := 0
	for _, o := range out[key] {
		if o.Status == status {
			n++
		}
	}
	return n
}

// allDoneOnce reports whether every key has exactly one done outcome.
func allDoneOnce(out map[string][]outcome.Outcome, keys []string) bool {
	for _, k := range keys {
		if count(out, k, outcome.StatusDone) != 1 {
			return false
		}
	}
	return true
}

// counter is a destination that counts its calls per key and can hold them.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	hold  chan struct{} // nil: answer at once; else wait until closed
}

func (c *counter) Handle(ctx context.Context, d deliver.Delivery) error {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[d.Key]++
	hold := c.hold
	c.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// total is the calls made, every key.
func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.calls {
		n += k
	}
	return n
}

func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

// runProcessor starts a processor with a fresh in-memory store (so it
// restores from the changelog, as a new owner does) and returns its stop.
func runProcessor(t *testing.T, f *fakeKafka, id string, handlers map[string]deliver.Handler) (stop func() error) {
	t.Helper()
	return runProcessorWith(t, f, id, handlers, procOptions{})
}

// procOptions change runProcessor's defaults: MaxPending 1000, each
// provider normal with max_inflight 4.
type procOptions struct {
	maxPending  int
	priority    map[string]string // provider -> class
	maxInflight map[string]int    // provider -> destination.max_inflight, fixed (adaptive: false)
	standbys    int               // StandbyReplicas
	// standbyEvery is Config.StandbyEvery; 0: its default.
	standbyEvery time.Duration
	store        **state.Store // set to the processor's store
	metrics      *prometheus.Registry
	health       *obs.Health // the processor's health; default a new one
	// cancel, when set, is given the cancel of the processor's context: a
	// stop (what SIGTERM does) the test can start from anywhere, a kfake
	// control function included, without waiting for it.
	cancel *context.CancelFunc
	// exited, when set, gets what Run returned, as soon as it returns.
	exited chan error
	// maxRecordBytes is Config.MaxRecordBytes; 0: its default.
	maxRecordBytes int
	// providersYAML, when set, is the providers file (routes tests);
	// handlers are then keyed as the Router takes them.
	providersYAML string
	// files are written beside the providers file (name -> content): the
	// transforms it names.
	files map[string]string
	// holdsEvery is Config.HoldsEvery; 0: its default.
	holdsEvery time.Duration
	// eventTypeLabels is Config.EventTypeLabels.
	eventTypeLabels int
}

func runProcessorWith(t *testing.T, f *fakeKafka, id string, handlers map[string]deliver.Handler, o procOptions) (stop func() error) {
	t.Helper()
	dir := t.TempDir()
	yml := "providers:\n"
	for name := range handlers {
		slots, fixed := o.maxInflight[name]
		yml += fmt.Sprintf("  %s: {preset: stripe, secret_env: [S], priority: %s, destination: {url: \"http://%s.invalid/\", max_inflight: %d, adaptive: %v}}\n",
			name, cmp.Or(o.priority[name], "normal"), name, cmp.Or(slots, 4), !fixed)
	}
	if o.providersYAML != "" {
		yml = o.providersYAML
	}
	for name, content := range o.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := providers.LoadWithoutSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.Open(state.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if o.store != nil {
		*o.store = store
	}
	if o.metrics == nil {
		o.metrics = prometheus.NewRegistry()
	}
	sched, _ := retry.ParseSchedule("1s,2s")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	conn := kafkatest.Opts(t, f.c.ListenAddrs())
	p, err := New(Config{
		Names: f.names, Schedule: sched, Providers: reg, Router: deliver.NewRouter(handlers), Store: store,
		MaxInflight: 4, MaxPending: cmp.Or(o.maxPending, 1000), MaxPendingBytes: 1 << 20, MaxBatch: 50, ShutdownGrace: 50 * time.Millisecond,
		MaxRecordBytes:  o.maxRecordBytes,
		SessionOpts:     conn,
		NewClient:       kafkatest.NewClient(f.c.ListenAddrs()),
		TransactionalID: "hookline-processor-" + id, InstanceID: id,
		StandbyReplicas: o.standbys,
		StandbyEvery:    o.standbyEvery,
		HoldsEvery:      o.holdsEvery,
		EventTypeLabels: o.eventTypeLabels,
		Logger:          log, Registry: o.metrics, Health: cmp.Or(o.health, obs.NewHealth("restore", "control")),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if o.cancel != nil {
		*o.cancel = cancel
	}
	done := make(chan error, 1)
	go func() {
		err := p.Run(ctx)
		done <- err
		if o.exited != nil {
			o.exited <- err
		}
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			runErr = errors.Join(runErr, store.Close())
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// Long enough for a loaded machine (make test runs the packages side by
	// side with the broker); a condition met returns at once.
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A slow call stays in flight while the records behind it in its partition
// commit; the partition's committed offset stays at the slow record, with
// the finished ones named in the metadata, and a new owner runs only the
// slow one again.
func TestSlowCallDoesNotHoldCommits(t *testing.T) {
	f := newFakeKafka(t)
	slow := &counter{hold: make(chan struct{})}
	fast := &counter{}
	stop := runProcessor(t, f, "p1", map[string]deliver.Handler{"slowcrm": slow, "fastpay": fast})

	f.produce(t, "fastpay", "f0")
	f.produce(t, "slowcrm", "s1")
	var keys []string
	for i := 1; i <= 20; i++ {
		keys = append(keys, fmt.Sprintf("f%d", i))
	}
	f.produce(t, "fastpay", keys...)
	waitFor(t, "the fast records' outcomes", func() bool { return len(f.outcomes(t)) == 21 })
	if slow.count("s1") != 1 {
		t.Fatalf("slow destination called %d times, want 1 (in flight)", slow.count("s1"))
	}
	out := f.outcomes(t)
	if _, ok := out["s1"]; ok {
		t.Fatal("the slow record has an outcome while its call is in flight")
	}
	off, meta := f.committed(t)
	if off != 1 {
		t.Fatalf("committed offset %d, want 1 (the slow record, the lowest unfinished)", off)
	}
	if runs := offsets.DecodeDone(meta); len(runs) != 1 || runs[0] != (offsets.Run{From: 1, To: 21}) {
		t.Fatalf("metadata %q = %v, want the 20 finished offsets above it", meta, runs)
	}

	// The processor stops with the slow call in flight: it is cancelled
	// after the grace, leaving no outcome and no attempt.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if off2, _ := f.committed(t); off2 != 1 {
		t.Fatalf("after the stop the committed offset is %d, want 1", off2)
	}
	close(slow.hold)
	runProcessor(t, f, "p2", map[string]deliver.Handler{"slowcrm": slow, "fastpay": fast})
	waitFor(t, "the slow record's outcome", func() bool { return len(f.outcomes(t)["s1"]) == 1 })
	out = f.outcomes(t)
	for _, k := range append(keys, "f0") {
		if fast.count(k) != 1 || len(out[k]) != 1 || out[k][0].Status != outcome.StatusDone {
			t.Errorf("%s: %d calls, outcomes %+v; want one call and one done outcome", k, fast.count(k), out[k])
		}
	}
	if slow.count("s1") != 2 || out["s1"][0].Status != outcome.StatusDone || out["s1"][0].Attempt != 1 {
		t.Fatalf("slow record: %d calls, outcome %+v; want 2 calls (the first abandoned, charged no attempt) and done at attempt 1",
			slow.count("s1"), out["s1"])
	}
	waitFor(t, "the committed offset to pass everything", func() bool { off, _ := f.committed(t); return off == 22 })
}

// A transaction that does not commit keeps its results for the next one:
// nothing is read or called again.
func TestAbortedTransactionIsNotCalledAgain(t *testing.T) {
	f := newFakeKafka(t)
	var refused atomic.Int32
	f.c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Add(1) > 2 {
			return nil, nil, false
		}
		f.c.KeepControl()
		r := req.(*kmsg.TxnOffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	fast := &counter{}
	runProcessor(t, f, "p1", map[string]deliver.Handler{"fastpay": fast})
	keys := []string{"a", "b", "c", "d", "e"}
	f.produce(t, "fastpay", keys...)
	waitFor(t, "every outcome", func() bool { return len(f.outcomes(t)) == len(keys) })
	if refused.Load() < 2 {
		t.Fatalf("the fault hook refused %d commits, want 2", refused.Load())
	}
	out := f.outcomes(t)
	for _, k := range keys {
		if fast.count(k) != 1 || len(out[k]) != 1 {
			t.Errorf("%s: %d calls, %d outcomes; want 1 and 1", k, fast.count(k), len(out[k]))
		}
	}
}

// A destination with no room parks its records in its lane topic: their raw
// offsets finish (the partition's committed offset passes them), nothing
// else waits, and each is called once when the destination has room again,
// even across a restart.
func TestFullDestinationParksInItsLane(t *testing.T) {
	f := newFakeKafka(t)
	slow := &counter{hold: make(chan struct{})}
	fast := &counter{}
	handlers := map[string]deliver.Handler{"slowcrm": slow, "fastpay": fast}
	stop := runProcessor(t, f, "p1", handlers)

	var slowKeys []string
	for i := range 12 {
		slowKeys = append(slowKeys, fmt.Sprintf("s%d", i))
	}
	f.produce(t, "slowcrm", slowKeys...) // 4 in flight; the 8 others wait for a slot, then are parked
	f.produce(t, "fastpay", "f1", "f2", "f3")
	waitFor(t, "8 parked outcomes and the fast ones", func() bool {
		out := f.outcomes(t)
		parked := 0
		for _, k := range slowKeys {
			for _, o := range out[k] {
				if o.Status == outcome.StatusParked && o.Lane == f.names.Lane("slowcrm") {
					parked++
				}
			}
		}
		return parked == 8 && len(out["f3"]) == 1
	})
	// The four in flight are whichever took the slots first; the committed
	// offset is the lowest of theirs (sN is at offset N).
	lowest := -1
	for i, k := range slowKeys {
		if slow.count(k) > 0 {
			lowest = i
			break
		}
	}
	if off, _ := f.committed(t); off != int64(lowest) {
		t.Fatalf("committed offset %d, want %d (the lowest record in flight)", off, lowest)
	}
	// Restart while four calls are in flight and four records are parked.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	close(slow.hold)
	runProcessor(t, f, "p2", handlers)
	waitFor(t, "every slow record done", func() bool {
		return allDoneOnce(f.outcomes(t), slowKeys)
	})
	out := f.outcomes(t)
	for _, k := range slowKeys {
		calls, parked := slow.count(k), count(out, k, outcome.StatusParked)
		// The 4 in flight at the stop were cancelled (no attempt) and are
		// called again; the others are called once.
		if calls < 1 || calls > 2 || parked > 1 {
			t.Errorf("%s: %d calls, outcomes %+v", k, calls, out[k])
		}
		for _, o := range out[k] {
			if o.Status == outcome.StatusDone && o.Attempt != 1 {
				t.Errorf("%s done at attempt %d, want 1: parking and waiting use no attempt", k, o.Attempt)
			}
		}
	}
	for _, k := range []string{"f1", "f2", "f3"} {
		if fast.count(k) != 1 || len(out[k]) != 1 {
			t.Errorf("%s: %d calls, %d outcomes; want 1 and 1", k, fast.count(k), len(out[k]))
		}
	}
}

// sleeper is a destination that takes d per call and counts calls per key.
type sleeper struct {
	counter
	d time.Duration
}

func (s *sleeper) Handle(ctx context.Context, d deliver.Delivery) error {
	if err := s.counter.Handle(ctx, d); err != nil {
		return err
	}
	select {
	case <-time.After(s.d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Many records for a destination with four slots: most are parked, and
// every one is called once and done once.
func TestParkedBacklogDrains(t *testing.T) {
	f := newFakeKafka(t)
	slow := &sleeper{d: 20 * time.Millisecond} // 300 × 20 ms / 4 slots: most wait over a second, and are parked
	runProcessor(t, f, "p1", map[string]deliver.Handler{"slowcrm": slow})
	var keys []string
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("k%03d", i))
	}
	f.produce(t, "slowcrm", keys...)
	waitFor(t, "every key done", func() bool {
		return allDoneOnce(f.outcomes(t), keys)
	})
	out := f.outcomes(t)
	parked := 0
	for _, k := range keys {
		statuses := map[string]int{}
		for _, o := range out[k] {
			statuses[o.Status]++
		}
		parked += statuses[outcome.StatusParked]
		if slow.count(k) != 1 || statuses[outcome.StatusDone] != 1 || statuses[outcome.StatusDuplicate] != 0 {
			t.Errorf("%s: %d calls, outcomes %v", k, slow.count(k), statuses)
		}
	}
	if parked == 0 {
		t.Fatal("nothing was parked: the test did not fill the destination")
	}
	t.Logf("%d of %d records parked", parked, len(keys))
}

// An operator's pause holds a provider's calls (its records are parked) and
// leaves the others running; resume calls each parked record once; a drain
// rate caps the calls.
func TestPauseResumeDrain(t *testing.T) {
	f := newFakeKafka(t)
	slow, fast := &counter{}, &counter{}
	cl := f.client(t)
	set := func(s control.Setting) {
		t.Helper()
		if err := control.Write(context.Background(), cl, f.names.Control, s); err != nil {
			t.Fatal(err)
		}
	}
	set(control.Setting{Provider: "slowcrm", Paused: true, At: time.Now()})
	runProcessor(t, f, "p1", map[string]deliver.Handler{"slowcrm": slow, "fastpay": fast})
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("s%d", i))
	}
	f.produce(t, "slowcrm", keys...)
	f.produce(t, "fastpay", "f1")
	var seen map[string][]outcome.Outcome
	defer func() {
		if t.Failed() {
			t.Logf("outcomes seen: %+v", seen)
		}
	}()
	waitFor(t, "fastpay done and slowcrm parked", func() bool {
		seen = f.outcomes(t)
		parked := 0
		for _, k := range keys {
			if len(seen[k]) == 1 && seen[k][0].Status == outcome.StatusParked && seen[k][0].Error == admission.ErrPaused.Error() {
				parked++
			}
		}
		return parked == len(keys) && len(seen["f1"]) == 1
	})
	for _, k := range keys {
		if slow.count(k) != 0 {
			t.Fatalf("%s called %d times while its provider was paused", k, slow.count(k))
		}
	}
	start := time.Now()
	set(control.Setting{Provider: "slowcrm", Rate: 20, At: time.Now()})
	waitFor(t, "every parked record done", func() bool {
		for _, k := range keys {
			if slow.count(k) != 1 {
				return false
			}
		}
		return true
	})
	// 10 calls at 20/s with a burst of 1 take at least 9 × 50 ms.
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("10 calls drained in %s: the 20/s rate was not applied", took)
	}
}

// A transaction that cannot be ended (the coordinator answers EndTxn with
// an error: the state of the session is then unknown) replaces the
// session: the new one fences the old producer, restores, and reads from
// the committed offset; every key ends done exactly once.
func TestBrokenEndReplacesTheSession(t *testing.T) {
	f := newFakeKafka(t)
	var failed atomic.Int32
	f.c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || failed.Add(1) > 1 {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	fast := &counter{}
	runProcessor(t, f, "p1", map[string]deliver.Handler{"fastpay": fast})
	keys := []string{"a", "b", "c", "d"}
	f.produce(t, "fastpay", keys...)
	waitFor(t, "every key done", func() bool {
		out := f.outcomes(t)
		for _, k := range keys {
			if len(out[k]) == 0 {
				return false
			}
		}
		return true
	})
	if failed.Load() < 1 {
		t.Fatal("the fault hook never failed an EndTxn")
	}
	out := f.outcomes(t)
	for _, k := range keys {
		if len(out[k]) != 1 || out[k][0].Status != outcome.StatusDone || fast.count(k) > 2 {
			t.Errorf("%s: outcomes %+v, %d calls; want one done (at most one repeated call)", k, out[k], fast.count(k))
		}
	}
}

// A partition revoked while calls of its records are in flight: the calls
// are cancelled (no attempt, no outcome), the new owner restores and runs
// them, and no key ends twice.
func TestRevokeWithCallsInFlight(t *testing.T) {
	f := newFakeKafkaN(t, 2)
	slow := &counter{hold: make(chan struct{})}
	runProcessor(t, f, "p1", map[string]deliver.Handler{"slowcrm": slow})
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	f.produceKeyed(t, "slowcrm", keys...)
	waitFor(t, "4 calls in flight", func() bool {
		n := 0
		for _, k := range keys {
			n += slow.count(k)
		}
		return n >= 4
	})
	runProcessor(t, f, "p2", map[string]deliver.Handler{"slowcrm": slow}) // the group rebalances
	time.Sleep(500 * time.Millisecond)
	close(slow.hold)
	waitFor(t, "every key done", func() bool {
		return allDoneOnce(f.outcomes(t), keys)
	})
	time.Sleep(300 * time.Millisecond)
	out := f.outcomes(t)
	for _, k := range keys {
		done := 0
		for _, o := range out[k] {
			if o.Status == outcome.StatusDone {
				done++
				if o.Attempt != 1 {
					t.Errorf("%s done at attempt %d: a cancelled call used an attempt", k, o.Attempt)
				}
			}
		}
		if done != 1 || slow.count(k) > 2 {
			t.Errorf("%s: %d done outcomes, %d calls; want 1 and at most 2", k, done, slow.count(k))
		}
	}
}

// A critical provider's records are called while a low one holds the
// budget with calls that do not return: the low class keeps its share and
// parks the rest, and the critical record is read and called at once. With
// one class the reader would stop at the budget and the critical record
// would wait in raw behind the low calls.
func TestCriticalPassesALowClassHoldingTheBudget(t *testing.T) {
	f := newFakeKafka(t)
	slow, fast := &counter{hold: make(chan struct{})}, &counter{}
	handlers := map[string]deliver.Handler{"slowcrm": slow, "fastpay": fast}
	runProcessorWith(t, f, "p1", handlers, procOptions{
		maxPending:  40,
		priority:    map[string]string{"slowcrm": "low", "fastpay": "critical"},
		maxInflight: map[string]int{"slowcrm": 100},
	})
	var slowKeys []string
	for i := range 60 {
		slowKeys = append(slowKeys, fmt.Sprintf("s%d", i))
	}
	f.produce(t, "slowcrm", slowKeys...)
	waitFor(t, "40 low calls in flight", func() bool { return slow.total() == 40 })
	f.produce(t, "fastpay", "f1", "f2", "f3")
	waitFor(t, "the critical records done while the low calls hang", func() bool {
		return allDoneOnce(f.outcomes(t), []string{"f1", "f2", "f3"})
	})
	if n := slow.total(); n > 40 {
		t.Fatalf("%d low calls, want at most 40 (the budget) while they hang", n)
	}
	close(slow.hold)
	waitFor(t, "every low record done", func() bool { return allDoneOnce(f.outcomes(t), slowKeys) })
	out := f.outcomes(t)
	parked := 0
	for _, k := range slowKeys {
		if c := slow.count(k); c != 1 {
			t.Errorf("%s: %d calls, want 1", k, c)
		}
		for _, o := range out[k] {
			if o.Status == outcome.StatusParked && o.Error == admission.ErrClassShare.Error() {
				parked++
			}
		}
	}
	if parked < 20 {
		t.Fatalf("%d low records parked for their class's share, want at least the 20 over the budget", parked)
	}
}
