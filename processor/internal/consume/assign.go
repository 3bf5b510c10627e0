package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/offsets"
	"github.com/hookline/hookline/processor/internal/restore"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// The ownership of partitions is the transaction loop's txnloop.Offsets.
var _ txnloop.Offsets[*result] = (*ownership)(nil)

// ownership tracks the raw partitions this instance owns and whether each
// has been restored. A newly assigned partition is paused in the
// transactional session (which never fetches: the reader does), restored
// from the changelog in its own goroutine, and only then handed to the
// reader, with its lanes, at the committed offsets; a revoked or lost
// partition's restore is cancelled and the reader stops reading it. A
// partition that comes back is restored again from its checkpoint.
type ownership struct {
	p *setup
	// standby keeps standby partitions warm; nil without standbys.
	standby *standbys
	// gate completes hanging transactions after an assignment.
	gate hangingGate
	// user is told of partitions ready and gone.
	user partitionUser

	mu    sync.Mutex
	parts map[int32]*owned
	// fresh holds partitions restored but not yet seen in a committed batch,
	// with the time each was assigned, for the "first record processed since
	// restore" log line: how long a takeover kept the partition waiting.
	fresh map[int32]time.Time
	// doom is closed when partitions are revoked or lost, then replaced: a
	// transaction holding the channel it took at its start knows its batch
	// can no longer commit.
	doom chan struct{}
	// clean is closed once a hanging transaction check found nothing left
	// open since the last assignment; no partition resumes before it.
	clean chan struct{}
}

// hangingGate is what ownership asks before partitions resume after an
// assignment: complete the hanging transactions of this processor, then
// close clean (Processor.completeHanging).
type hangingGate interface {
	completeHanging(ctx context.Context, cl *kgo.Client, clean chan struct{})
}

var _ hangingGate = (*Processor)(nil)

// partitionUser is what ownership tells its session of its partitions.
type partitionUser interface {
	// partitionReady: a restored partition is to be read from its
	// windows' committed offsets. Called with ownership.mu held.
	partitionReady(part int32, wins map[string]*offsets.Window)
	// partitionsGone: partitions went away; stop reading them and drop
	// their work. Called without ownership.mu held.
	partitionsGone(parts map[int32]bool)
}

var _ partitionUser = (*session)(nil)

// owned is one partition while this session owns it.
type owned struct {
	ready bool
	// at is when the partition was assigned.
	at time.Time
	// stop is closed when the partition goes away or the session stops
	// (cancel closes it): it ends the restore and every call of the
	// partition's records (context).
	stop   <-chan struct{}
	cancel context.CancelFunc
	done   chan struct{} // the restore goroutine ended
	// wins are the partition's windows, of webhooks.raw and of each lane
	// topic (its partition of the same number), set when ready.
	wins map[string]*offsets.Window
	// holds are the entities with holds in the store, set once restored
	// (ordering.go, heldKeys); nil: not known, every record reads them.
	holds *heldKeys
}

// context is the context of the partition's work (a call, a chain's wait
// for its record's transaction): done once the partition goes away.
func (ow *owned) context() context.Context { return stopContext(ow.stop) }

// gone reports whether the partition went away (or the session stopped).
func (ow *owned) gone() bool {
	select {
	case <-ow.stop:
		return true
	default:
		return false
	}
}

// stopContext is a context done when its channel is closed, without
// deadline or values: the context of a partition's work, made from the
// partition's stop channel where the work blocks, so no context is kept.
type stopContext <-chan struct{}

var _ context.Context = stopContext(nil)

func (c stopContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c stopContext) Done() <-chan struct{}       { return c }
func (c stopContext) Value(any) any               { return nil }
func (c stopContext) Err() error {
	select {
	case <-c:
		return context.Canceled
	default:
		return nil
	}
}

func newOwnership(p *setup, standby *standbys, gate hangingGate, user partitionUser) *ownership {
	clean := make(chan struct{})
	close(clean)
	return &ownership{p: p, standby: standby, gate: gate, user: user,
		parts: map[int32]*owned{}, fresh: map[int32]time.Time{}, doom: make(chan struct{}), clean: clean}
}

