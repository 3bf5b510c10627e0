// Package consume is the processor's poll loop (DESIGN §6): a franz-go
// GroupTransactSession on webhooks.raw, read_committed. One polled batch is
// one Kafka transaction holding the changelog updates, the outcome / retry /
// DLQ records and the consumed offsets. Badger learns the new states only
// after the transaction committed, with the changelog offsets they reached.
//
// Within a batch, records of different keys run concurrently (at most
// MaxInflight handler calls at once); records of one key run in offset order,
// each decision seeing the state the previous one left. Outputs are produced
// in the batch's offset order once every handler returned.
package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
)

// Config is what the poll loop needs; every field is required unless noted.
type Config struct {
	Names     topics.Names
	Schedule  retry.Schedule
	Jitter    float64
	Providers *providers.Registry
	Router    *deliver.Router
	Store     *state.Store
	// MaxInflight bounds concurrent handler calls (HOOKLINE_MAX_INFLIGHT).
	MaxInflight int
	// MaxBatch bounds the records of one transaction; BatchTimeout bounds
	// the handlers of one batch (a handler still running then fails
	// retryably), so a transaction stays well inside the transaction and
	// rebalance timeouts.
	MaxBatch     int
	BatchTimeout time.Duration
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
	Logger          *slog.Logger
	Registry        prometheus.Registerer
	Health          *obs.Health
	Now             func() time.Time
}

// Processor runs the loop.
type Processor struct {
	cfg  Config
	m    *metrics
	sess *kgo.GroupTransactSession
	own  *ownership
	// hangMu serializes hanging transaction checks (after an assignment
	// and periodic), so no marker is written twice.
	hangMu sync.Mutex
	// committed is set when the current session commits a transaction.
	committed bool
}

// New validates cfg and registers the metrics.
func New(cfg Config) (*Processor, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxInflight < 1 || cfg.MaxBatch < 1 || cfg.BatchTimeout <= 0 {
		return nil, fmt.Errorf("consume: MaxInflight, MaxBatch and BatchTimeout must be positive")
	}
	p := &Processor{cfg: cfg, m: newMetrics(cfg.Registry, cfg.Store)}
	return p, nil
}

// errSessionBroken marks the errors after which the transactional session
// cannot go on but a new one can: franz-go returns no retryable error from
// End (its transactional state is then unknown), and a broker unreachable
// while a transaction ends is one. A new session fences the old one's
// producer, aborting what it left open, and is restored like a restart.
var errSessionBroken = errors.New("transactional session broken")

