// Package consume is the processor's core (DESIGN §6 and docs/processor.md):
// a franz-go GroupTransactSession on webhooks.raw, read_committed, run as a
// pipeline rather than one batch at a time. It wires the layers below it
// (decide, admission, offsets, txnloop, deliver, restore) with Kafka.
//
//   - The reader (reader.go) polls the raw partitions and the lanes that
//     have room, and hands each record to its chain. The transactional
//     session joins the group and ends transactions but never fetches
//     (franz-go forbids polling during Begin and End); its loop, package
//     txnloop, produces finished work into the open transaction and ends
//     it whenever finished work is waiting.
//   - A chain runs the records of one ordering key (by default the
//     idempotency key) one at a time in offset order, each decision seeing
//     the state the previous one left, committed or not. A record's path
//     (session.run) is admit, plan (decide.MakePlan), execute (each call
//     through the admission chain, calls.go), settle (decide.Settle), and
//     the records its effects write.
//   - A record to deliver waits for a slot in its destination's lane: each
//     destination has its own in-flight bound, so a slow one fills only its
//     own slots (package admission: slots, queue limits, park reasons).
//   - A transaction carries the effects finished since the last one (state
//     changes, outcome / retry / DLQ records) and, per partition, the
//     low-water mark: the lowest offset not finished. Offsets finished above
//     it are named in the commit's metadata, so a new owner skips them.
//     Calls still in flight stay in flight across any number of commits.
//
// Badger learns the new states only after their transaction committed, with
// the changelog offsets they reached.
//
// The session holds its ownership and its reader, which hold the
// processor's setup and, for what they ask of the session, the session as
// the small interface each defines (recordSink, partitionUser); the
// ownership holds a partition per raw partition owned (partition.go),
// which asks its ownership through partitionHost. The transaction loop is
// the session goroutine's, over the session (txnloop.Results) and the
// ownership (txnloop.Offsets).
//
// Lock order, where two are held: reader.mu, then ownership.mu, then
// session.mu, then a record's token (recordToken.mu) or admission's
// Budget.mu, which take no other. A partition's mu (partition.mu) is taken
// alone or under ownership.mu and takes no other; its heldKeys.mu
// (partition.go) takes no other and is taken alone. The standbys' lock,
// hangingCheck.mu and the transaction loop's (txnloop) are taken alone; a
// lane's counters are atomics.
package consume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/providers/typelabel"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/standby"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// DefaultStandbyEvery is Config.StandbyEvery's default.
const DefaultStandbyEvery = standby.DefaultEvery

// Processor runs sessions until stopped.
type Processor struct {
	*setup
	// hanging checks for hanging transactions (after an assignment and
	// periodic).
	hanging *hangingCheck
	// committed is set when the current session commits a transaction.
	committed bool
	// fenced holds when the recent sessions were fenced by another
	// producer with our transactional id.
	fenced []time.Time
	// standby keeps standby partitions warm; nil without standbys.
	standby *standby.Set
}

// New validates cfg, builds a lane per destination and registers the
// metrics.
func New(cfg Config) (*Processor, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRecordBytes == 0 {
		cfg.MaxRecordBytes = topics.DefaultMaxBodyBytes + topics.HeaderRoom
	}
	if cfg.StandbyEvery <= 0 {
		cfg.StandbyEvery = DefaultStandbyEvery
	}
	if cfg.TransactionTimeout == 0 {
		cfg.TransactionTimeout = time.Minute
	}
	if cfg.ChainKey == nil {
		cfg.ChainKey = EntityChain
	}
	if cfg.MaxInflight < 1 || cfg.MaxBatch < 1 || cfg.MaxPending < 1 || cfg.MaxPendingBytes < 1 || cfg.ShutdownGrace < 0 {
		return nil, fmt.Errorf("consume: MaxInflight, MaxBatch, MaxPending and MaxPendingBytes must be positive")
	}
	reg := cfg.Registry
	p := &Processor{setup: &setup{cfg: cfg, mOutcomes: newOutcomeMetrics(reg), mTxn: newTxnMetrics(reg), mParts: newPartitionMetrics(reg),
		mHolds: newHoldMetrics(reg), mHanging: newHangingMetrics(reg), mLanes: newLaneMetrics(reg), mLag: newLagMetrics(reg), mBudget: newBudgetMetrics(reg),
		types: typelabel.New(cfg.Providers.NamedEventTypes(), cfg.EventTypeLabels)}}
	registerStoreKeys(reg, cfg.Store)
	// Registered with or without standbys: the standby gauges read 0
	// then, as they always did.
	standbyM := standby.NewMetrics(reg)
	p.hanging = &hangingCheck{p: p.setup}
	p.routes = newRouting(cfg, p.mLanes)
	for topic := range p.routes.byLane {
		p.laneNames = append(p.laneNames, topic)
	}
	for topic := range p.routes.moved {
		p.laneNames = append(p.laneNames, topic)
	}
	sort.Strings(p.laneNames)
	if cfg.StandbyReplicas > 0 {
		p.standby = standby.New(standby.Config{Topic: cfg.Names.Raw, Store: cfg.Store, Restore: p.restoreConfig(), Every: cfg.StandbyEvery,
			Logger: cfg.Logger, Metrics: standbyM})
	}
	return p, nil
}

