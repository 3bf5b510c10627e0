package consume

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/offsets"
	"github.com/hookline/hookline/processor/internal/restore"
	"github.com/hookline/hookline/processor/internal/standby"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// partition is one raw partition while the session owns it, as goka's
// partition processor is: it runs its own life (run) — takes it from the
// standbys, restores its state from the changelog, registers and fills
// its hold set (heldKeys), waits for the hanging-transaction check, reads
// its committed offsets into its windows, and asks its host to resume it —
// and, once resumed, keeps its windows: which polled offsets it accepts,
// which are in the transaction, what to commit. Its stop channel closes
// when it goes away or the session stops (cancel): that ends its run and
// every call of its records (context).
type partition struct {
	num int32
	p   *setup
	// standby is told the partition is taken (Claim) before its restore;
	// nil without standbys.
	standby *standby.Set
	// at is when the partition was assigned.
	at     time.Time
	stop   <-chan struct{}
	cancel context.CancelFunc
	done   chan struct{} // run ended

	mu    sync.Mutex
	ready bool
	// wins are the partition's windows, of webhooks.raw and of each lane
	// topic (its partition of the same number), set when ready.
	wins map[string]*offsets.Window
	// holds are the entities with holds in the store, set once restored
	// (heldKeys); nil: not known, every record reads them.
	holds *heldKeys
	// fresh: resumed and not yet seen in a committed transaction, for the
	// "first record processed since restore" log line: how long a
	// takeover kept the partition waiting.
	fresh bool
}

// partitionHost is what a partition asks of the ownership it belongs to.
type partitionHost interface {
	// hangingChecked is closed once the hanging-transaction check of the
	// latest assignment left nothing open: no partition resumes before.
	hangingChecked() <-chan struct{}
	// resume makes pt readable at wins, unless it went away meanwhile
	// (false).
	resume(pt *partition, wins map[string]*offsets.Window, empty []string) bool
}

// startPartition starts the life of partition num, assigned at at, until
// ctx ends or it is cancelled.
func startPartition(ctx context.Context, p *setup, sb *standby.Set, num int32, at time.Time, cl *kgo.Client, host partitionHost) *partition {
	ctx, cancel := context.WithCancel(ctx)
	pt := &partition{num: num, p: p, standby: sb, at: at, stop: ctx.Done(), cancel: cancel, done: make(chan struct{})}
	go pt.run(ctx, cl, host)
	return pt
}

// run restores the partition and resumes it, retrying each step with
// backoff until it succeeds or the partition is taken away.
func (pt *partition) run(ctx context.Context, cl *kgo.Client, host partitionHost) {
	defer close(pt.done)
	log := pt.p.cfg.Logger.With("partition", pt.num)
	if pt.standby != nil {
		// A standby catch-up of this partition in progress ends first: one
		// writer per partition of the store.
		pt.standby.Claim(pt.num)
	}
	if !retrying(ctx, log, "restore failed", slowBackoff, func() error { return pt.restore(ctx, log) }) {
		log.Info("restore cancelled: partition no longer ours")
		return
	}
	// The set is the partition's before the scan fills it: an Apply
	// meanwhile (a transaction of an earlier owner in this session) adds
	// to it (heldKeys).
	holds := pt.p.newHeldKeys()
	pt.mu.Lock()
	pt.holds = holds
	pt.mu.Unlock()
	pt.p.scanHeldKeys(pt.num, holds, log)
	select {
	case <-ctx.Done():
		return
	case <-host.hangingChecked():
	}
	var wins map[string]*offsets.Window
	if !retrying(ctx, log, "reading the committed offsets failed", offsetsBackoff, func() (err error) {
		wins, err = pt.committedWindows(ctx, cl)
		return err
	}) {
		return
	}
	empty := pt.emptyLanes(ctx, cl, wins)
	// Read before resume: from then on the windows are the transaction
	// loop's, which moves them under pt.mu.
	var skipped [][]any
	for topic, win := range wins {
		if _, meta := win.Sent(); meta != "" {
			skipped = append(skipped, []any{"topic", topic, "committed", win.Base(), "metadata", meta})
		}
	}
	if !host.resume(pt, wins, empty) {
		return // revoked meanwhile
	}
	for _, args := range skipped {
		log.Info("offsets finished above the committed offset are skipped", args...)
	}
	pt.p.mParts.resumeSeconds.Observe(time.Since(pt.at).Seconds())
}