// assigned runs in the group goroutine before fetching starts for the new
// partitions.
func (o *ownership) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	parts := assigned[o.p.cfg.Names.Raw]
	if len(parts) == 0 {
		return
	}
	cl.PauseFetchPartitions(map[string][]int32{o.p.cfg.Names.Raw: parts})
	o.p.mParts.rebalances.WithLabelValues("assigned").Add(float64(len(parts)))
	at := time.Now()
	o.p.cfg.Logger.Info("partitions assigned: restoring before processing", "topic", o.p.cfg.Names.Raw, "partitions", parts)
	o.mu.Lock()
	defer o.mu.Unlock()
	// A broker stop that cost us these partitions may have left a hanging
	// transaction of ours; a new one writing to its partition before it is
	// completed would be merged with it by the broker. Check first.
	clean := make(chan struct{})
	o.clean = clean
	go o.gate.completeHanging(ctx, cl, clean)
	for _, part := range parts {
		if old, ok := o.parts[part]; ok {
			old.cancel()
		}
		rctx, cancel := context.WithCancel(ctx)
		ow := &owned{at: at, stop: rctx.Done(), cancel: cancel, done: make(chan struct{})}
		o.parts[part] = ow
		go o.restore(rctx, cl, part, ow)
	}
	o.updateHealth()
}

// restore rebuilds one partition's state and resumes it, retrying with
// backoff until it succeeds or the partition is taken away.
func (o *ownership) restore(ctx context.Context, cl *kgo.Client, part int32, ow *owned) {
	defer close(ow.done)
	log := o.p.cfg.Logger.With("partition", part)
	if o.standby != nil {
		// A standby catch-up of this partition in progress ends first: one
		// writer per partition of the store.
		o.standby.claim(part)
	}
	restored := retrying(ctx, log, "restore failed", slowBackoff, func() error {
		stats, err := restore.Partition(ctx, o.p.restoreConfig(), o.p.cfg.Store, part)
		if err == nil {
			o.p.mParts.restoreSeconds.Observe(stats.Duration.Seconds())
			o.p.mParts.restoreRecords.Add(float64(stats.Records))
			log.Info("partition restored", "from", stats.From, "to", stats.To, "records", stats.Records,
				"applied", stats.Applied, "expired", stats.Expired, "skipped", stats.Skipped, "rebuilt", stats.Rebuilt,
				"bulk", stats.Bulk, "took", stats.Duration.String(),
				"records_per_second", int64(stats.RecordsPerSecond()), "mb_per_second", fmt.Sprintf("%.1f", stats.MBPerSecond()))
		}
		return err
	})
	if !restored {
		log.Info("restore cancelled: partition no longer ours")
		return
	}
	// The set is the partition's before the scan fills it: an Apply
	// meanwhile (a transaction of an earlier owner in this session) adds
	// to it (heldKeys).
	holds := o.p.newHeldKeys()
	o.mu.Lock()
	if o.parts[part] == ow {
		ow.holds = holds
	}
	o.mu.Unlock()
	o.p.scanHeldKeys(part, holds, log)
	o.mu.Lock()
	clean := o.clean
	o.mu.Unlock()
	select {
	case <-ctx.Done():
		return
	case <-clean:
	}
	var wins map[string]*offsets.Window
	if !retrying(ctx, log, "reading the committed offsets failed", offsetsBackoff, func() (err error) {
		wins, err = o.committedWindows(ctx, cl, part)
		return err
	}) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parts[part] != ow || ctx.Err() != nil {
		return // revoked meanwhile
	}
	ow.wins = wins
	ow.ready = true
	for topic, win := range wins {
		if _, meta := win.Sent(); meta != "" {
			log.Info("offsets finished above the committed offset are skipped", "topic", topic, "committed", win.Base(), "metadata", meta)
		}
	}
	o.user.partitionReady(part, wins)
	o.fresh[part] = ow.at
	o.p.mParts.resumeSeconds.Observe(time.Since(ow.at).Seconds())
	o.updateHealth()
}