// Run consumes until ctx is done, then ends the open transaction (aborting
// it: its records are read again by whoever owns the partition next), leaves
// the group and closes the session. A broken session is replaced, with
// backoff, instead of ending the process; other errors end Run.
func (p *Processor) Run(ctx context.Context) error {
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
		if p.committed { // it worked for a while: this is a new outage
			backoff = first
		}
		p.m.sessions.Inc()
		p.cfg.Logger.Warn("transactional session broken; starting a new one (its open batch is read again)", "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// runSession runs one transactional session until ctx is done or an error.
func (p *Processor) runSession(ctx context.Context) error {
	own := newOwnership(p)
	p.own = own
	opts := append(append([]kgo.Opt(nil), p.cfg.SessionOpts...),
		kgo.ConsumerGroup(p.cfg.Names.Group(topics.GroupProcessor)),
		kgo.ConsumeTopics(p.cfg.Names.Raw),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.TransactionalID(p.cfg.TransactionalID),
		kgo.TransactionTimeout(time.Minute),
		kgo.RebalanceTimeout(2*time.Minute),
		kgo.OnPartitionsAssigned(own.assigned),
		kgo.OnPartitionsRevoked(own.revoked),
		kgo.OnPartitionsLost(own.lost),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("transactional session: %w", err)
	}
	p.sess = sess
	defer func() {
		own.stopAll()
		sess.Close()
	}()
	// The watchers end with the session, not only with ctx.
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	go p.m.watchLag(wctx, sess.Client(), p.cfg.Names.Group(topics.GroupProcessor), p.cfg.Logger)

	// Take the transactional id now, not at the first produce: that fences
	// a previous incarnation killed mid-transaction and aborts its open
	// transaction. Until then the changelog's last stable offset stays
	// behind it, and restore (which reads to the settled end) would wait
	// for the transaction timeout: 60s per kill -9, measured.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("%w: transactional id %s: %w", errSessionBroken, p.cfg.TransactionalID, err)
	}
	go p.watchHanging(wctx, sess.Client())

	for {
		fs := sess.PollRecords(ctx, p.cfg.MaxBatch)
		if ctx.Err() != nil {
			return nil
		}
		if err := fatalFetchError(fs, p.cfg.Logger); err != nil {
			return fmt.Errorf("%w: %w", errSessionBroken, err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := p.transact(ctx, recs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// fatalFetchError logs fetch errors and returns the ones the loop cannot
// continue past.
func fatalFetchError(fs kgo.Fetches, log *slog.Logger) error {
	var fatal error
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		var ce *kgo.ErrFirstReadEOF
		if errors.As(err, &ce) {
			return
		}
		if t == "" && p == -1 { // client closed or unrecoverable
			fatal = err
		}
	})
	return fatal
}

// transact runs one batch as one transaction.
func (p *Processor) transact(ctx context.Context, recs []*kgo.Record) error {
	start := time.Now()
	// Records of a partition still restoring must not be processed, and must
	// not be committed either: abort, and the session rewinds to the last
	// committed offsets (they are read again once the partition resumes).
	if part, ok := p.own.allReady(recs); !ok {
		p.cfg.Logger.Info("batch holds records of a partition still restoring: aborting it", "partition", part)
		if err := p.sess.Begin(); err != nil {
			return fmt.Errorf("%w: begin transaction: %w", errSessionBroken, err)
		}
		_, err := p.sess.End(ctx, kgo.TryAbort)
		p.m.txns.WithLabelValues("aborted").Inc()
		if err != nil {
			return fmt.Errorf("%w: end transaction: %w", errSessionBroken, err)
		}
		return nil
	}
	if err := p.sess.Begin(); err != nil {
		return fmt.Errorf("%w: begin transaction: %w", errSessionBroken, err)
	}
	doomed := p.own.doomed()
	b := p.process(ctx, recs)

	var (
		mu         sync.Mutex
		produceErr error
		checkpoint = map[int32]int64{}
		wg         sync.WaitGroup
	)
	outputs, lost := b.outputs, isClosed(doomed)
	if lost {
		outputs = nil // the session aborts this batch: produce nothing
	}
	for _, out := range outputs {
		for _, r := range out {
			wg.Add(1)
			isChangelog := r.Topic == p.cfg.Names.Changelog
			p.sess.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					produceErr = errors.Join(produceErr, fmt.Errorf("produce %s: %w", r.Topic, err))
					return
				}
				if isChangelog && r.Offset+1 > checkpoint[r.Partition] {
					checkpoint[r.Partition] = r.Offset + 1
				}
			})
		}
	}
	try := kgo.TryCommit
	if b.err != nil || ctx.Err() != nil || lost {
		try = kgo.TryAbort
	}
	if try == kgo.TryCommit {
		produced := make(chan struct{})
		go func() { wg.Wait(); close(produced) }()
		select {
		case <-produced:
		case <-doomed:
			// Partitions lost or revoked mid-batch (a broker gone, a
			// rebalance): the session aborts the batch anyway. Aborting
			// now drops the records still buffered; flushing would deliver
			// them to the broker once it is back, where they would join any
			// transaction of ours it left hanging (package hanging) and
			// this abort would then throw that one's records away too.
			try = kgo.TryAbort
		}
	}
	committed, err := p.sess.End(ctx, try)
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
		p.cfg.Logger.Info("transaction aborted; the batch will be read again", "records", len(recs), "err", errors.Join(b.err, produceErr))
		return nil
	}
	p.m.txns.WithLabelValues("committed").Inc()
	p.committed = true
	if err := p.cfg.Store.Apply(b.changes, checkpoint); err != nil {
		// Badger is only a cache of the changelog: without this write it is
		// behind, never ahead, and restore catches it up. Stop so the
		// partitions are restored before anything else is decided.
		return fmt.Errorf("apply committed states to the store: %w", err)
	}
	for _, s := range b.stats {
		p.m.records.WithLabelValues(s.provider, s.status).Inc()
		if s.status == StatusDuplicate {
			p.m.duplicates.WithLabelValues(s.origin).Inc()
		}
	}
	p.m.batchSeconds.Observe(time.Since(start).Seconds())
	p.own.firstRecords(recs)
	return nil
}

