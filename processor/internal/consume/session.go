package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/state"
)

// idlePoll is how often offsets that moved without a result (markers,
// records finished before a restart) are committed when nothing else is.
const idlePoll = time.Second

// session is one transactional session's work: the records read and not yet
// committed, their chains, and the state their decisions left.
type session struct {
	p      *Processor
	tx     *kgo.GroupTransactSession
	own    *ownership
	reader *reader

	mu      sync.Mutex
	chains  map[string]*chain
	overlay map[string]overlaid // key -> state decided, not yet in the store
	seq     uint64
	results []*result // finished, waiting for a transaction
	err     error     // a reason to stop the processor

	// budget counts the records read and not yet committed or dropped.
	budget *budget
	// txn is the open transaction (the loop's).
	txn txn

	// tokens bound the finished calls not yet committed (MaxBatch): a
	// crash repeats at most these and the calls in flight.
	tokens chan struct{}
	ready  chan struct{} // a result or an error arrived (capacity 1)
	room   chan struct{} // a transaction committed (capacity 1)
	work   sync.WaitGroup
}

// chain is the queue of one chain key's records.
type chain struct{ queue []item }

// item is a record read from a partition this session owns.
type item struct {
	r     *kgo.Record
	ow    *owned
	class providers.Priority
	// admitted says the record holds one of its class's admissions
	// (budget.admit): it waits for a slot or calls its destination.
	admitted bool
}

// overlaid is a key's state decided by a record whose transaction has not
// been applied to the store yet.
type overlaid struct {
	part int32
	st   decide.State
	seq  uint64
}

// result is what one record leaves for the next transaction.
type result struct {
	item
	outputs []*kgo.Record
	change  *state.Change // nil: a skip or a poison record
	seq     uint64        // the overlay entry change made
	token   bool          // holds a token of session.tokens
	stat    stat
	// produceErr is what a produce of the open transaction answered for
	// one of outputs (txn.mu); refused keeps it once that transaction
	// aborted: the next produce cuts every long header, and a second
	// refusal stops the processor (commit.go, end).
	produceErr, refused error
}

type stat struct{ provider, status, origin string }

