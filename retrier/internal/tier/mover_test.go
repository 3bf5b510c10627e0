package tier

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// fakeSystem is a kfake cluster with hookline's raw and tier topics.
type fakeSystem struct {
	c     *kfake.Cluster
	addrs []string
	names topics.Names
	sched retry.Schedule
}

func newFake(t *testing.T, partitions int32, tiers ...time.Duration) *fakeSystem {
	t.Helper()
	sched, err := retry.NewSchedule(tiers...)
	if err != nil {
		t.Fatal(err)
	}
	names := topics.NewNames("", sched.Names())
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, append([]string{names.Raw}, names.Retry...)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeSystem{c: c, addrs: c.ListenAddrs(), names: names, sched: sched}
}

func (f *fakeSystem) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kafkatest.NewClient(f.addrs)(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// park writes one record per due time into tier topic partition p, in order.
func (f *fakeSystem) park(t *testing.T, topic string, p int32, dues ...time.Time) []string {
	t.Helper()
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var keys []string
	for _, due := range dues {
		key := fmt.Sprintf("k-%s-%d-%d", topic, p, due.UnixNano())
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte("body " + key)}
		headers.Set(r, headers.Origin, headers.OriginIngest)
		headers.SetAttempt(r, 2)
		headers.SetTime(r, headers.DueAt, due)
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return keys
}

// arrival is a record read from raw and when the reader saw it.
type arrival struct {
	r    *kgo.Record
	seen time.Time
}

// rawReader collects raw's records as they arrive.
type rawReader struct {
	mu   sync.Mutex
	recs []arrival
}

func (f *fakeSystem) readRaw(t *testing.T) *rawReader {
	cl := f.client(t, kgo.ConsumeTopics(f.names.Raw), kgo.FetchMaxWait(100*time.Millisecond))
	rr := &rawReader{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			rr.mu.Lock()
			for _, r := range fs.Records() {
				rr.recs = append(rr.recs, arrival{r, now})
			}
			rr.mu.Unlock()
		}
	}()
	return rr
}

func (rr *rawReader) wait(t *testing.T, n int, timeout time.Duration) []arrival {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rr.mu.Lock()
		got := append([]arrival(nil), rr.recs...)
		rr.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records moved within %s", len(got), n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOnTime fails when a record arrived before its due-at, or more than
// late after it when it came due after from (the mover was running then).
func checkOnTime(t *testing.T, got []arrival, late time.Duration, from time.Time) {
	t.Helper()
	var worst time.Duration
	defer func() { t.Logf("%d records moved, none early; worst lateness %s", len(got), worst) }()
	for _, a := range got {
		due, err := headers.GetTime(a.r, headers.DueAt)
		if err != nil {
			t.Fatalf("moved record lost its due-at: %v", err)
		}
		if a.r.Timestamp.Before(due) || a.seen.Before(due) {
			t.Fatalf("%s moved early: due %s, moved %s, seen %s", a.r.Key, due, a.r.Timestamp, a.seen)
		}
		if due.After(from) {
			worst = max(worst, a.seen.Sub(due))
		}
		if due.After(from) && a.seen.Sub(due) > late {
			t.Fatalf("%s moved %s after its due time (bound %s)", a.r.Key, a.seen.Sub(due), late)
		}
		if headers.Value(a.r, headers.Origin) != headers.OriginRetry || headers.Value(a.r, headers.Attempt) != "2" {
			t.Fatalf("%s moved with origin %q attempt %q", a.r.Key, headers.Value(a.r, headers.Origin), headers.Value(a.r, headers.Attempt))
		}
		if string(a.r.Value) != "body "+string(a.r.Key) {
			t.Fatalf("%s moved with value %q", a.r.Key, a.r.Value)
		}
	}
}

// fetchCounter counts fetch requests written to brokers.
type fetchCounter struct{ n atomic.Int64 }

func (c *fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Fetch) {
		c.n.Add(1)
	}
}

