package consume

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// commit ends one transaction with every finished result waiting (at most
// maxTxnResults) and the low-water marks they allow. Results that finish
// while it runs wait for the next one, which starts as soon as this one
// ended: under load transactions grow, and their fixed cost (the offset
// commit, the group heartbeat, EndTxn and its markers) is shared by more
// records. A transaction that does not commit leaves its
// results waiting for the next one (nothing is called again); a broken
// session returns errSessionBroken.
func (s *session) commit(ctx context.Context) error {
	p := s.p
	start := time.Now()
	s.mu.Lock()
	n := min(len(s.results), maxTxnResults)
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
	points := s.own.points()
	if len(batch) == 0 && len(points) == 0 {
		return nil
	}
	if err := s.tx.Begin(); err != nil {
		return fmt.Errorf("%w: begin transaction: %w", errSessionBroken, err)
	}
	doomed := s.own.doomed()
	var (
		mu         sync.Mutex
		produceErr error // the first; failed counts them all
		failed     int
		checkpoint = map[int32]int64{}
		wg         sync.WaitGroup
	)
	for _, res := range batch {
		for _, r := range res.outputs {
			wg.Add(1)
			isChangelog := r.Topic == p.cfg.Names.Changelog
			s.tx.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if failed++; produceErr == nil {
						produceErr = fmt.Errorf("produce %s: %w", r.Topic, err)
					}
					return
				}
				if isChangelog && r.Offset+1 > checkpoint[r.Partition] {
					checkpoint[r.Partition] = r.Offset + 1
				}
			})
		}
	}
	try := kgo.TryCommit
	produced := make(chan struct{})
	go func() { wg.Wait(); close(produced) }()
	select {
	case <-produced:
	case <-doomed:
		// Partitions lost or revoked meanwhile (a broker gone, a
		// rebalance): the session aborts anyway. Aborting now drops the
		// records still buffered; flushing would deliver them to the
		// broker once it is back, where they would join any transaction
		// of ours it left hanging (package hanging) and this abort would
		// then throw that one's records away too.
		try = kgo.TryAbort
	}
	if ctx.Err() != nil {
		try = kgo.TryAbort
	}
	committed, err := s.tx.End(kgo.PreTxnCommitFnContext(ctx, s.rewriteOffsets(points)), try)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("%w: end transaction: %w", errSessionBroken, err)
	}
	if committed && produceErr != nil {
		// Cannot happen: a failed produce fails the commit. Refuse to
		// apply states whose records may be missing.
		return fmt.Errorf("transaction committed with produce errors: %w", produceErr)
	}
	if !committed {
		p.m.txns.WithLabelValues("aborted").Inc()
		p.cfg.Logger.Info("transaction aborted; its results wait for the next one", "records", len(batch), "failed_produces", failed, "err", produceErr)
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
	if err := p.cfg.Store.Apply(changes, checkpoint); err != nil {
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
		p.m.records.WithLabelValues(res.stat.provider, res.stat.status).Inc()
		if res.stat.status == StatusDuplicate {
			p.m.duplicates.WithLabelValues(res.stat.origin).Inc()
		}
	}
	p.m.batchSeconds.Observe(time.Since(start).Seconds())
	p.m.batchRecords.Observe(float64(len(batch)))
	return nil
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