func newSession(p *Processor) (*session, error) {
	s := &session{p: p, chains: map[string]*chain{}, overlay: map[string]overlaid{}, ready: make(chan struct{}, 1), room: make(chan struct{}, 1),
		tokens: make(chan struct{}, p.cfg.MaxBatch), budget: newBudget(p.cfg, p.m)}
	s.own = newOwnership(s)
	var err error
	if s.reader, err = newReader(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// fail stops the processor with err (a store that cannot be read).
func (s *session) fail(err error) {
	s.mu.Lock()
	s.err = errors.Join(s.err, err)
	s.mu.Unlock()
	s.signal()
}

// loop runs transactions until ctx is done or an error: whenever finished
// results wait it produces them into the open transaction (produce), and it
// ends the transaction once its first produce was answered (end); every
// idlePoll it commits offsets that moved without a result (markers,
// records finished before a restart). The reader fetches meanwhile, so a
// record arriving during a transaction is decided, and often called, by the
// time the transaction ends.
func (s *session) loop(ctx context.Context) error {
	idle := time.NewTimer(idlePoll)
	defer idle.Stop()
	t := &s.txn
	for {
		if ctx.Err() != nil {
			return s.stop(ctx)
		}
		s.mu.Lock()
		err, pending := s.err, len(s.results)
		s.mu.Unlock()
		switch {
		case err != nil:
			return err
		case pending > 0 && len(t.batch) < maxTxnResults:
			if err := s.produce(ctx); err != nil {
				return err
			}
			continue
		case t.open && (len(t.batch) >= maxTxnResults || isClosed(t.first)):
			if err := s.end(ctx, false); err != nil {
				return err
			}
			s.freed()
			continue
		}
		var first, doomed <-chan struct{}
		if t.open {
			first, doomed = t.first, t.doomed
		}
		select {
		case <-ctx.Done():
		case <-s.ready:
		case <-first:
		case <-doomed:
			if err := s.end(ctx, true); err != nil {
				return err
			}
		case <-idle.C:
			idle.Reset(idlePoll)
			if !t.open && s.own.moved() {
				if err := s.end(ctx, false); err != nil {
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

// freed wakes a reader waiting for the budget.
func (s *session) freed() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// overBudget reports whether the reader must wait (budget.full).
func (s *session) overBudget() bool {
	span := s.own.span()
	s.p.m.pending.Set(float64(span))
	return s.budget.full(span)
}

// dispatch hands each record to its chain. admitted says the records were
// held and admitted already (budget.holdAdmitted: lane records the reader
// gated).
func (s *session) dispatch(recs []*kgo.Record, admitted bool) {
	for _, r := range recs {
		class := s.p.classOf(r)
		ow := s.own.accept(r)
		if ow == nil {
			if admitted {
				s.budget.release(class, len(r.Value), true)
			}
			continue
		}
		k := s.p.cfg.ChainKey(r)
		it := item{r: r, ow: ow, class: class, admitted: admitted}
		if !admitted {
			s.budget.hold(class, len(r.Value))
		}
		s.mu.Lock()
		if c, ok := s.chains[k]; ok {
			c.queue = append(c.queue, it)
			s.mu.Unlock()
			continue
		}
		c := &chain{queue: []item{it}}
		s.chains[k] = c
		s.mu.Unlock()
		s.work.Add(1)
		go s.runChain(k, c)
	}
}

// runChain runs a chain's records in order until its queue is empty.
func (s *session) runChain(k string, c *chain) {
	defer s.work.Done()
	for {
		s.mu.Lock()
		if len(c.queue) == 0 {
			delete(s.chains, k)
			s.mu.Unlock()
			return
		}
		it := c.queue[0]
		c.queue = c.queue[1:]
		s.mu.Unlock()
		res, err := s.run(&it)
		switch {
		case err != nil:
			s.fail(err)
			s.drop(it)
		case res == nil:
			s.drop(it)
		default:
			s.mu.Lock()
			s.results = append(s.results, res)
			s.mu.Unlock()
			s.signal()
		}
	}
}

// release gives back a result's call token.
func (s *session) release(res *result) {
	if res.token {
		res.token = false
		<-s.tokens
	}
}

// drop forgets a record that leaves no result, or a result that is not
// committed (its partition went away).
func (s *session) drop(it item) { s.budget.release(it.class, len(it.r.Value), it.admitted) }

// run decides one record, calls its destination if the decision says so,
// and returns its result; nil when the record was abandoned (its partition
// went away, or the processor stops): it is then read again by the
// partition's next owner.
func (s *session) run(it *item) (*result, error) {
	p, r, ow := s.p, it.r, it.ow
	if ow.ctx.Err() != nil {
		return nil, nil
	}
	now := p.cfg.Now()
	res := &result{item: *it}
	a, err := arrival(r, now)
	a.FromLane = r.Topic != p.cfg.Names.Raw
	if err != nil {
		p.cfg.Logger.Warn("malformed record sent to the DLQ", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		res.outputs = []*kgo.Record{p.poisonRecord(r, now, err)}
		res.stat = stat{provider: "unknown", status: StatusDead, origin: "unknown"}
		return res, nil
	}
	key := string(r.Key)
	cur, err := s.stateOf(r.Partition, key)
	if err != nil {
		return nil, err
	}
	if process, why := decide.Admit(cur, a); !process {
		res.outputs = []*kgo.Record{p.outcomeRecord(r, a, StatusDuplicate, 0, nil, decide.Route{})}
		res.stat = stat{provider: p.providerLabel(a.Provider), status: StatusDuplicate, origin: a.Origin}
		if p.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) { // spares a duplicate the arguments' allocations
			p.cfg.Logger.Debug("skipped", "key", key, "origin", a.Origin, "attempt", a.Attempt, "why", why)
		}
		return res, nil
	}
	ttl := decide.DefaultTTL
	if pr, ok := p.cfg.Providers.Get(a.Provider); ok {
		ttl = pr.DedupTTL
	}
	ln := p.lanes[a.Provider]
	if ln != nil && !a.FromLane {
		why := ln.whyPark()
		if why == nil && !s.budget.admit(it.class) {
			why = errClassShare
		}
		if why != nil {
			return s.park(res, ln, cur, a, ttl, why)
		}
		it.admitted, res.admitted = true, true
	}
	abandoned, token, took, herr := p.call(ow.ctx, s.tokens, r, a)
	if abandoned {
		return nil, nil
	}
	if ln != nil && (errors.Is(herr, deliver.ErrCircuitOpen) || errors.Is(herr, errPaused) || errors.Is(herr, errNoRoom)) {
		return s.park(res, ln, cur, a, ttl, herr) // not called: wait in the lane, no attempt used, no tier
	}
	res.token = token
	p.m.handlerSeconds.WithLabelValues(p.providerLabel(a.Provider)).Observe(took.Seconds())

	next, route := decide.Apply(cur, a, herr, p.scheduleOf(a.Provider), ttl)
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
	return s.decided(res, next, out, status, a)
}

// decided completes a result with the key's next state (its changelog
// record is in out; the store gets its binary form) and the records to
// produce, and puts the state in the overlay; nil when the partition went
// away meanwhile.
func (s *session) decided(res *result, next decide.State, out []*kgo.Record, status string, a decide.Arrival) (*result, error) {
	r, key := res.r, string(res.r.Key)
	res.outputs = out
	res.stat = stat{provider: s.p.providerLabel(a.Provider), status: status, origin: a.Origin}
	stored, err := decide.EncodeStored(next)
	if err != nil {
		return nil, fmt.Errorf("encode stored state of %q: %w", key, err)
	}
	res.change = &state.Change{Partition: r.Partition, Key: key, Value: stored, ExpiresAt: next.ExpiresAt}
	seq, ok := s.remember(res.ow, r.Partition, key, next)
	if !ok {
		s.release(res)
		return nil, nil
	}
	res.seq = seq
	return res, nil
}

// park sends a record its destination has no room for to the
// destination's lane topic: the exact record (key, body, headers) to lane
// partition r.Partition (same key, same partition count), the key's state
// parked, and an outcome saying where it waits and why (its error: the
// destination paused, its breaker open, its queue full, no room within
// parkAfter, or the priority class over its share). No call was made, so no
// attempt is used. The lane copy comes back through the lane reader when
// the destination has room, and a record read from a lane that meets an
// open breaker is parked again at the lane's end.
func (s *session) park(res *result, ln *lane, cur *decide.State, a decide.Arrival, ttl time.Duration, why error) (*result, error) {
	p, r := s.p, res.r
	next := decide.Park(cur, a, ttl)
	val, err := decide.Encode(next)
	if err != nil {
		return nil, fmt.Errorf("encode state of %q: %w", r.Key, err)
	}
	if !ln.room() {
		s.reader.hold(ln)
	}
	lr := &kgo.Record{Topic: ln.topic, Key: r.Key, Value: r.Value, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
	o := p.outcomeRecord(r, a, StatusParked, 0, why, decide.Route{})
	out := []*kgo.Record{{Topic: p.cfg.Names.Changelog, Key: r.Key, Value: val}, lr, o}
	ln.parked.Inc()
	return s.decided(res, next, out, StatusParked, a)
}

// stateOf is the key's state as the last decision left it: from the
// overlay while that decision is not in the store, else from the store.
func (s *session) stateOf(part int32, key string) (*decide.State, error) {
	s.mu.Lock()
	o, ok := s.overlay[key]
	s.mu.Unlock()
	if ok {
		st := o.st
		return &st, nil
	}
	v, ok, err := s.p.cfg.Store.Get(part, key)
	if err != nil {
		return nil, fmt.Errorf("read state of %q: %w", key, err)
	}
	if !ok {
		return nil, nil
	}
	st, err := decide.DecodeStored(v)
	if err != nil {
		// Unreadable cached state: the changelog is the truth. Stop; the
		// partition is rebuilt on restart.
		return nil, fmt.Errorf("decode state of %q: %w", key, err)
	}
	return &st, nil
}

// remember puts a decided state in the overlay, unless the partition went
// away (checked under the same lock as the revoke's clean-up, so a revoked
// partition leaves no entry behind).
func (s *session) remember(ow *owned, part int32, key string, st decide.State) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ow.ctx.Err() != nil {
		return 0, false
	}
	s.seq++
	s.overlay[key] = overlaid{part: part, st: st, seq: s.seq}
	return s.seq, true
}

// forget drops the overlay entries and waiting results of partitions that
// went away; their work is read again by the next owner.
func (s *session) forget(parts map[int32]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, o := range s.overlay {
		if parts[o.part] {
			delete(s.overlay, k)
		}
	}
	kept := s.results[:0]
	for _, res := range s.results {
		if parts[res.r.Partition] {
			s.drop(res.item)
			s.release(res)
			continue
		}
		kept = append(kept, res)
	}
	clear(s.results[len(kept):])
	s.results = kept
}

// stop ends the session on shutdown: no more polling; calls in flight get
// ShutdownGrace to finish while what finishes is committed; then the rest
// is cancelled (read again by the next owner) and the last results are
// committed. Each commit is bounded by endTimeout (end), the calls by the
// grace, so the stop needs no deadline of its own: one that expired would
// make every later end abort, and the stop would never get its results
// committed.
func (s *session) stop(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	grace := time.NewTimer(s.p.cfg.ShutdownGrace)
	defer grace.Stop()
	for graceLeft := true; ; {
		s.mu.Lock()
		busy, pending, err := len(s.chains) > 0, len(s.results), s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if pending > 0 || s.txn.open {
			if err := s.commit(bg); err != nil {
				return err
			}
			continue
		}
		if !busy {
			return nil
		}
		if !graceLeft {
			s.own.cancelWork()
			s.work.Wait()
			continue
		}
		select {
		case <-s.ready:
		case <-grace.C:
			s.p.cfg.Logger.Info("stopping: cancelling destination calls still in flight (read again by the next owner)")
			graceLeft = false
		}
	}
}