func (o *ownership) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	o.release("revoked", revoked)
}

func (o *ownership) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	o.release("lost", lost)
}

// release forgets partitions: their calls are cancelled and waited for,
// their restore too (so it cannot resume a partition we no longer own), and
// the session drops their decided states and waiting results. A
// transaction in progress is aborted by the session; what was not committed
// is read again by the next owner, which skips what was.
func (o *ownership) release(kind string, m map[string][]int32) {
	parts := m[o.p.cfg.Names.Raw]
	if len(parts) == 0 {
		return
	}
	o.p.mParts.rebalances.WithLabelValues(kind).Add(float64(len(parts)))
	o.p.cfg.Logger.Info("partitions "+kind, "topic", o.p.cfg.Names.Raw, "partitions", parts)
	var wait []chan struct{}
	gone := map[int32]bool{}
	o.mu.Lock()
	close(o.doom)
	o.doom = make(chan struct{})
	for _, part := range parts {
		if ow, ok := o.parts[part]; ok {
			ow.cancel()
			wait = append(wait, ow.done)
			delete(o.parts, part)
			delete(o.fresh, part)
			gone[part] = true
		}
	}
	o.updateHealth()
	o.mu.Unlock()
	o.user.partitionsGone(gone)
	for _, d := range wait {
		<-d
	}
	if o.standby != nil {
		o.standby.release(gone)
	}
}

// Doomed returns a channel closed when partitions are next revoked or lost.
func (o *ownership) Doomed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.doom
}

// heldKeysOf is the set of entities with holds of the partition's current
// owner (ordering.go); nil when not owned or not known.
func (o *ownership) heldKeysOf(part int32) *heldKeys {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ow, ok := o.parts[part]; ok {
		return ow.holds
	}
	return nil
}

// stopAll cancels every restore and call (shutdown, or the session
// replaced) and forgets every partition.
func (o *ownership) stopAll() {
	o.mu.Lock()
	var wait []chan struct{}
	for part, ow := range o.parts {
		ow.cancel()
		wait = append(wait, ow.done)
		delete(o.parts, part)
	}
	o.updateHealth()
	o.mu.Unlock()
	for _, d := range wait {
		<-d
	}
	if o.standby != nil {
		o.standby.releaseAll()
	}
}

// cancelWork cancels every partition's calls but keeps the partitions, so
// what finished can still be committed (the end of a graceful stop).
func (o *ownership) cancelWork() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ow := range o.parts {
		ow.cancel()
	}
}

// backoff is how long retrying waits after each failure: from first,
// doubling, up to most.
type backoff struct{ first, most time.Duration }

var (
	// slowBackoff is for work whose failure says something is wrong
	// (a restore, the control topic).
	slowBackoff = backoff{time.Second, 30 * time.Second}
	// offsetsBackoff is for the committed-offset read after an
	// assignment, which fails for as long as a transaction of the
	// previous owner still holds an offset commit for the partition
	// (UNSTABLE_OFFSET_COMMIT): usually milliseconds (its markers being
	// written), and every moment waited past its end is a moment the
	// partition stands still.
	offsetsBackoff = backoff{50 * time.Millisecond, time.Second}
)