// restore rebuilds the partition's state from the changelog (package
// restore), from the store's checkpoint.
func (pt *partition) restore(ctx context.Context, log *slog.Logger) error {
	stats, err := restore.Partition(ctx, pt.p.restoreConfig(), pt.p.cfg.Store, pt.num)
	if err != nil {
		return err
	}
	pt.p.mParts.restoreSeconds.Observe(stats.Duration.Seconds())
	pt.p.mParts.restoreRecords.Add(float64(stats.Records))
	log.Info("partition restored", "from", stats.From, "to", stats.To, "records", stats.Records,
		"applied", stats.Applied, "expired", stats.Expired, "skipped", stats.Skipped, "rebuilt", stats.Rebuilt,
		"bulk", stats.Bulk, "took", stats.Duration.String(),
		"records_per_second", int64(stats.RecordsPerSecond()), "mb_per_second", fmt.Sprintf("%.1f", stats.MBPerSecond()))
	return nil
}

// resumed takes the windows the partition is read from; it is ready.
func (pt *partition) resumed(wins map[string]*offsets.Window) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.wins, pt.ready, pt.fresh = wins, true, true
}

// end stops the partition's run and the calls of its records, and waits
// for its run to end.
func (pt *partition) end() {
	pt.cancel()
	<-pt.done
}

// context is the context of the partition's work (a call, a chain's wait
// for its record's transaction): done once the partition goes away.
func (pt *partition) context() context.Context { return stopContext(pt.stop) }

// gone reports whether the partition went away (or the session stopped).
func (pt *partition) gone() bool {
	select {
	case <-pt.stop:
		return true
	default:
		return false
	}
}

// isReady reports whether the partition is restored and read; false for
// nil (not owned).
func (pt *partition) isReady() bool {
	if pt == nil {
		return false
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.ready
}

// heldKeys is the partition's hold set; nil when not known or pt is nil
// (not owned).
func (pt *partition) heldKeys() *heldKeys {
	if pt == nil {
		return nil
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.holds
}

// accept takes a polled offset of topic into its window: false when the
// partition is not ready, or the offset was read before or finished before
// this owner took the partition (committed metadata).
func (pt *partition) accept(topic string, offset int64) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	w := pt.wins[topic]
	return pt.ready && w != nil && w.Accept(offset)
}

// unread takes back the last offset of topic accepted
// (offsets.Window.Unread); false when the partition is gone or the
// offset is not the last accepted.
func (pt *partition) unread(topic string, offset int64) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	w := pt.wins[topic]
	return w != nil && w.Unread(offset)
}

// mark sets an offset of topic to s (offsets.Window.Mark); false when the
// partition has no window of topic.
func (pt *partition) mark(topic string, offset int64, s offsets.Slot) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	w := pt.wins[topic]
	if w == nil {
		return false
	}
	w.Mark([]int64{offset}, s)
	return true
}

// span is the offsets held above the committed offsets, all topics.
func (pt *partition) span() int64 {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var n int64
	for _, w := range pt.wins {
		n += w.Span()
	}
	return n
}

// points adds to pts what to commit for each window whose low-water mark
// or metadata moved since its last commit.
func (pt *partition) points(pts map[txnloop.TopicPart]txnloop.Point) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for topic, w := range pt.wins {
		off, meta := w.CommitPoint()
		if sent, sentMeta := w.Sent(); off != sent || meta != sentMeta {
			pts[txnloop.TopicPart{Topic: topic, Part: pt.num}] = txnloop.Point{Offset: off, Meta: meta}
		}
	}
}