// batch is the result of processing one poll.
type batch struct {
	outputs [][]*kgo.Record // per input record, in input order
	changes []state.Change
	stats   []stat
	err     error // a reason to abort the whole batch
}

type stat struct{ provider, status, origin string }

// process runs every record: one goroutine per key, in offset order within
// a key, handler calls bounded by MaxInflight.
func (p *Processor) process(ctx context.Context, recs []*kgo.Record) *batch {
	b := &batch{outputs: make([][]*kgo.Record, len(recs)), stats: make([]stat, len(recs))}
	byKey := map[string][]int{}
	var order []string
	for i, r := range recs {
		k := string(r.Key)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	hctx, cancel := context.WithTimeout(ctx, p.cfg.BatchTimeout)
	defer cancel()
	sem := make(chan struct{}, p.cfg.MaxInflight)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	changes := make([][]state.Change, len(order))
	for ki, k := range order {
		wg.Add(1)
		go func(ki int, idx []int) {
			defer wg.Done()
			ch, err := p.processKey(hctx, sem, recs, idx, b)
			changes[ki] = ch
			if err != nil {
				mu.Lock()
				b.err = errors.Join(b.err, err)
				mu.Unlock()
			}
		}(ki, byKey[k])
	}
	wg.Wait()
	for _, ch := range changes {
		b.changes = append(b.changes, ch...)
	}
	return b
}

// processKey handles the records of one key in order. It writes outputs and
// stats into b at the records' indexes (each index is owned by one key, so no
// lock is needed) and returns the key's state changes.
func (p *Processor) processKey(ctx context.Context, sem chan struct{}, recs []*kgo.Record, idx []int, b *batch) ([]state.Change, error) {
	first := recs[idx[0]]
	key := string(first.Key)
	var cur *decide.State
	if len(first.Key) > 0 {
		v, ok, err := p.cfg.Store.Get(first.Partition, key)
		if err != nil {
			return nil, fmt.Errorf("read state of %q: %w", key, err)
		}
		if ok {
			st, err := decide.Decode(v)
			if err != nil {
				// Unreadable cached state: the changelog is the truth. Abort
				// the batch; the partition is rebuilt on restart.
				return nil, fmt.Errorf("decode state of %q: %w", key, err)
			}
			cur = &st
		}
	}
	var changes []state.Change
	for _, i := range idx {
		r := recs[i]
		now := p.cfg.Now()
		a, err := arrival(r, now)
		if err != nil {
			p.cfg.Logger.Warn("malformed record sent to the DLQ", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			b.outputs[i] = []*kgo.Record{p.poisonRecord(r, now, err)}
			b.stats[i] = stat{provider: "unknown", status: StatusDead, origin: "unknown"}
			continue
		}
		process, why := decide.Admit(cur, a)
		if !process {
			b.outputs[i] = []*kgo.Record{p.outcomeRecord(r, a, StatusDuplicate, 0, nil, decide.Route{})}
			b.stats[i] = stat{provider: p.providerLabel(a.Provider), status: StatusDuplicate, origin: a.Origin}
			p.cfg.Logger.Debug("skipped", "key", key, "origin", a.Origin, "attempt", a.Attempt, "why", why)
			continue
		}
		sem <- struct{}{}
		start := time.Now()
		herr := p.handle(ctx, r, a)
		took := time.Since(start)
		<-sem
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err() // shutting down: abort the batch, record no failure
		}
		p.m.handlerSeconds.WithLabelValues(p.providerLabel(a.Provider)).Observe(took.Seconds())

		ttl := decide.DefaultTTL
		if pr, ok := p.cfg.Providers.Get(a.Provider); ok {
			ttl = pr.DedupTTL
		}
		next, route := decide.Apply(cur, a, herr, p.cfg.Schedule, ttl)
		val, err := decide.Encode(next)
		if err != nil {
			return nil, fmt.Errorf("encode state of %q: %w", key, err)
		}
		out := []*kgo.Record{{Topic: p.cfg.Names.Changelog, Key: r.Key, Value: val}}
		status := StatusDone
		switch route.Kind {
		case decide.Retry:
			status = StatusRetrying
			tr := p.failedRecord(p.cfg.Names.Retry[route.Tier-1], r, a, next, route.Attempt, herr, true)
			due := p.cfg.Schedule.DueAt(now, route.Tier, p.cfg.Jitter, rand.Float64)
			headers.SetTime(tr, headers.DueAt, due)
			out = append(out, tr)
		case decide.Dead:
			status = StatusDead
			dr := p.failedRecord(p.cfg.Names.DLQ, r, a, next, route.Attempt, herr, route.DeadReason == headers.DeadExhausted)
			headers.Set(dr, headers.DeadReason, route.DeadReason)
			out = append(out, dr)
		}
		out = append(out, p.outcomeRecord(r, a, status, took, herr, route))
		b.outputs[i] = out
		b.stats[i] = stat{provider: p.providerLabel(a.Provider), status: status, origin: a.Origin}
		changes = append(changes, state.Change{Partition: r.Partition, Key: key, Value: val, ExpiresAt: next.ExpiresAt})
		cur = &next
	}
	return changes, nil
}

// handle runs the provider's destination, if it has one.
func (p *Processor) handle(ctx context.Context, r *kgo.Record, a decide.Arrival) error {
	if _, ok := p.cfg.Providers.Get(a.Provider); !ok {
		return fmt.Errorf("provider %q is not in this processor's providers file", a.Provider)
	}
	h, ok := p.cfg.Router.For(a.Provider)
	if !ok {
		return nil // outcomes only
	}
	err := h.Handle(ctx, deliver.Delivery{
		Key:         string(r.Key),
		Provider:    a.Provider,
		EventType:   headers.Value(r, headers.EventType),
		Attempt:     a.Attempt,
		Body:        r.Value,
		ContentType: headers.Value(r, headers.ContentType),
		Headers:     headers.HTTP(r),
	})
	if errors.Is(err, deliver.ErrCircuitOpen) {
		// The destination was not called: straight to the first tier, the
		// attempt not used up.
		return retry.NotAttempted(err)
	}
	return err
}

// providerLabel bounds metric label values to configured providers.
func (p *Processor) providerLabel(name string) string {
	if _, ok := p.cfg.Providers.Get(name); ok {
		return name
	}
	return "unknown"
}

// restoreConfig is the restore configuration for this processor.
func (p *Processor) restoreConfig() restore.Config {
	return restore.Config{
		Topic:     p.cfg.Names.Changelog,
		NewClient: p.cfg.NewClient,
		Decode:    decide.DecodeExpiry,
		Now:       p.cfg.Now,
		Logger:    p.cfg.Logger,
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