// retrying runs fn until it succeeds (true) or ctx ends (false), logging
// each failure and backing off as b says.
func retrying(ctx context.Context, log *slog.Logger, what string, b backoff, fn func() error) bool {
	for backoff := b.first; ; backoff = min(2*backoff, b.most) {
		err := fn()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Error(what+"; retrying", "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

// committedWindows reads the committed offsets and metadata of the
// partition in webhooks.raw and in every lane topic (require_stable: after
// any transaction still writing them) and starts a window at each; a
// partition never committed starts at its log start, as the session does.
//
// Only this partition is asked for. The broker answers
// UNSTABLE_OFFSET_COMMIT per partition asked, and this processor's own
// transactions keep offset commits pending on the partitions it already
// owns, many times a second under load; kadm's FetchOffsetsForTopics asks
// for every partition of the group and fails on any one's error, so a
// takeover kept failing on the new owner's own commits (issue 20:
// 1+2+4+8+16 s without resuming).
func (o *ownership) committedWindows(ctx context.Context, cl *kgo.Client, part int32) (map[string]*offsets.Window, error) {
	adm := kadm.NewClient(cl)
	all := append([]string{o.p.cfg.Names.Raw}, o.p.laneTopics()...)
	committed, err := fetchCommitted(ctx, cl, o.p.cfg.Names.Group(topics.GroupProcessor), all, part)
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets: %w", err)
	}
	wins := map[string]*offsets.Window{}
	var starts kadm.ListedOffsets
	for _, t := range all {
		c, ok := committed[t]
		switch {
		case ok && c.ErrorCode != 0:
			return nil, fmt.Errorf("committed offset of %s[%d]: %w", t, part, kerr.ErrorForCode(c.ErrorCode))
		case ok && c.Offset >= 0:
			wins[t] = offsets.New(c.Offset, deref(c.Metadata))
			continue
		}
		if starts == nil {
			if starts, err = adm.ListStartOffsets(ctx, all...); err != nil {
				return nil, fmt.Errorf("list start offsets: %w", err)
			}
		}
		so, ok := starts.Lookup(t, part)
		if !ok || so.Err != nil {
			return nil, fmt.Errorf("start offset of %s[%d]: %v", t, part, so.Err)
		}
		wins[t] = offsets.New(so.Offset, "")
	}
	return wins, nil
}

// accept takes a polled record into its window and returns the partition,
// or nil when the record is not to be run: read before, finished before
// this owner took the partition (committed metadata), or of a partition no
// longer owned (fetched before the reader stopped reading it: its next
// owner reads it from the committed offset).
func (o *ownership) accept(r *kgo.Record) *owned {
	o.mu.Lock()
	defer o.mu.Unlock()
	ow, ok := o.parts[r.Partition]
	if !ok || !ow.ready || ow.wins[r.Topic] == nil || !ow.wins[r.Topic].Accept(r.Offset) {
		return nil
	}
	return ow
}

// restored lists the partitions owned and restored (read by the reader),
// in no order.
func (o *ownership) restored() []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int32
	for part, ow := range o.parts {
		if ow.ready {
			out = append(out, part)
		}
	}
	return out
}

// has reports whether the partition is owned and restored.
func (o *ownership) has(part int32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	ow, ok := o.parts[part]
	return ok && ow.ready
}

// span is the offsets held above the committed offsets, all partitions.
func (o *ownership) span() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int64
	for _, ow := range o.parts {
		for _, w := range ow.wins {
			n += w.Span()
		}
	}
	return n
}

// Begin keeps the results whose partition is still the one they were read
// from, marks their offsets as in the transaction, and hands the others to
// drop.
func (o *ownership) Begin(batch []*result, drop func(*result)) []*result {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := batch[:0]
	for _, res := range batch {
		w := res.ow.wins[res.r.Topic]
		if o.parts[res.r.Partition] != res.ow || w == nil {
			drop(res)
			continue
		}
		w.Mark([]int64{res.r.Offset}, offsets.InTxn)
		kept = append(kept, res)
	}
	return kept
}

// Points is what to commit for each partition whose low-water mark or
// metadata moved since its last commit.
func (o *ownership) Points() map[txnloop.TopicPart]txnloop.Point {
	o.mu.Lock()
	defer o.mu.Unlock()
	pts := map[txnloop.TopicPart]txnloop.Point{}
	for part, ow := range o.parts {
		for topic, w := range ow.wins {
			off, meta := w.CommitPoint()
			if sent, sentMeta := w.Sent(); off != sent || meta != sentMeta {
				pts[txnloop.TopicPart{Topic: topic, Part: part}] = txnloop.Point{Offset: off, Meta: meta}
			}
		}
	}
	return pts
}

