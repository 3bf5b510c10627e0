package txnloop

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	rawTopic       = "raw"
	changelogTopic = "changelog"
	outTopic       = "out"
	group          = "g"
)

// result is a test result: a record read and the records it writes.
type result struct {
	r   *kgo.Record
	out Produced
}

func (r *result) Record() *kgo.Record { return r.r }
func (r *result) Produced() *Produced { return &r.out }

// fakeResults is a hand-written Results: a queue, and what the loop told it.
type fakeResults struct {
	mu        sync.Mutex
	waiting   []*result
	dropped   []*result
	requeued  [][]*result
	applied   map[int32]int64
	committed chan []*result
}

func (f *fakeResults) Waiting() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiting), nil
}

func (f *fakeResults) Take(n int) []*result {
	f.mu.Lock()
	defer f.mu.Unlock()
	n = min(n, len(f.waiting))
	b := append([]*result(nil), f.waiting[:n]...)
	f.waiting = f.waiting[n:]
	return b
}

func (f *fakeResults) Requeue(b []*result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requeued = append(f.requeued, b)
	f.waiting = append(b, f.waiting...)
}

func (f *fakeResults) Drop(r *result) { f.dropped = append(f.dropped, r) }

func (f *fakeResults) Apply(_ []*result, cp map[int32]int64) error {
	f.applied = cp
	return nil
}

func (f *fakeResults) Committed(b []*result) { f.committed <- b }

// fakeOffsets is a hand-written Offsets with function fields.
type fakeOffsets struct {
	keep      func(*result) bool
	points    map[TopicPart]Point
	doomed    chan struct{}
	aborted   []*result
	committed map[TopicPart]Point
}

func (f *fakeOffsets) Begin(b []*result, drop func(*result)) []*result {
	var kept []*result
	for _, r := range b {
		if f.keep != nil && !f.keep(r) {
			drop(r)
			continue
		}
		kept = append(kept, r)
	}
	return kept
}
func (f *fakeOffsets) Points() map[TopicPart]Point { return f.points }
func (f *fakeOffsets) Doomed() <-chan struct{}     { return f.doomed }
func (f *fakeOffsets) Aborted(b []*result)         { f.aborted = append(f.aborted, b...) }
func (f *fakeOffsets) Committed(_ []*result, p map[TopicPart]Point) {
	f.committed = p
}

// harness is a kfake cluster, a transactional session in its group (it
// owns raw partition 0) and a loop over fake results and offsets.
type harness struct {
	c       *kfake.Cluster
	loop    *Loop[*result]
	results *fakeResults
	offsets *fakeOffsets
	txns    *prometheus.CounterVec
	wake    chan struct{}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, rawTopic, changelogTopic, outTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	assigned := make(chan struct{})
	var once sync.Once
	tx, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(rawTopic),
		kgo.TransactionalID("txnloop-test"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			cl.PauseFetchPartitions(m) // as consume's session: it never fetches
			once.Do(func() { close(assigned) })
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tx.Close)
	select {
	case <-assigned:
	case <-time.After(10 * time.Second):
		t.Fatal("the session was not assigned raw[0]")
	}
	h := &harness{
		c:       c,
		results: &fakeResults{committed: make(chan []*result, 8)},
		offsets: &fakeOffsets{doomed: make(chan struct{})},
		txns:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t"}, []string{"result"}),
		wake:    make(chan struct{}, 1),
	}
	h.loop = New(Config{
		Changelog:      changelogTopic,
		Topics:         []string{rawTopic},
		MaxRecordBytes: 1 << 20,
		Wake:           h.wake,
		Freed:          func() {},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Transactions:   h.txns,
		Seconds:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "s"}),
		Records:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "r"}),
	}, tx, h.results, h.offsets)
	return h
}

// count is how many transactions ended with result.
func (h *harness) count(t *testing.T, result string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.txns)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// add queues a result of raw offset off writing a changelog and an out
// record.
func (h *harness) add(off int64, key string) *result {
	res := &result{r: &kgo.Record{Topic: rawTopic, Partition: 0, Offset: off, Key: []byte(key)}}
	res.out.Records = []*kgo.Record{
		{Topic: changelogTopic, Key: []byte(key), Value: []byte("state")},
		{Topic: outTopic, Key: []byte(key), Value: []byte("outcome")},
	}
	h.results.waiting = append(h.results.waiting, res)
	return res
}

