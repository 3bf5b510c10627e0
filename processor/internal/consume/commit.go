package consume

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/processor/internal/state"
)

// maxTxnResults bounds the records of one transaction, so one stays well
// inside the transaction timeout however much waits.
const maxTxnResults = 5000

// topicPart names a partition of webhooks.raw or of a lane topic.
type topicPart struct {
	topic string
	part  int32
}

// commitPoint is what a transaction commits for one partition.
type commitPoint struct {
	offset int64
	meta   string
}

// txn is the session's open transaction: the results produced in it and
// what their produces answered. Used by the loop's goroutine only, but for
// the produce callbacks (mu).
type txn struct {
	open  bool
	start time.Time
	batch []*result
	// first is closed when every record of the transaction's first
	// produce was answered: the loop ends the transaction then.
	first chan struct{}
	// doomed is closed when partitions are revoked or lost after it began.
	doomed <-chan struct{}
	wg     sync.WaitGroup // produces not answered yet

	mu         sync.Mutex
	produceErr error // the first; failed counts them all
	failed     int
	checkpoint map[int32]int64 // changelog partition -> next offset
}

// produce puts every finished result waiting (up to maxTxnResults in the
// transaction) into the open transaction, beginning one if none is open:
// their offsets are marked as in it and their records produced. The loop
// keeps the transaction open until its first produce was answered (a
// produce round trip), producing what finishes meanwhile into it, then
// ends it (end): a record finishing while records are produced joins them
// instead of waiting for the whole transaction, and under load the fixed
// cost of a transaction (the offset commit, EndTxn and its markers) is
// shared by more records.
func (s *session) produce(ctx context.Context) error {
	t := &s.txn
	s.mu.Lock()
	n := min(len(s.results), maxTxnResults-len(t.batch))
	batch := append([]*result(nil), s.results[:n]...)
	clear(s.results[:n])
	s.results = s.results[n:]
	s.mu.Unlock()

	// Results of partitions gone since they were read are dropped: the
	// next owner reads them again.
	batch = s.own.begin(batch, func(res *result) {
		s.drop(res.item)
		s.release(res)
	})
	if len(batch) == 0 {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	// The transaction's end decides what becomes of the records, not ctx: a
	// stop commits what was produced.
	pctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, res := range batch {
		for _, r := range res.outputs {
			s.fit(res, r)
			wg.Add(1)
			t.wg.Add(1)
			isChangelog := r.Topic == s.p.cfg.Names.Changelog
			s.tx.Produce(pctx, r, func(r *kgo.Record, err error) {
				defer t.wg.Done()
				defer wg.Done()
				t.mu.Lock()
				defer t.mu.Unlock()
				if err != nil {
					err = fmt.Errorf("produce %s: %w", r.Topic, err)
					if t.failed++; t.produceErr == nil {
						t.produceErr = err
					}
					if res.produceErr == nil {
						res.produceErr = err
					}
					return
				}
				if isChangelog && r.Offset+1 > t.checkpoint[r.Partition] {
					t.checkpoint[r.Partition] = r.Offset + 1
				}
			})
		}
	}
	if len(t.batch) == 0 {
		first := t.first
		go func() { wg.Wait(); close(first) }()
	}
	t.batch = append(t.batch, batch...)
	return nil
}

// fit makes a record of res fit the topics' max.message.bytes before it is
// produced: its longest headers are cut (headers.Fit; the key and the body
// never change) and the cut named in hookline.headers-cut. A result whose
// transaction aborted on a refused produce has every long header cut,
// whatever its size: the topic took less than MaxRecordBytes says.
func (s *session) fit(res *result, r *kgo.Record) {
	limit := s.p.cfg.MaxRecordBytes
	if res.refused != nil {
		limit = 0
	}
	if headers.Fit(r, limit) || limit == 0 {
		return
	}
	s.p.cfg.Logger.Error("a record is over the topics' limit even with its headers cut; producing it anyway, the broker will refuse it",
		"topic", r.Topic, "key", string(r.Key), "bytes", headers.Size(r), "limit", limit)
}

// begin opens a transaction if none is.
func (s *session) begin() error {
	t := &s.txn
	if t.open {
		return nil
	}
	// doomed is taken before Begin, so a revoke racing it is seen.
	doomed := s.own.doomed()
	if err := s.tx.Begin(); err != nil {
		return fmt.Errorf("%w: begin transaction: %w", errSessionBroken, err)
	}
	t.open, t.start, t.batch, t.first, t.doomed = true, time.Now(), nil, make(chan struct{}), doomed
	t.produceErr, t.failed, t.checkpoint = nil, 0, map[int32]int64{}
	return nil
}

// endTimeout bounds one End of a transaction: its flush, offset commit,
// heartbeat and EndTxn. Half the transaction timeout (consume.go), so a
// broker that does not answer breaks the session well before the broker
// aborts the transaction itself.
const endTimeout = 30 * time.Second

// end ends the open transaction (opening one if only offsets moved) with
// the low-water marks its results allow, committing unless abort, the
// partitions were lost or revoked, or ctx ended. A transaction that does
// not commit leaves its results waiting for the next one (nothing is
// called again); a broken session returns errSessionBroken.
//
// A stop (ctx cancelled) never interrupts an End: franz-go's End given a
// cancelled context returns before its EndTxn (or sends none), leaving the
// transaction open on the broker with its offset commit pending, and every
// new owner of its partitions then reads UNSTABLE_OFFSET_COMMIT until the
// broker's transaction timeout aborts it (a minute). So End runs on a
// context of its own, bounded by endTimeout; a stop that came meanwhile
// is seen after it, and only decides whether it commits (TryAbort once
// ctx ended: the stop then commits the results itself).
func (s *session) end(ctx context.Context, abort bool) error {
	p, t := s.p, &s.txn
	points := s.own.points()
	if !t.open && len(points) == 0 {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	select {
	case <-t.doomed:
		// Partitions lost or revoked meanwhile (a broker gone, a
		// rebalance): the session aborts anyway. Aborting now drops the
		// records still buffered; flushing would deliver them to the
		// broker once it is back, where they would join any transaction
		// of ours it left hanging (package hanging) and this abort would
		// then throw that one's records away too.
		abort = true
	default:
	}
	try := kgo.TryCommit
	if abort || ctx.Err() != nil {
		try = kgo.TryAbort
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	if try == kgo.TryCommit {
		// Every produce answered before the decision: a record the
		// client or the broker refused (MESSAGE_TOO_LARGE, an ACL) does
		// not fail franz-go's commit, and a commit past it would lose
		// the delivery (issue 25). End flushes too; an error here is
		// the deadline, and End's own flush says so.
		_ = s.tx.Client().Flush(ectx)
		t.mu.Lock()
		if t.failed > 0 {
			try = kgo.TryAbort
		}
		t.mu.Unlock()
	}
	committed, err := s.tx.End(kgo.PreTxnCommitFnContext(ectx, s.rewriteOffsets(points)), try)
	t.wg.Wait()
	batch := t.batch
	t.open, t.batch = false, nil
	if err != nil {
		return fmt.Errorf("%w: end transaction: %w", errSessionBroken, err)
	}
	if committed && t.produceErr != nil {
		// Cannot happen: a failed produce makes the transaction abort.
		// Refuse to apply states whose records may be missing.
		return fmt.Errorf("transaction committed with produce errors: %w", t.produceErr)
	}
	if !committed {
		p.m.txns.WithLabelValues("aborted").Inc()
		p.cfg.Logger.Info("transaction aborted; its results wait for the next one", "records", len(batch), "failed_produces", t.failed, "err", t.produceErr)
		if err := s.refusedAgain(batch); err != nil {
			return err
		}
		s.own.aborted(batch)
		s.mu.Lock()
		s.results = append(batch, s.results...)
		s.mu.Unlock()
		return nil
	}
	p.m.txns.WithLabelValues("committed").Inc()
	p.committed = true
	var changes []state.Change
	for _, res := range batch {
		if res.change != nil {
			changes = append(changes, *res.change)
		}
	}
	if err := p.cfg.Store.Apply(changes, t.checkpoint); err != nil {
		// Badger is only a cache of the changelog: without this write it is
		// behind, never ahead, and restore catches it up. Stop so the
		// partitions are restored before anything else is decided.
		return fmt.Errorf("apply committed states to the store: %w", err)
	}
	s.own.committed(batch, points)
	s.mu.Lock()
	for _, res := range batch {
		s.drop(res.item)
		s.release(res)
		if res.change != nil {
			if o, ok := s.overlay[res.change.Key]; ok && o.seq == res.seq {
				delete(s.overlay, res.change.Key)
			}
		}
	}
	s.mu.Unlock()
	for _, res := range batch {
		for _, st := range res.stats {
			p.m.records.WithLabelValues(st.provider, st.route, st.status).Inc()
			switch st.status {
			case outcome.StatusDuplicate:
				p.m.duplicates.WithLabelValues(st.origin).Inc()
			case outcome.StatusDone:
				p.m.succeeded.WithLabelValues(st.provider, st.route, succeededAttempt(res.r, st.origin, p.cfg.Schedule.Len()+1)).Inc()
			}
		}
	}
	p.m.batchSeconds.Observe(time.Since(t.start).Seconds())
	p.m.batchRecords.Observe(float64(len(batch)))
	return nil
}

// succeededAttempt is the attempt label of a done result: the record's
// hookline.attempt (a replay's or backfill's outcome says 1, as decide counts it),
// folded into last above it so the label stays bounded by the tiers.
func succeededAttempt(r *kgo.Record, origin string, last int) string {
	n, err := headers.GetAttempt(r)
	if err != nil || origin == headers.OriginReplay || origin == headers.OriginBackfill {
		n = 1
	}
	return strconv.Itoa(min(n, last))
}

// refusedAgain takes the produce errors of an aborted transaction's
// results: a result refused for the first time is produced again with every
// long header cut (fit); one refused again stops the processor with an
// error that names it, rather than move its partition past a delivery it
// could not record. Its offset stays uncommitted, so nothing is lost: the
// next owner, or this processor restarted once the cause is mended (a
// topic's max.message.bytes, an ACL), reads it again.
func (s *session) refusedAgain(batch []*result) error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, res := range batch {
		err := res.produceErr
		if err == nil {
			continue
		}
		res.produceErr = nil
		r := res.r
		if res.refused != nil {
			return fmt.Errorf("%s[%d] offset %d (key %q): a record of its result was refused twice, the second time with its headers cut (%w); the processor stops rather than move past it",
				r.Topic, r.Partition, r.Offset, r.Key, err)
		}
		res.refused = err
		s.p.cfg.Logger.Error("a record was refused; producing it again with its long headers cut",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
	}
	return nil
}

// commit produces every finished result waiting (up to maxTxnResults) and
// ends the transaction at once: the stop's and the idle poll's way.
func (s *session) commit(ctx context.Context) error {
	if err := s.produce(ctx); err != nil {
		return err
	}
	return s.end(ctx, false)
}

// rewriteOffsets makes the transaction commit exactly points, for
// webhooks.raw and the lane topics: each partition's low-water mark with the
// finished offsets above it in the metadata. franz-go would commit every
// raw record polled, finished or not; partitions not in points keep their
// last commit. The lane topics are read by a plain client of this session
// (lane partition p with raw partition p), and their offsets are committed
// in the group's transactions like raw's.
func (s *session) rewriteOffsets(points map[topicPart]commitPoint) func(*kmsg.TxnOffsetCommitRequest) error {
	ours := map[string]bool{s.p.cfg.Names.Raw: true}
	for _, t := range s.p.laneTopics() {
		ours[t] = true
	}
	return func(req *kmsg.TxnOffsetCommitRequest) error {
		ids := map[string][16]byte{}
		kept := req.Topics[:0]
		for _, rt := range req.Topics {
			if ours[rt.Topic] {
				ids[rt.Topic] = rt.TopicID
				continue
			}
			kept = append(kept, rt)
		}
		byTopic := map[string]*kmsg.TxnOffsetCommitRequestTopic{}
		for tp, pt := range points {
			t := byTopic[tp.topic]
			if t == nil {
				nt := kmsg.NewTxnOffsetCommitRequestTopic()
				nt.Topic, nt.TopicID = tp.topic, ids[tp.topic]
				t = &nt
				byTopic[tp.topic] = t
			}
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition = tp.part
			rp.Offset = pt.offset
			rp.LeaderEpoch = -1
			meta := pt.meta
			rp.Metadata = &meta
			t.Partitions = append(t.Partitions, rp)
		}
		for _, t := range byTopic {
			kept = append(kept, *t)
		}
		req.Topics = kept
		return nil
	}
}