// Aborted returns a transaction's offsets to running: their results wait
// for the next one.
func (o *ownership) Aborted(batch []*result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, res := range batch {
		if w := res.ow.wins[res.r.Topic]; o.parts[res.r.Partition] == res.ow && w != nil {
			w.Mark([]int64{res.r.Offset}, offsets.Running)
		}
	}
}

// Committed moves the windows past a committed transaction and logs, once
// per assignment, the first record committed since a partition's restore:
// with "partition restored", this is how an operator (and a test) sees that
// restore came first.
func (o *ownership) Committed(batch []*result, points map[txnloop.TopicPart]txnloop.Point) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byPart := map[txnloop.TopicPart][]int64{}
	for _, res := range batch {
		tp := txnloop.TopicPart{Topic: res.r.Topic, Part: res.r.Partition}
		byPart[tp] = append(byPart[tp], res.r.Offset)
		if at, ok := o.fresh[res.r.Partition]; ok {
			delete(o.fresh, res.r.Partition)
			o.p.cfg.Logger.Info("first record processed since restore", "partition", res.r.Partition, "offset", res.r.Offset,
				"since_assigned", time.Since(at).Round(time.Millisecond).String())
		}
	}
	for part, ow := range o.parts {
		for topic, w := range ow.wins {
			tp := txnloop.TopicPart{Topic: topic, Part: part}
			pt, ok := points[tp]
			if !ok {
				pt.Offset, pt.Meta = w.Sent()
			}
			w.Committed(byPart[tp], pt.Offset, pt.Meta)
		}
	}
}

// updateHealth sets the "restore" readiness check; o.mu is held.
func (o *ownership) updateHealth() {
	var pending []int
	for part, ow := range o.parts {
		if !ow.ready {
			pending = append(pending, int(part))
		}
	}
	if len(pending) == 0 {
		o.p.cfg.Health.Set("restore", nil)
		return
	}
	sort.Ints(pending)
	o.p.cfg.Health.Set("restore", errors.New(fmt.Sprint("restoring partitions ", pending)))
}

// fetchCommitted asks group's coordinator, require_stable, for the
// committed offset of partition part of each topic, and only those:
// the answers by topic. A partition never committed answers offset -1.
func fetchCommitted(ctx context.Context, cl *kgo.Client, group string, topicNames []string, part int32) (map[string]kmsg.OffsetFetchResponseTopicPartition, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	for _, t := range topicNames {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = t, []int32{part}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]kmsg.OffsetFetchResponseTopicPartition{}
	for _, g := range resp.Groups { // v8+: franz-go answers in both forms; Groups keeps the group's error
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				out[t.Topic] = kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, Metadata: p.Metadata, ErrorCode: p.ErrorCode}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if _, ok := out[t.Topic]; !ok {
				out[t.Topic] = p
			}
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// partitionMetrics are the owned partitions': assignments, restores and
// how long each took to resume.
type partitionMetrics struct {
	rebalances     *prometheus.CounterVec
	restoreSeconds prometheus.Histogram
	restoreRecords prometheus.Counter
	resumeSeconds  prometheus.Histogram
}

func newPartitionMetrics(reg prometheus.Registerer) *partitionMetrics {
	m := &partitionMetrics{
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_partitions_rebalanced_total",
			Help: "Partitions of webhooks.raw assigned, revoked or lost.",
		}, []string{"kind"}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_processor_restore_seconds",
			Help:    "Time to restore one partition's state from the changelog.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
		restoreRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookline_processor_restore_records_total",
			Help: "Changelog records read while restoring.",
		}),
		resumeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_processor_resume_seconds",
			Help:    "Time from a partition's assignment to its records being read again: the hanging-transaction check, the restore and the committed offsets. A takeover by a warm standby should take well under a second.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
	}
	reg.MustRegister(m.rebalances, m.restoreSeconds, m.restoreRecords, m.resumeSeconds)
	return m
}
