// Package txnloop is the processor's transaction loop: it produces the
// records of finished results into a Kafka transaction of the group's
// GroupTransactSession (beginning one if none is open), ends that
// transaction once its first produce was answered, with the offsets of
// webhooks.raw and the lanes rewritten to their low-water marks, and
// reports what committed or aborted (docs/processor.md, Session loop).
//
// It knows results and offsets only through two interfaces, implemented
// by package consume: Results (the results waiting, and what becomes of
// them once a transaction ends) and Offsets (the windows: what each
// partition commits, and which results still belong to this session).
//
// Lock order: the loop's one lock, Loop.mu (the open transaction's produce
// answers), is taken alone: nothing is called while it is held, and the
// loop calls Results and Offsets without it.
package txnloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookline/hookline/pkg/headers"
)

// MaxResults bounds the records of one transaction, so one stays well
// inside the transaction timeout however much waits.
const MaxResults = 5000

// idlePoll is how often offsets that moved without a result (markers,
// records finished before a restart) are committed when nothing else is.
const idlePoll = time.Second

// endTimeout bounds one End of a transaction: its flush, offset commit,
// heartbeat and EndTxn. Half the transaction timeout (consume.go), so a
// broker that does not answer breaks the session well before the broker
// aborts the transaction itself.
const endTimeout = 30 * time.Second

// ErrSessionBroken marks the errors after which the transactional session
// cannot go on but a new one can: franz-go returns no retryable error from
// End (its transactional state is then unknown), and a broker unreachable
// while a transaction ends is one. A new session fences the old one's
// producer, aborting what it left open, and is restored like a restart.
var ErrSessionBroken = errors.New("transactional session broken")

// TopicPart names a partition of webhooks.raw or of a lane topic.
type TopicPart struct {
	Topic string
	Part  int32
}

// Point is what a transaction commits for one partition: the low-water
// mark and the finished offsets above it, as commit metadata.
type Point struct {
	Offset int64
	Meta   string
}

// Produced is a result's records to produce and what their produces
// answered. The loop owns every field but Records.
type Produced struct {
	// Records are written in the transaction, in order.
	Records []*kgo.Record
	// err is what a produce of the open transaction answered for one of
	// Records (Loop.mu); refused keeps it once that transaction aborted:
	// the next produce cuts every long header, and a second refusal stops
	// the loop (end).
	err, refused error
}

// Result is one record's finished work, waiting for a transaction.
type Result interface {
	// Record is the record read whose result this is (named in errors).
	Record() *kgo.Record
	// Produced is the result's records and their produce answers.
	Produced() *Produced
}

// Results are the finished results waiting for a transaction, and what
// becomes of them once one ends.
type Results[R Result] interface {
	// Waiting is how many results wait, and an error that stops the loop
	// (a state that cannot be read, a fetch that cannot go on).
	Waiting() (int, error)
	// Take removes and returns up to n results waiting, oldest first.
	Take(n int) []R
	// Requeue puts an aborted transaction's results back in front of
	// those waiting: nothing is called again.
	Requeue(batch []R)
	// Drop forgets a result that will not be committed: its partition
	// went away, and its next owner reads the record again.
	Drop(res R)
	// Apply is told the transaction holding batch committed; checkpoint
	// is, per changelog partition, the offset after the last record it
	// wrote there. An error stops the loop.
	Apply(batch []R, checkpoint map[int32]int64) error
	// Committed forgets the results of a committed transaction, after
	// Offsets.Committed.
	Committed(batch []R)
}

// Offsets are the offsets the transactions commit: a window per partition
// read (package offsets).
type Offsets[R Result] interface {
	// Begin keeps the results whose partition is still the one they were
	// read from, marking their offsets as in the transaction, and hands
	// the others to drop.
	Begin(batch []R, drop func(R)) []R
	// Points is what to commit for each partition whose low-water mark or
	// metadata moved since its last commit.
	Points() map[TopicPart]Point
	// Doomed returns a channel closed when partitions are next revoked
	// or lost: a transaction begun before cannot commit.
	Doomed() <-chan struct{}
	// Aborted returns an aborted transaction's offsets to running.
	Aborted(batch []R)
	// Committed moves the windows past a committed transaction.
	Committed(batch []R, points map[TopicPart]Point)
}