// runMover runs a mover until the test ends or stop is called.
func (f *fakeSystem) runMover(t *testing.T, opts ...kgo.Opt) (mv *Mover, stop func()) {
	t.Helper()
	mv, err := New(Config{
		Names:       f.names,
		Schedule:    f.sched,
		ClientOpts:  kafkatest.Opts(t, f.addrs, append([]kgo.Opt{kgo.HeartbeatInterval(200 * time.Millisecond)}, opts...)...),
		Logger:      slog.New(slog.NewTextHandler(testWriter(t), nil)),
		Registry:    prometheus.NewRegistry(),
		LagInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mv.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return mv, stop
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fakeSystem) committed(t *testing.T) map[string]map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(f.client(t))
	offs, err := adm.FetchOffsets(context.Background(), f.names.Group(topics.GroupRetrier))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

// TestMovesWhenDueAndCommitsOnlyMoved: records already due move at once;
// the others each at their own due time, never before; the committed offset
// never passes a record that was not moved; records behind a head that is
// not due wait for it.
func TestMovesWhenDueAndCommitsOnlyMoved(t *testing.T) {
	f := newFake(t, 2, time.Second, 2*time.Second)
	now := time.Now()
	t1 := f.names.Retry[0]
	f.park(t, t1, 0, now.Add(-time.Second), now.Add(1500*time.Millisecond), now.Add(1500*time.Millisecond), now.Add(2500*time.Millisecond))
	f.park(t, t1, 1, now.Add(time.Second))
	f.park(t, f.names.Retry[1], 0, now.Add(2*time.Second))
	raw := f.readRaw(t)
	mv, _ := f.runMover(t)

	first := raw.wait(t, 1, 10*time.Second)
	if string(first[0].r.Key) != fmt.Sprintf("k-%s-0-%d", t1, now.Add(-time.Second).UnixNano()) {
		t.Fatalf("first moved %s, want the record already due", first[0].r.Key)
	}
	waitFor(t, "partitions held", 5*time.Second, func() bool { p, _ := mv.holds.paused(); return len(p) == 3 })
	// Offset 0's commit lands a moment after its record can be read; the
	// commit never passes offset 1, which is not due yet.
	deadline := time.Now().Add(5 * time.Second)
	for c := f.committed(t)[t1][0]; c != 1; c = f.committed(t)[t1][0] {
		if c > 1 || time.Now().After(deadline) {
			t.Fatalf("committed %d on %s[0] while only offset 0 moved, want 1", c, t1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := raw.wait(t, 6, 10*time.Second)
	checkOnTime(t, got, time.Second, first[0].seen)
	// The mover commits a move's offset after its produce was answered:
	// the last record can be read a moment before its commit lands.
	deadline = time.Now().Add(5 * time.Second)
	for c := f.committed(t); c[t1][0] != 4 || c[t1][1] != 1 || c[f.names.Retry[1]][0] != 1; c = f.committed(t) {
		if time.Now().After(deadline) {
			t.Fatalf("committed %v 5s after every record moved, want %s[0] 4, %s[1] 1, %s[0] 1", c, t1, t1, f.names.Retry[1])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoFetchWhileAllPaused: once every partition waits for its head, the
// client sends no fetch request at all.
func TestNoFetchWhileAllPaused(t *testing.T) {
	f := newFake(t, 3, time.Minute)
	for p := int32(0); p < 3; p++ {
		f.park(t, f.names.Retry[0], p, time.Now().Add(time.Minute))
	}
	var fc fetchCounter
	mv, _ := f.runMover(t, kgo.WithHooks(&fc))
	waitFor(t, "every partition held", 10*time.Second, func() bool { p, _ := mv.holds.paused(); return len(p) == 3 })
	time.Sleep(300 * time.Millisecond) // a fetch already in flight may still be written
	before := fc.n.Load()
	if before == 0 {
		t.Fatal("no fetch counted at all: the hook is not wired")
	}
	time.Sleep(2 * time.Second) // eight long-polls at the default FetchMaxWait if anything were unpaused
	if d := fc.n.Load() - before; d != 0 {
		t.Fatalf("%d fetch requests in 2s while every partition was paused", d)
	}
	if o := mv.holds.overdue(); o != 0 {
		t.Fatalf("overdue %s with nothing due", o)
	}
}

// TestFailedMoveIsNotCommitted: when Kafka refuses the move, nothing is
// committed; the partition is rewound and the record moves after a backoff.
func TestFailedMoveIsNotCommitted(t *testing.T) {
	f := newFake(t, 1, time.Second)
	f.park(t, f.names.Retry[0], 0, time.Now().Add(-time.Second))
	var refused atomic.Int32
	f.c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.ProduceRequest)
		if refused.Load() > 0 {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	raw := f.readRaw(t)
	mv, _ := f.runMover(t)
	waitFor(t, "the refused move", 10*time.Second, func() bool { return refused.Load() > 0 })
	waitFor(t, "the partition parked for the backoff", 5*time.Second, func() bool { p, _ := mv.holds.paused(); return len(p) == 1 })
	if c := f.committed(t)[f.names.Retry[0]]; len(c) != 0 && c[0] > 0 {
		t.Fatalf("committed %v after a refused move", c)
	}
	got := raw.wait(t, 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("%d records in raw, want 1", len(got))
	}
	waitFor(t, "the commit after the retried move", 5*time.Second, func() bool { return f.committed(t)[f.names.Retry[0]][0] == 1 })
}

// TestRevokedWhilePausedResumesOnNewOwner: a second member joins while the
// first holds every partition; the partitions it takes over move on time
// there, and when it leaves, the first member (which held them before)
// moves the later records on time too.
func TestRevokedWhilePausedResumesOnNewOwner(t *testing.T) {
	const parts = 4
	f := newFake(t, parts, time.Second)
	start := time.Now()
	due1, due2 := start.Add(4*time.Second), start.Add(8*time.Second)
	for p := int32(0); p < parts; p++ {
		f.park(t, f.names.Retry[0], p, due1, due2)
	}
	raw := f.readRaw(t)
	a, _ := f.runMover(t)
	waitFor(t, "a holds every partition", 5*time.Second, func() bool { p, _ := a.holds.paused(); return len(p) == parts })
	b, stopB := f.runMover(t)
	waitFor(t, "b holds the partitions it took over", 3500*time.Millisecond, func() bool {
		p, n := b.holds.paused()
		return n > 0 && len(p) == n
	})
	if _, n := a.holds.paused(); n == parts {
		t.Fatal("a still owns every partition after b joined")
	}
	got := raw.wait(t, parts, 6*time.Second)
	checkOnTime(t, got, time.Second, start)
	stopB() // its partitions go back to a, which held them before
	got = raw.wait(t, 2*parts, 8*time.Second)
	checkOnTime(t, got, time.Second, start)
	if time.Now().After(due2.Add(time.Second)) {
		t.Fatalf("second round later than 1s")
	}
}

// testWriter sends the mover's log to the test log when -v is given.
func testWriter(t *testing.T) io.Writer {
	if !testing.Verbose() {
		return io.Discard
	}
	return tlog{t}
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }
