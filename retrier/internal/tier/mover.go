// Package tier is the retrier's delay line (DESIGN §7): a consumer group over
// every webhooks.retry.<tier> topic that moves each record back to
// webhooks.raw once its hookline.due-at has passed, and never before.
//
// Records of a tier partition arrive in due order, so only the head of each
// partition matters. (Jitter, or processors with skewed clocks, can put a
// record due earlier behind one due later: it then waits for the head. Late,
// never early.) One poll loop, with rebalances blocked while it works
// (kgo.BlockRebalanceOnPoll), does for every partition it polled:
//
//   - the records due now, from the front, are re-produced to webhooks.raw
//     (idempotent producer, acks=all, exact key, value and headers, origin
//     set to retry), then their offsets are committed, and nothing else:
//     auto-commit is off, so an offset is committed only once its record is
//     in webhooks.raw;
//   - at the first record not due, the partition is paused, its position is
//     rewound to that record (so it is fetched again later, and no later
//     record is looked at), and a timer (time.AfterFunc) resumes it at the
//     record's due time. The record is judged again when it comes back.
//
// While every partition is paused the client sends no fetch request at all:
// waiting costs a few timers. A crash between a move and its commit moves the
// record again; the processor's attempt check (DESIGN §6) skips the copy.
//
// Rebalances go through holds.assign and holds.release, which clear the
// pause and stop the timer of every partition whose owner changes.
package tier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/fetcherr"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/pkg/tracing"
)

// Defaults of the tunables in Config.
const (
	// DefaultFetchMaxWait bounds how long a broker holds a fetch for
	// partitions with no new data. A partition resumed while such a fetch is
	// in flight is only fetched when it returns, so this bounds the
	// lateness a resume can add. Its cost: while any partition is caught
	// up (not paused, nothing new), the client sends four empty fetches a
	// second per broker. While every partition is paused it sends none.
	DefaultFetchMaxWait = 250 * time.Millisecond
	// DefaultFetchMaxBytes bounds one fetch response, hence one poll and one
	// move (the records produced and committed between two polls, while
	// rebalances wait) and the memory they take: a fetch holds compressed
	// batches, which decompress to several times this. The broker still
	// returns at least one batch, so a record of any allowed size passes.
	// Every poll takes the whole buffered fetch: evaluating every
	// partition of a fetch at once means one rewind (SetOffsets, which
	// drops whatever else is buffered) per fetch, not per partition.
	DefaultFetchMaxBytes = 4 << 20
	// DefaultSessionTimeout is how long the group waits for a member that
	// died before giving its partitions to the others; records due on them
	// meanwhile are late by up to this much.
	DefaultSessionTimeout = 15 * time.Second
	// DefaultLagInterval is how often the parked-records gauge is refreshed.
	DefaultLagInterval = 15 * time.Second
)

// moveTimeout bounds one move's produce and commit. They do not stop on
// shutdown: the move in progress finishes, then the loop stops.
const moveTimeout = time.Minute

// Config is what the mover needs; every field is required unless noted.
type Config struct {
	Names    topics.Names
	Schedule retry.Schedule
	// ClientOpts are the connection options plus anything a test or main
	// adds (kprom hooks, a ClientID). The mover adds the group, the topics,
	// read_committed, manual commits and the rebalance callbacks.
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
	Registry   prometheus.Registerer
	// Health, when set, gets check "kafka": failing while moves fail.
	Health *obs.Health
	// Tracer traces each move (trace.go); nil: off.
	Tracer *tracing.Tracer
	// MaxRecordBytes is the largest record the topics take
	// (topics.Env.MaxRecordBytes): a copy for raw is made to fit it
	// (headers.Fit) before it is produced. Zero: the default body limit
	// plus topics.HeaderRoom.
	MaxRecordBytes int
	// Optional tunables; zero means the default above.
	FetchMaxWait   time.Duration
	FetchMaxBytes  int32
	SessionTimeout time.Duration
	LagInterval    time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

type tierInfo struct {
	name  string
	delay time.Duration
}

// Mover runs the delay line.
type Mover struct {
	cfg     Config
	tiers   map[string]tierInfo // by topic
	m       *metrics
	holds   *holds
	backoff time.Duration // after a failed move; 0 after a good one
}

// New checks cfg and registers the metrics.
func New(cfg Config) (*Mover, error) {
	if cfg.Schedule.Len() == 0 || len(cfg.Names.Retry) != cfg.Schedule.Len() {
		return nil, fmt.Errorf("tier: %d retry topics for %d tiers: need one per tier, at least one", len(cfg.Names.Retry), cfg.Schedule.Len())
	}
	if cfg.Logger == nil || cfg.Registry == nil {
		return nil, errors.New("tier: Logger and Registry are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.FetchMaxWait = orDefault(cfg.FetchMaxWait, DefaultFetchMaxWait)
	cfg.SessionTimeout = orDefault(cfg.SessionTimeout, DefaultSessionTimeout)
	cfg.LagInterval = orDefault(cfg.LagInterval, DefaultLagInterval)
	cfg.MaxRecordBytes = cmp.Or(cfg.MaxRecordBytes, topics.DefaultMaxBodyBytes+topics.HeaderRoom)
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	mv := &Mover{cfg: cfg, tiers: map[string]tierInfo{}}
	for i, topic := range cfg.Names.Retry {
		d := cfg.Schedule.Tier(i + 1)
		mv.tiers[topic] = tierInfo{name: retry.TierName(d), delay: d}
	}
	// The client is made in Run; holds get it there, before any callback.
	mv.holds = newHolds(nil, cfg.Now)
	mv.holds.resumed = func(p tp, due time.Time) {
		cfg.Logger.Debug("partition resumed: head due", "topic", p.topic, "partition", p.partition, "tier", mv.tiers[p.topic].name, "due_at", headers.FormatTime(due))
	}
	mv.m = newMetrics(cfg.Registry, mv.holds)
	return mv, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run moves records until ctx is done. On the way out it finishes the move
// in progress and commits it, stops the timers, leaves the group and closes
// the client.
func (mv *Mover) Run(ctx context.Context) error {
	group := mv.cfg.Names.Group(topics.GroupRetrier)
	opts := append(append([]kgo.Opt(nil), mv.cfg.ClientOpts...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(mv.cfg.Names.Retry...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// The processor writes tier records in transactions: an aborted
		// one must never be moved.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(mv.cfg.FetchMaxWait),
		kgo.FetchMaxBytes(mv.cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(min(mv.cfg.FetchMaxBytes, 1<<20)),
		kgo.SessionTimeout(mv.cfg.SessionTimeout),
		kgo.RecordDeliveryTimeout(moveTimeout/2),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(topics.Partitioner()), // back to the entity's (or key's) partition
		kgo.OnPartitionsAssigned(mv.assigned),
		kgo.OnPartitionsRevoked(mv.revoked),
		kgo.OnPartitionsLost(mv.lost),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	mv.holds.attach(cl)
	defer func() {
		mv.holds.stopAll()
		cl.CloseAllowingRebalance() // leaves the group
	}()

	tierOf := make(map[string]string, len(mv.tiers))
	for topic, ti := range mv.tiers {
		tierOf[topic] = ti.name
	}
	lagCtx, stopLag := context.WithCancel(ctx)
	defer stopLag()
	go mv.m.watchLag(lagCtx, cl, group, tierOf, mv.cfg.LagInterval, mv.cfg.Logger)

	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // what was polled is neither moved nor committed
		}
		if err := fetcherr.Fatal(fs, mv.cfg.Logger); err != nil {
			return err
		}
		mv.move(ctx, cl, fs)
		cl.AllowRebalance()
	}
}

// batch is one partition's share of a move.
type batch struct {
	p       tp
	tier    tierInfo
	records []*kgo.Record
	split
	first int // index of its first record in the produced slice
}

// move handles one poll: produce what is due, commit exactly that, and
// park every partition at its first record that was not moved.
func (mv *Mover) move(ctx context.Context, cl *kgo.Client, fs kgo.Fetches) {
	log := mv.cfg.Logger
	now := mv.cfg.Now()
	var (
		batches []*batch
		out     []*kgo.Record
		spans   []trace.Span // tracing on: out's
	)
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		ti, ok := mv.tiers[fp.Topic]
		if !ok {
			return
		}
		b := &batch{p: tp{fp.Topic, fp.Partition}, tier: ti, records: fp.Records, first: len(out)}
		b.split = plan(fp.Records, ti.delay, now, func(r *kgo.Record, due time.Time, err error) {
			mv.m.badDue.Inc()
			log.Warn("record without a readable due-at: held until its timestamp plus the tier's delay",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key),
				"attempt", headers.Value(r, headers.Attempt), "tier", ti.name, "due_at", headers.FormatTime(due), "err", err)
		})
		if b.n < len(fp.Records) {
			mv.holds.pause(b.p) // stop fetching it now; parked below
		}
		for _, r := range fp.Records[:b.n] {
			o := outgoing(r, mv.cfg.Names.Raw, mv.cfg.MaxRecordBytes)
			if mv.cfg.Tracer.On() {
				spans = append(spans, mv.traceMove(ctx, r, o, ti.name))
			}
			out = append(out, o)
		}
		batches = append(batches, b)
	})

	errs := produce(ctx, cl, out)
	acked := mv.cfg.Now()
	for i, sp := range spans {
		endMove(sp, errs[i])
	}

	commits := map[string]map[int32]kgo.EpochOffset{}
	rewinds := map[string]map[int32]kgo.EpochOffset{}
	type parkAt struct {
		p      tp
		offset int64
		due    time.Time
	}
	var (
		parks   []parkAt
		failed  error
		backoff time.Duration // one per move, however many partitions failed
	)
	for _, b := range batches {
		// Moved: the records acknowledged before the first failure.
		ok := 0
		for ok < b.n && errs[b.first+ok] == nil {
			ok++
		}
		if ok > 0 {
			last := b.records[ok-1]
			setOffset(commits, b.p, last.LeaderEpoch, last.Offset+1)
			for i, r := range b.records[:ok] {
				late := acked.Sub(b.dues[i])
				mv.m.lateness.WithLabelValues(b.tier.name).Observe(late.Seconds())
				if log.Enabled(ctx, slog.LevelDebug) {
					log.Debug("moved", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key),
						"attempt", headers.Value(r, headers.Attempt), "tier", b.tier.name, "late_ms", late.Milliseconds())
				}
			}
			mv.m.moved.WithLabelValues(b.tier.name).Add(float64(ok))
			mv.holds.moved(b.p)
		}
		switch {
		case ok < b.n: // Kafka did not take a record: try again from it later
			r, err := b.records[ok], errs[b.first+ok]
			failed = errors.Join(failed, err)
			if backoff == 0 {
				backoff = mv.nextBackoff()
			}
			mv.holds.pause(b.p)
			setOffset(rewinds, b.p, r.LeaderEpoch, r.Offset)
			parks = append(parks, parkAt{b.p, r.Offset, acked.Add(backoff)})
			log.Warn("move failed: partition rewound, retried after a backoff", "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "key", string(r.Key), "attempt", headers.Value(r, headers.Attempt), "tier", b.tier.name,
				"backoff", backoff.String(), "err", err)
		case b.n < len(b.records): // the head is not due: wait for it
			r := b.records[b.n]
			setOffset(rewinds, b.p, r.LeaderEpoch, r.Offset)
			parks = append(parks, parkAt{b.p, r.Offset, b.hold})
			if wait := b.hold.Sub(now); wait > 2*retry.MaxTier {
				// No tier is that long, even with full jitter: a hand-made
				// record? It is honoured (never early), and blocks the
				// records behind it until then.
				log.Warn("head record due further ahead than any tier allows: the partition waits for it", "topic", r.Topic,
					"partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "attempt", headers.Value(r, headers.Attempt),
					"tier", b.tier.name, "due_at", headers.FormatTime(b.hold))
			} else if log.Enabled(ctx, slog.LevelDebug) {
				log.Debug("partition held until its head is due", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
					"key", string(r.Key), "attempt", headers.Value(r, headers.Attempt), "tier", b.tier.name,
					"due_at", headers.FormatTime(b.hold), "wait_ms", b.hold.Sub(now).Milliseconds())
			}
		}
	}
	if failed != nil {
		mv.m.produceErrs.Inc()
		mv.setHealth(fmt.Errorf("moving records to %s: %w", mv.cfg.Names.Raw, failed))
	} else if len(out) > 0 {
		mv.backoff = 0
		mv.setHealth(nil)
	}

	mv.commit(ctx, cl, commits)
	// Rewind, then arm the timers: a partition comes back at its head.
	cl.SetOffsets(rewinds)
	for _, pk := range parks {
		mv.holds.park(pk.p, pk.offset, pk.due)
	}
}

// commit commits exactly the moved offsets. A failed commit only means the
// records are moved again later; the processor skips the copies.
func (mv *Mover) commit(ctx context.Context, cl *kgo.Client, commits map[string]map[int32]kgo.EpochOffset) {
	if len(commits) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), moveTimeout)
	defer cancel()
	cl.CommitOffsetsSync(cctx, commits, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					err = errors.Join(err, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
		if err != nil {
			mv.m.commitErrs.Inc()
			mv.cfg.Logger.Warn("commit failed after the move: those records will be moved again (the processor skips the copies)", "err", err)
		}
	})
}

// produce sends out and waits for every acknowledgement; errs[i] is out[i]'s
// error. The move does not stop on shutdown (ctx): it is bounded by
// moveTimeout instead.
func produce(ctx context.Context, cl *kgo.Client, out []*kgo.Record) (errs []error) {
	errs = make([]error, len(out))
	if len(out) == 0 {
		return errs
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), moveTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(len(out))
	for i, r := range out {
		cl.Produce(pctx, r, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	return errs
}

func setOffset(m map[string]map[int32]kgo.EpochOffset, p tp, epoch int32, offset int64) {
	if m[p.topic] == nil {
		m[p.topic] = map[int32]kgo.EpochOffset{}
	}
	m[p.topic][p.partition] = kgo.EpochOffset{Epoch: epoch, Offset: offset}
}

// nextBackoff doubles the wait after each failed move, from 1s to 30s.
func (mv *Mover) nextBackoff() time.Duration {
	mv.backoff = min(max(2*mv.backoff, time.Second), 30*time.Second)
	return mv.backoff
}

func (mv *Mover) setHealth(err error) {
	if mv.cfg.Health != nil {
		mv.cfg.Health.Set("kafka", err)
	}
}

// The rebalance callbacks run only between moves (BlockRebalanceOnPoll).

func (mv *Mover) assigned(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	mv.rebalanced(cl, parts, "assigned", mv.holds.assign)
}

func (mv *Mover) revoked(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	mv.rebalanced(cl, parts, "revoked", mv.holds.release)
}

func (mv *Mover) lost(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	mv.rebalanced(cl, parts, "lost", mv.holds.release)
}

// rebalanced applies one rebalance callback: assign starts partitions
// unpaused with no timer; revoke and loss stop their timers and clear their
// pauses, so a partition never stays paused across owners.
func (mv *Mover) rebalanced(cl *kgo.Client, parts map[string][]int32, kind string, apply func(map[string][]int32)) {
	if cl != nil {
		mv.holds.attach(cl)
	}
	apply(parts)
	n := count(parts)
	mv.m.rebalances.WithLabelValues(kind).Add(float64(n))
	level := slog.LevelInfo
	if kind == "lost" {
		level = slog.LevelWarn
	}
	mv.cfg.Logger.Log(context.Background(), level, "partitions "+kind, "partitions", parts, "count", n)
}

func count(parts map[string][]int32) int {
	n := 0
	for _, ps := range parts {
		n += len(ps)
	}
	return n
}