// committedKeys reads topic read_committed: the keys of its records.
func (h *harness) committedKeys(t *testing.T, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var keys []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return keys
		}
		fs.EachRecord(func(r *kgo.Record) { keys = append(keys, string(r.Key)) })
	}
}

// groupOffset is the group's committed offset of raw[0] and its metadata.
func (h *harness) groupOffset(t *testing.T) (int64, string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(rawTopic, 0)
	if !ok {
		return -1, ""
	}
	return o.At, o.Metadata
}

// TestCommitWritesResultsAndRewritesOffsets: a commit produces each kept
// result's records in one transaction, drops a result Offsets.Begin does
// not keep, commits the offsets Offsets.Points gives (not franz-go's),
// and reports the changelog checkpoint and the results committed.
func TestCommitWritesResultsAndRewritesOffsets(t *testing.T) {
	h := newHarness(t)
	a, gone, b := h.add(0, "a"), h.add(1, "gone"), h.add(2, "b")
	h.offsets.keep = func(r *result) bool { return r != gone }
	h.offsets.points = map[TopicPart]Point{{rawTopic, 0}: {Offset: 3, Meta: "meta"}}
	if err := h.loop.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case batch := <-h.results.committed:
		if len(batch) != 2 || batch[0] != a || batch[1] != b {
			t.Fatalf("committed %v, want a and b", batch)
		}
	default:
		t.Fatal("Results.Committed not called")
	}
	if len(h.results.dropped) != 1 || h.results.dropped[0] != gone {
		t.Errorf("dropped %v, want the result Begin did not keep", h.results.dropped)
	}
	if h.results.applied[0] != 2 {
		t.Errorf("checkpoint %v, want changelog[0] at 2 (two records written)", h.results.applied)
	}
	if h.offsets.committed[TopicPart{rawTopic, 0}] != (Point{3, "meta"}) {
		t.Errorf("Offsets.Committed got %v", h.offsets.committed)
	}
	if got := h.committedKeys(t, outTopic); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("out holds %v, want [a b]", got)
	}
	if off, meta := h.groupOffset(t); off != 3 || meta != "meta" {
		t.Errorf("group committed raw[0] at %d %q, want 3 \"meta\"", off, meta)
	}
	if !h.loop.Committed() || h.loop.Open() {
		t.Errorf("Committed %v Open %v, want true false", h.loop.Committed(), h.loop.Open())
	}
	if n := h.count(t, "committed"); n != 1 {
		t.Errorf("%v transactions counted committed, want 1", n)
	}
}

// TestDoomedTransactionAborts: partitions revoked while a transaction is
// open make it abort: its results wait again in front (nothing is called
// again), their offsets go back to running, nothing is written, and the
// next transaction commits them.
func TestDoomedTransactionAborts(t *testing.T) {
	h := newHarness(t)
	a := h.add(0, "a")
	close(h.offsets.doomed)
	if err := h.loop.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.results.requeued) != 1 || h.results.requeued[0][0] != a || len(h.offsets.aborted) != 1 {
		t.Fatalf("requeued %v, aborted %v: want a back in the queue and its offset running", h.results.requeued, h.offsets.aborted)
	}
	if got := h.committedKeys(t, outTopic); len(got) != 0 {
		t.Errorf("out holds %v after an abort", got)
	}
	if n := h.count(t, "aborted"); n != 1 {
		t.Errorf("%v transactions counted aborted, want 1", n)
	}
	h.offsets.doomed = make(chan struct{})
	if err := h.loop.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.committedKeys(t, outTopic); len(got) != 1 || got[0] != "a" {
		t.Errorf("out holds %v after the next transaction, want [a]", got)
	}
}

// TestRunEndsTransactionsUntilCancelled: Run produces what waits, ends
// the transaction once its first produce was answered, and returns nil
// when ctx ends.
func TestRunEndsTransactionsUntilCancelled(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.loop.Run(ctx) }()
	h.results.mu.Lock()
	h.add(0, "a")
	h.results.mu.Unlock()
	h.wake <- struct{}{}
	select {
	case <-h.results.committed:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction committed")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil once ctx ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if got := h.committedKeys(t, outTopic); len(got) != 1 {
		t.Errorf("out holds %v, want [a]", got)
	}
}