// committed moves the windows past a committed transaction: byTopic are
// the partition's offsets it carried (first the first of them in the
// batch), points what it committed. It logs, once per assignment, the
// first record committed since the restore: with "partition restored",
// this is how an operator (and a test) sees that restore came first.
func (pt *partition) committed(byTopic map[string][]int64, first int64, points map[txnloop.TopicPart]txnloop.Point) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.fresh && len(byTopic) > 0 {
		pt.fresh = false
		pt.p.cfg.Logger.Info("first record processed since restore", "partition", pt.num, "offset", first,
			"since_assigned", time.Since(pt.at).Round(time.Millisecond).String())
	}
	for topic, w := range pt.wins {
		tp := txnloop.TopicPart{Topic: topic, Part: pt.num}
		p, ok := points[tp]
		if !ok {
			p.Offset, p.Meta = w.Sent()
		}
		w.Committed(byTopic[topic], p.Offset, p.Meta)
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
func (pt *partition) committedWindows(ctx context.Context, cl *kgo.Client) (map[string]*offsets.Window, error) {
	part := pt.num
	adm := kadm.NewClient(cl)
	all := append([]string{pt.p.cfg.Names.Raw}, pt.p.laneTopics()...)
	committed, err := fetchCommitted(ctx, cl, pt.p.cfg.Names.Group(topics.GroupProcessor), all, part)
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

// emptyLanes lists the lane topics whose partition pt.num holds nothing
// at or after its window's base, committed or not (its end offset, the
// high watermark, is at most the base). Only the owner of raw partition p
// parks records in lane partition p, and the previous owner's
// transactions ended before the committed offsets were read
// (RequireStable, the hanging check): such a lane partition stays empty
// until this session parks a record in it, so the reader does not fetch
// it until then (reader.parked). An error lists none: every lane is then
// fetched, as before.
func (pt *partition) emptyLanes(ctx context.Context, cl *kgo.Client, wins map[string]*offsets.Window) []string {
	lanes := pt.p.laneTopics()
	if len(lanes) == 0 {
		return nil
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, lanes...)
	if err != nil {
		pt.p.cfg.Logger.Debug("listing the lanes' end offsets failed; every lane is fetched", "partition", pt.num, "err", err)
		return nil
	}
	var empty []string
	for _, t := range lanes {
		end, ok := ends.Lookup(t, pt.num)
		if w := wins[t]; ok && end.Err == nil && w != nil && end.Offset <= w.Base() {
			empty = append(empty, t)
		}
	}
	return empty
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

// heldKeys are the entities of one owned partition that have holds in the
// state store, so that the records of every other entity (nearly all,
// when nothing fails) skip the store read for their holds. Registered
// with the partition once it is restored, then filled by a scan of the
// partition's holds (scanHeldKeys), before any of its records is decided;
// kept by Apply, which writes the holds of each committed transaction to
// the store, then here (the partition's current owner's), before
// Committed drops them from the overlay: a reader finds an entity's holds
// in the overlay, or knows here whether the store may have them. The
// store is written for an owned partition by its session's Apply only.
// Registered before the scan, the set cannot miss a hold an Apply writes
// meanwhile; a key it names that the store no longer has costs one read.
type heldKeys struct {
	mu      sync.Mutex
	keys    map[string]struct{}
	unknown bool // the scan failed: every key may have holds
}

// newHeldKeys is an empty set; nil (not known: every record reads the
// store) when no provider is ordered.
func (p *setup) newHeldKeys() *heldKeys {
	if len(p.orderedRoutes()) == 0 {
		return nil
	}
	return &heldKeys{keys: map[string]struct{}{}}
}

// may reports whether key may have holds in the store; true when not
// known (h nil, or the scan failed).
func (h *heldKeys) may(key string) bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.keys[key]
	return ok || h.unknown
}

// set records whether key has holds in the store now (value not nil).
func (h *heldKeys) set(key string, value []byte) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if value == nil {
		delete(h.keys, key)
		return
	}
	h.keys[key] = struct{}{}
}

// scanHeldKeys adds to h the entities with holds in a restored partition;
// when the scan fails (logged) every key may have holds.
func (p *setup) scanHeldKeys(part int32, h *heldKeys, log *slog.Logger) {
	if h == nil {
		return
	}
	err := p.cfg.Store.Scan(part, decide.EntityPrefix, func(key string, _ []byte) error {
		h.mu.Lock()
		h.keys[key] = struct{}{}
		h.mu.Unlock()
		return nil
	})
	if err != nil {
		log.Warn("entities held: scan failed; each ordered record reads its holds from the store", "err", err)
		h.mu.Lock()
		h.unknown = true
		h.mu.Unlock()
	}
}