// Config is what the loop needs; every field is required.
type Config struct {
	// Changelog is the changelog topic: the offsets the transaction
	// reaches there are Apply's checkpoint.
	Changelog string
	// Topics are the topics read whose offsets the transactions commit
	// as Offsets.Points says (webhooks.raw and the lanes): franz-go's own
	// offsets for them are replaced.
	Topics []string
	// MaxRecordBytes is the largest record the topics take
	// (headers.Fit).
	MaxRecordBytes int
	// Wake is signalled when a result or an error arrives.
	Wake <-chan struct{}
	// Freed is called after a transaction ended in the loop (a reader
	// may wait for room).
	Freed  func()
	Logger *slog.Logger
	// Transactions counts the transactions ended by result (committed,
	// aborted); Seconds and Records observe each committed one's time and
	// size.
	Transactions *prometheus.CounterVec
	Seconds      prometheus.Observer
	Records      prometheus.Observer
}

// Loop runs one transactional session's transactions. Used by one
// goroutine, but for the produce answers (mu).
type Loop[R Result] struct {
	cfg       Config
	tx        *kgo.GroupTransactSession
	results   Results[R]
	offsets   Offsets[R]
	committed bool // a transaction committed

	// The open transaction: the results produced in it and what their
	// produces answered.
	open  bool
	start time.Time
	batch []R
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

// New returns the loop of tx's transactions over results and offsets.
func New[R Result](cfg Config, tx *kgo.GroupTransactSession, results Results[R], offsets Offsets[R]) *Loop[R] {
	return &Loop[R]{cfg: cfg, tx: tx, results: results, offsets: offsets}
}

// Open reports whether a transaction is open.
func (l *Loop[R]) Open() bool { return l.open }

// Committed reports whether a transaction of this loop committed.
func (l *Loop[R]) Committed() bool { return l.committed }

// Run runs transactions until ctx is done (nil) or an error: whenever
// finished results wait it produces them into the open transaction
// (produce), and it ends the transaction once its first produce was
// answered (end); every idlePoll it commits offsets that moved without a
// result (markers, records finished before a restart). The reader fetches
// meanwhile, so a record arriving during a transaction is decided, and
// often called, by the time the transaction ends.
func (l *Loop[R]) Run(ctx context.Context) error {
	idle := time.NewTimer(idlePoll)
	defer idle.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		pending, err := l.results.Waiting()
		switch {
		case err != nil:
			return err
		case pending > 0 && len(l.batch) < MaxResults:
			if err := l.produce(ctx); err != nil {
				return err
			}
			continue
		case l.open && (len(l.batch) >= MaxResults || isClosed(l.first)):
			if err := l.end(ctx, false); err != nil {
				return err
			}
			l.cfg.Freed()
			continue
		}
		var first, doomed <-chan struct{}
		if l.open {
			first, doomed = l.first, l.doomed
		}
		select {
		case <-ctx.Done():
		case <-l.cfg.Wake:
		case <-first:
		case <-doomed:
			if err := l.end(ctx, true); err != nil {
				return err
			}
		case <-idle.C:
			idle.Reset(idlePoll)
			if !l.open && len(l.offsets.Points()) > 0 {
				if err := l.end(ctx, false); err != nil {
					return err
				}
			}
		}
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Commit produces every finished result waiting (up to MaxResults) and
// ends the transaction at once: a stop's way.
func (l *Loop[R]) Commit(ctx context.Context) error {
	if err := l.produce(ctx); err != nil {
		return err
	}
	return l.end(ctx, false)
}

// produce puts every finished result waiting (up to MaxResults in the
// transaction) into the open transaction, beginning one if none is open:
// their offsets are marked as in it and their records produced. The loop
// keeps the transaction open until its first produce was answered (a
// produce round trip), producing what finishes meanwhile into it, then
// ends it (end): a record finishing while records are produced joins them
// instead of waiting for the whole transaction, and under load the fixed
// cost of a transaction (the offset commit, EndTxn and its markers) is
// shared by more records.
func (l *Loop[R]) produce(ctx context.Context) error {
	batch := l.results.Take(MaxResults - len(l.batch))

	// Results of partitions gone since they were read are dropped: the
	// next owner reads them again.
	batch = l.offsets.Begin(batch, l.results.Drop)
	if len(batch) == 0 {
		return nil
	}
	if err := l.begin(); err != nil {
		return err
	}
	// The transaction's end decides what becomes of the records, not ctx: a
	// stop commits what was produced.
	pctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, res := range batch {
		pr := res.Produced()
		for _, r := range pr.Records {
			l.fit(pr, r)
			wg.Add(1)
			l.wg.Add(1)
			isChangelog := r.Topic == l.cfg.Changelog
			l.tx.Produce(pctx, r, func(r *kgo.Record, err error) {
				defer l.wg.Done()
				defer wg.Done()
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					err = fmt.Errorf("produce %s: %w", r.Topic, err)
					if l.failed++; l.produceErr == nil {
						l.produceErr = err
					}
					if pr.err == nil {
						pr.err = err
					}
					return
				}
				if isChangelog && r.Offset+1 > l.checkpoint[r.Partition] {
					l.checkpoint[r.Partition] = r.Offset + 1
				}
			})
		}
	}
	if len(l.batch) == 0 {
		first := l.first
		go func() { wg.Wait(); close(first) }()
	}
	l.batch = append(l.batch, batch...)
	return nil
}

// fit makes a record of a result fit the topics' max.message.bytes before
// it is produced: its longest headers are cut (headers.Fit; the key and
// the body never change) and the cut named in hookline.headers-cut. A
// result whose transaction aborted on a refused produce has every long
// header cut, whatever its size: the topic took less than MaxRecordBytes
// says.
func (l *Loop[R]) fit(pr *Produced, r *kgo.Record) {
	limit := l.cfg.MaxRecordBytes
	if pr.refused != nil {
		limit = 0
	}
	if headers.Fit(r, limit) || limit == 0 {
		return
	}
	l.cfg.Logger.Error("a record is over the topics' limit even with its headers cut; producing it anyway, the broker will refuse it",
		"topic", r.Topic, "key", string(r.Key), "bytes", headers.Size(r), "limit", limit)
}

// begin opens a transaction if none is.
func (l *Loop[R]) begin() error {
	if l.open {
		return nil
	}
	// doomed is taken before Begin, so a revoke racing it is seen.
	doomed := l.offsets.Doomed()
	if err := l.tx.Begin(); err != nil {
		return fmt.Errorf("%w: begin transaction: %w", ErrSessionBroken, err)
	}
	l.open, l.start, l.batch, l.first, l.doomed = true, time.Now(), nil, make(chan struct{}), doomed
	l.produceErr, l.failed, l.checkpoint = nil, 0, map[int32]int64{}
	return nil
}

// end ends the open transaction (opening one if only offsets moved) with
// the low-water marks its results allow, committing unless abort, the
// partitions were lost or revoked, or ctx ended. A transaction that does
// not commit leaves its results waiting for the next one (nothing is
// called again); a broken session returns ErrSessionBroken.
//
// A stop (ctx cancelled) never interrupts an End: franz-go's End given a
// cancelled context returns before its EndTxn (or sends none), leaving the
// transaction open on the broker with its offset commit pending, and every
// new owner of its partitions then reads UNSTABLE_OFFSET_COMMIT until the
// broker's transaction timeout aborts it (a minute). So End runs on a
// context of its own, bounded by endTimeout; a stop that came meanwhile
// is seen after it, and only decides whether it commits (TryAbort once
// ctx ended: the stop then commits the results itself).
func (l *Loop[R]) end(ctx context.Context, abort bool) error {
	points := l.offsets.Points()
	if !l.open && len(points) == 0 {
		return nil
	}
	if err := l.begin(); err != nil {
		return err
	}
	select {
	case <-l.doomed:
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
		_ = l.tx.Client().Flush(ectx)
		l.mu.Lock()
		if l.failed > 0 {
			try = kgo.TryAbort
		}
		l.mu.Unlock()
	}
	committed, err := l.tx.End(kgo.PreTxnCommitFnContext(ectx, l.rewriteOffsets(points)), try)
	l.wg.Wait()
	batch := l.batch
	l.open, l.batch = false, nil
	if err != nil {
		return fmt.Errorf("%w: end transaction: %w", ErrSessionBroken, err)
	}
	if committed && l.produceErr != nil {
		// Cannot happen: a failed produce makes the transaction abort.
		// Refuse to apply states whose records may be missing.
		return fmt.Errorf("transaction committed with produce errors: %w", l.produceErr)
	}
	if !committed {
		l.cfg.Transactions.WithLabelValues("aborted").Inc()
		l.cfg.Logger.Info("transaction aborted; its results wait for the next one", "records", len(batch), "failed_produces", l.failed, "err", l.produceErr)
		if err := l.refusedAgain(batch); err != nil {
			return err
		}
		l.offsets.Aborted(batch)
		l.results.Requeue(batch)
		return nil
	}
	l.cfg.Transactions.WithLabelValues("committed").Inc()
	l.committed = true
	if err := l.results.Apply(batch, l.checkpoint); err != nil {
		return err
	}
	l.offsets.Committed(batch, points)
	l.results.Committed(batch)
	l.cfg.Seconds.Observe(time.Since(l.start).Seconds())
	l.cfg.Records.Observe(float64(len(batch)))
	return nil
}

// refusedAgain takes the produce errors of an aborted transaction's
// results: a result refused for the first time is produced again with every
// long header cut (fit); one refused again stops the processor with an
// error that names it, rather than move its partition past a delivery it
// could not record. Its offset stays uncommitted, so nothing is lost: the
// next owner, or this processor restarted once the cause is mended (a
// topic's max.message.bytes, an ACL), reads it again.
func (l *Loop[R]) refusedAgain(batch []R) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, res := range batch {
		pr := res.Produced()
		err := pr.err
		if err == nil {
			continue
		}
		pr.err = nil
		r := res.Record()
		if pr.refused != nil {
			return fmt.Errorf("%s[%d] offset %d (key %q): a record of its result was refused twice, the second time with its headers cut (%w); the processor stops rather than move past it",
				r.Topic, r.Partition, r.Offset, r.Key, err)
		}
		pr.refused = err
		l.cfg.Logger.Error("a record was refused; producing it again with its long headers cut",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
	}
	return nil
}

// rewriteOffsets makes the transaction commit exactly points, for
// Config.Topics (webhooks.raw and the lane topics): each partition's
// low-water mark with the finished offsets above it in the metadata.
// franz-go would commit every raw record polled, finished or not;
// partitions not in points keep their last commit. The lane topics are
// read by a plain client of the session (lane partition p with raw
// partition p), and their offsets are committed in the group's
// transactions like raw's.
func (l *Loop[R]) rewriteOffsets(points map[TopicPart]Point) func(*kmsg.TxnOffsetCommitRequest) error {
	ours := map[string]bool{}
	for _, t := range l.cfg.Topics {
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
			t := byTopic[tp.Topic]
			if t == nil {
				nt := kmsg.NewTxnOffsetCommitRequestTopic()
				nt.Topic, nt.TopicID = tp.Topic, ids[tp.Topic]
				t = &nt
				byTopic[tp.Topic] = t
			}
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition = tp.Part
			rp.Offset = pt.Offset
			rp.LeaderEpoch = -1
			meta := pt.Meta
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
