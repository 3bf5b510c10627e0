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
//     the state the previous one left, committed or not.
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
// No type here holds a pointer to one that points back: the session holds
// its ownership and its reader, which hold the processor's setup and funcs
// for what they ask of the session; the transaction loop is the session
// goroutine's, over the session (txnloop.Results) and the ownership
// (txnloop.Offsets).
//
// Lock order, where two are held: reader.mu, then ownership.mu, then
// session.mu, then a record's token (recordToken.mu) or admission's
// Budget.mu, which take no other. A partition's heldKeys.mu (ordering.go)
// takes no other and is taken alone. The standbys' lock, Processor.hangMu
// and the transaction loop's (txnloop) are taken alone; a lane's counters
// are atomics.
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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/restore"
	"github.com/hookline/hookline/processor/internal/state"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// Config is what the processor needs; every field is required unless noted.
type Config struct {
	Names     topics.Names
	Schedule  retry.Schedule
	Jitter    float64
	Providers *providers.Registry
	Router    *deliver.Router
	Store     *state.Store
	// RetryPolicies are the routes' own retry policies (retry.tiers
	// in the providers file: Schedule restricted with Only), by
	// route.Key(provider, route); a route not in it uses
	// Schedule. Optional.
	RetryPolicies map[string]retry.Schedule
	// StandbyReplicas is how many standbys the group's balancer names per
	// partition (HOOKLINE_STANDBY_REPLICAS): members that keep its state
	// warm, so a new owner restores seconds of changelog, not all of it.
	// 0: none, and franz-go's cooperative-sticky balancer.
	StandbyReplicas int
	// StandbyEvery is how often a standby partition is caught up with its
	// changelog: at most this much of it is read again when the partition
	// becomes this processor's. Optional: DefaultStandbyEvery.
	StandbyEvery time.Duration
	// MaxInflight is a destination's in-flight bound when its providers
	// entry sets no destination.max_inflight (HOOKLINE_MAX_INFLIGHT).
	MaxInflight int
	// MaxPending bounds, process-wide, the records read and not yet
	// committed or dropped (HOOKLINE_MAX_PENDING): reading stops while it is
	// reached (twice it with several priority classes, which then compete
	// for admission: package admission), and while the partitions' windows span
	// admission.SpanPerRecord times as many offsets.
	MaxPending int
	// MaxPendingBytes bounds the body bytes of records read and not yet
	// committed (HOOKLINE_MAX_PENDING_BYTES).
	MaxPendingBytes int64
	// MaxBatch bounds the finished destination calls not yet committed,
	// process-wide: a crash repeats at most these and the calls in flight
	// (HOOKLINE_BATCH_MAX_RECORDS).
	MaxBatch int
	// ShutdownGrace is how long a stop lets calls in flight finish before
	// it cancels them (cancelled ones are read again by the next owner).
	ShutdownGrace time.Duration
	// MaxRecordBytes is the largest record the topics take (their
	// max.message.bytes: topics.Env.MaxRecordBytes). Every record is made
	// to fit it before it is produced (headers.Fit). Optional: the
	// default body limit plus topics.HeaderRoom.
	MaxRecordBytes int
	// ChainKey names the chain a record runs in: records with one chain key
	// run one at a time, in offset order. Optional: EntityChain.
	ChainKey func(*kgo.Record) string
	// HoldsEvery is how often the entities held in the partitions owned
	// are counted, for the gauges and the control topic's held reports
	// (held.go); only when some provider is ordered. Optional:
	// DefaultHoldsEvery.
	HoldsEvery time.Duration
	// TransactionTimeout is how long the broker lets a transaction of
	// this processor stay open before it aborts it
	// (HOOKLINE_TRANSACTION_TIMEOUT): after a kill, the partitions it wrote
	// are read by nobody (read_committed) until then. Optional: 1 minute.
	TransactionTimeout time.Duration
	// SessionOpts build the transactional session: connection options plus
	// anything a test adds. The loop adds group, topic, transactional id and
	// callbacks.
	SessionOpts []kgo.Opt
	// NewClient builds plain clients (restore readers) with the same
	// connection options.
	NewClient func(opts ...kgo.Opt) (*kgo.Client, error)
	// TransactionalID must be unique per running instance and stable
	// across its restarts, so a restarted instance fences its zombie.
	TransactionalID string
	// InstanceID names the instance in errors (HOOKLINE_INSTANCE_ID).
	InstanceID string
	Logger     *slog.Logger
	Registry   prometheus.Registerer
	Health     *obs.Health
	Now        func() time.Time
}