// errSessionBroken marks the errors after which the transactional session
// cannot go on but a new one can (txnloop.ErrSessionBroken).
var errSessionBroken = txnloop.ErrSessionBroken

// Twin fencing: a session fenced this many times within fencedWindow means
// another live processor uses our transactional id.
const (
	fencedLimit  = 3
	fencedWindow = 2 * time.Minute
)

// Run consumes until ctx is done, then lets calls in flight finish (for
// ShutdownGrace), commits what finished, leaves the group and closes the
// session. A broken session is replaced, with backoff, instead of ending the
// process; other errors end Run.
func (p *Processor) Run(ctx context.Context) error {
	caughtUp := make(chan struct{})
	cctx, stopControl := context.WithCancel(ctx)
	defer stopControl()
	go p.followControl(cctx, caughtUp)
	// reports.go: one producer of the control topic's reports, when some
	// destination has a breaker (breakers.go), some route is ordered
	// (held.go), auto-paused (autopause.go) or adaptive (limits.go).
	reports, closeReports := p.newReportWriter(len(p.breakerWatches()) > 0 || len(p.orderedRoutes()) > 0 || p.anyAutoPause() || p.anyAdaptive())
	defer closeReports()
	go p.publishBreakers(cctx, reports) // breakers.go: breaker reports for dlq serve's re-drive
	go p.autoPause(cctx, reports)       // autopause.go: the pause of a route whose every call failed
	go p.publishLimits(cctx, reports)   // limits.go: the adaptive limits a restart starts from
	if p.standby != nil {
		go p.standby.Run(cctx)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-caughtUp:
	}
	if err := p.keepMovedLanes(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("route default lanes: %w", err)
	}
	const first = 500 * time.Millisecond
	backoff := first
	for {
		p.committed = false
		err := p.runSession(ctx, reports)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errSessionBroken) {
			return err
		}
		if errors.Is(err, kerr.ProducerFenced) {
			if ferr := p.fencedAgain(err); ferr != nil {
				return ferr
			}
		}
		if p.committed { // it worked for a while: this is a new outage
			backoff = first
		}
		p.mTxn.sessions.Inc()
		p.cfg.Logger.Warn("transactional session broken; starting a new one (work not committed is read again)", "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// fencedAgain records a fencing and returns an error once another live
// processor evidently shares our transactional id.
func (p *Processor) fencedAgain(err error) error {
	now := time.Now()
	keep := p.fenced[:0]
	for _, t := range p.fenced {
		if now.Sub(t) < fencedWindow {
			keep = append(keep, t)
		}
	}
	p.fenced = append(keep, now)
	p.cfg.Logger.Error("another producer took this processor's transactional id: is a second processor running with the same HOOKLINE_INSTANCE_ID?",
		"instance", p.cfg.InstanceID, "transactional_id", p.cfg.TransactionalID, "err", err)
	if len(p.fenced) < fencedLimit {
		return nil
	}
	return fmt.Errorf("fenced %d times in %s by another processor with transactional id %s: two running processors share instance id %q; give each its own HOOKLINE_INSTANCE_ID (or leave it unset: each state dir then has its own)",
		len(p.fenced), fencedWindow, p.cfg.TransactionalID, p.cfg.InstanceID)
}

// sessionMetadataMinAge bounds how long a produce refused with
// CONCURRENT_TRANSACTIONS waits for its metadata update (runSession); it
// is also the fastest the session asks for metadata while a partition
// reports an error (a leader moving): 20 times a second at most.
const sessionMetadataMinAge = 50 * time.Millisecond

// runSession runs one transactional session until ctx is done or an error.
func (p *Processor) runSession(ctx context.Context, reports reportWriter) error {
	s, err := newSession(p.setup, p.standby, p.hanging)
	if err != nil {
		return err
	}
	opts := append(append([]kgo.Opt(nil), p.cfg.SessionOpts...),
		kgo.ConsumerGroup(p.cfg.Names.Group(topics.GroupProcessor)),
		kgo.ConsumeTopics(p.cfg.Names.Raw),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		// A partition resumed after its restore is fetched once the fetch
		// in flight returns: 5s by default when nothing arrives.
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.TransactionalID(p.cfg.TransactionalID),
		// The changelog and lane copies go to the partition of their raw
		// record: by its entity (hookline.entity) or its key.
		kgo.RecordPartitioner(topics.Partitioner()),
		kgo.TransactionTimeout(p.cfg.TransactionTimeout),
		// A transaction ends once its first produce is answered (package
		// txnloop), and what finishes meanwhile is produced into it: the
		// batching comes from the loop, so a linger would only delay the
		// first produce, and with it every record of the transaction
		// (franz-go's default is 10 ms).
		kgo.ProducerLinger(0),
		// With transaction version 2 (Kafka 4.x) a produce that opens the
		// next transaction before the broker has written the last one's
		// markers is refused with CONCURRENT_TRANSACTIONS. franz-go then
		// stops that partition and resends only after a metadata update,
		// which waits for the metadata's minimum age since the last one:
		// up to 5 s by default, and End waits for that produce (issue 36:
		// 19 to 78 refusals in a bench-e2e run). Request failures still
		// back off (RetryBackoffFn, 250 ms up).
		kgo.MetadataMinAge(sessionMetadataMinAge),
		kgo.RebalanceTimeout(2*time.Minute),
		kgo.OnPartitionsAssigned(s.own.assigned),
		kgo.OnPartitionsRevoked(s.own.revoked),
		kgo.OnPartitionsLost(s.own.lost),
	)
	if p.standby != nil {
		// Ours first; cooperative-sticky while a member without standbys
		// is in the group (a rolling change of the setting).
		opts = append(opts, kgo.Balancers(p.standby.Balancer(p.cfg.StandbyReplicas), kgo.CooperativeStickyBalancer()))
	}
	tx, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		s.reader.closeUnstarted()
		return fmt.Errorf("transactional session: %w", err)
	}
	l := txnloop.New(txnloop.Config{
		Changelog:      p.cfg.Names.Changelog,
		Topics:         append([]string{p.cfg.Names.Raw}, p.laneTopics()...),
		MaxRecordBytes: p.cfg.MaxRecordBytes,
		Wake:           s.ready,
		Freed:          s.freed,
		Logger:         p.cfg.Logger,
		Transactions:   p.mTxn.txns,
		Seconds:        p.mTxn.batchSeconds,
		Records:        p.mTxn.batchRecords,
	}, tx, s, s.own)
	lctx, stopLanes := context.WithCancel(ctx)
	go s.reader.run(lctx)
	defer func() {
		stopLanes()
		s.reader.close()
		s.own.stopAll()
		s.work.Wait()
		s.runners.Close()
		tx.Close()
	}()
	// The watchers end with the session, not only with ctx.
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	laneOf := map[string][2]string{}
	for topic, t := range p.routes.byLane {
		laneOf[topic] = [2]string{t.lane.provider, t.lane.route}
	}
	go p.mLag.watchLag(wctx, tx.Client(), p.cfg.Names.Group(topics.GroupProcessor), p.cfg.Names.Raw, laneOf, p.cfg.Logger)

	// Take the transactional id now, not at the first produce: that fences
	// a previous incarnation killed mid-transaction and aborts its open
	// transaction. Until then the changelog's last stable offset stays
	// behind it, and restore (which reads to the settled end) would wait
	// for the transaction timeout: 60s per kill -9, measured.
	if _, _, err := tx.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("%w: transactional id %s: %w", errSessionBroken, p.cfg.TransactionalID, err)
	}
	go p.hanging.watch(wctx, tx.Client())
	go p.watchHolds(wctx, s.own, reports) // held.go: held entities' gauges and reports
	err = s.loop(ctx, l)
	p.committed = l.Committed()
	return err
}