// setup is the processor as New built it: its configuration, metrics and
// routes. Nothing changes it after New; every session, and the ownership
// and reader of each, reads it and holds nothing else of the Processor.
type setup struct {
	cfg    Config
	m      *metrics
	routes routing
	// laneNames are the lanes' topics, sorted.
	laneNames []string
}

// Processor runs sessions until stopped.
type Processor struct {
	*setup
	// hangMu serializes hanging transaction checks (after an assignment
	// and periodic), so no marker is written twice.
	hangMu sync.Mutex
	// committed is set when the current session commits a transaction.
	committed bool
	// fenced holds when the recent sessions were fenced by another
	// producer with our transactional id.
	fenced []time.Time
	// standby keeps standby partitions warm; nil without standbys.
	standby *standbys
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
	p := &Processor{setup: &setup{cfg: cfg, m: newMetrics(cfg.Registry, cfg.Store)}}
	p.routes = newRouting(cfg, p.m)
	for topic := range p.routes.byLane {
		p.laneNames = append(p.laneNames, topic)
	}
	sort.Strings(p.laneNames)
	if cfg.StandbyReplicas > 0 {
		p.standby = newStandbys(p)
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
	go p.publishBreakers(cctx) // breakers.go: breaker reports for dlq serve's re-drive
	if p.standby != nil {
		go p.standby.run(cctx)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-caughtUp:
	}
	const first = 500 * time.Millisecond
	backoff := first
	for {
		p.committed = false
		err := p.runSession(ctx)
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
		p.m.sessions.Inc()
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

// runSession runs one transactional session until ctx is done or an error.
func (p *Processor) runSession(ctx context.Context) error {
	s, err := newSession(p)
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
		kgo.RebalanceTimeout(2*time.Minute),
		kgo.OnPartitionsAssigned(s.own.assigned),
		kgo.OnPartitionsRevoked(s.own.revoked),
		kgo.OnPartitionsLost(s.own.lost),
	)
	if p.standby != nil {
		// Ours first; cooperative-sticky while a member without standbys
		// is in the group (a rolling change of the setting).
		opts = append(opts, kgo.Balancers(p.standby.balancer(p.cfg.StandbyReplicas), kgo.CooperativeStickyBalancer()))
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
		Transactions:   p.m.txns,
		Seconds:        p.m.batchSeconds,
		Records:        p.m.batchRecords,
	}, tx, s, s.own)
	lctx, stopLanes := context.WithCancel(ctx)
	go s.reader.run(lctx)
	defer func() {
		stopLanes()
		s.reader.close()
		s.own.stopAll()
		s.work.Wait()
		tx.Close()
	}()
	// The watchers end with the session, not only with ctx.
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	laneOf := map[string]*lane{}
	for topic, t := range p.routes.byLane {
		laneOf[topic] = t.lane
	}
	go p.m.watchLag(wctx, tx.Client(), p.cfg.Names.Group(topics.GroupProcessor), p.cfg.Names.Raw, laneOf, p.cfg.Logger)

	// Take the transactional id now, not at the first produce: that fences
	// a previous incarnation killed mid-transaction and aborts its open
	// transaction. Until then the changelog's last stable offset stays
	// behind it, and restore (which reads to the settled end) would wait
	// for the transaction timeout: 60s per kill -9, measured.
	if _, _, err := tx.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("%w: transactional id %s: %w", errSessionBroken, p.cfg.TransactionalID, err)
	}
	go p.watchHanging(wctx, tx.Client())
	go p.watchHolds(wctx, s.own) // held.go: held entities' gauges and reports
	err = s.loop(ctx, l)
	p.committed = l.Committed()
	return err
}

// providerLabel bounds metric label values to configured providers.
func (p *setup) providerLabel(name string) string {
	if _, ok := p.cfg.Providers.Get(name); ok {
		return name
	}
	return "unknown"
}

// restoreConfig is the restore configuration for this processor.
func (p *setup) restoreConfig() restore.Config {
	return restore.Config{
		Topic:     p.cfg.Names.Changelog,
		NewClient: p.cfg.NewClient,
		Decode:    decide.StoredFromChangelog,
		Now:       p.cfg.Now,
		Logger:    p.cfg.Logger,
	}
}

// EntityChain is the default chain key: the provider and the entity of an
// ordered provider's record (hookline.entity), so that one entity's
// records are decided and called one at a time in the order ingest
// accepted them; else the record key (the idempotency key). A key keeps
// its entity through retries, lanes and replays (the header travels with
// the record), so its records stay in one chain. The "\x00" cannot occur
// in a key (ingest refuses control characters) nor in a provider's name.
func EntityChain(r *kgo.Record) string {
	if e, ok := headers.Get(r, headers.Entity); ok && e != "" {
		return headers.Value(r, headers.Provider) + "\x00" + e
	}
	return string(r.Key)
}
