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
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/state"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// session is one transactional session's work: the records read and not yet
// committed, their chains, and the state their decisions left.
type session struct {
	p      *setup
	own    *ownership
	reader *reader

	mu      sync.Mutex
	chains  map[string]*chain
	overlay map[string]overlaid // key -> state decided, not yet in the store
	seq     uint64
	results []*result // finished, waiting for a transaction
	err     error     // a reason to stop the processor

	// budget counts the records read and not yet committed or dropped.
	budget *admission.Budget
	// lanes is the lanes' admission (the budget's classes and each
	// destination's slots, queue and park reasons).
	lanes admission.Admitter

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
	// (admission.Budget.Admit): it waits for a slot or calls its destination.
	admitted bool
}

// overlaid is a key's state decided by a record whose transaction has not
// been applied to the store yet.
type overlaid struct {
	part int32
	st   decide.State
	// holds are an entity's holds, for an entity key (ordering.go).
	holds decide.Holds
	seq   uint64
}

// result is what one record leaves for the next transaction.
type result struct {
	item
	// out are the records it writes, and what their produces answered
	// (package txnloop).
	out    txnloop.Produced
	change *state.Change // nil: a skip or a poison record
	seq    uint64        // the overlay entry change made
	// holdChange is the record's entity's new holds (ordering.go); nil:
	// unchanged. holdSeq is its overlay entry.
	holdChange *state.Change
	holdSeq    uint64
	tok        *recordToken // its share of session.tokens; nil: none
	stats      []stat       // one per outcome written
	// settled is closed once the result committed or was dropped; nil
	// for a result its chain does not wait for (ordering.go, barrier).
	settled *settled
}

type stat struct{ provider, route, status, origin string }

// newSession builds a session of p: its reader and its ownership of
// partitions, each given what it uses of the session (funcs), so neither
// holds the session.
func newSession(p *Processor) (*session, error) {
	s := &session{p: p.setup, chains: map[string]*chain{}, overlay: map[string]overlaid{}, ready: make(chan struct{}, 1), room: make(chan struct{}, 1),
		tokens: make(chan struct{}, p.cfg.MaxBatch), budget: p.newBudget()}
	s.lanes = s.budget
	var err error
	if s.reader, err = newReader(p.setup, s.budget, s.lanes, s.room, s.overBudget, s.dispatch, s.fail); err != nil {
		return nil, err
	}
	s.own = newOwnership(p.setup, p.standby, p.completeHanging, s.reader.add, func(gone map[int32]bool) {
		s.reader.remove(gone)
		s.forget(gone)
	})
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

// loop runs the session's transactions (txnloop.Loop.Run) until ctx is
// done or an error, then stops (stop).
func (s *session) loop(ctx context.Context, l *txnloop.Loop[*result]) error {
	if err := l.Run(ctx); err != nil {
		return err
	}
	return s.stop(ctx, l)
}

// freed wakes a reader waiting for the budget.
func (s *session) freed() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// overBudget reports whether the reader must wait (admission.Budget.Full).
func (s *session) overBudget() bool {
	span := s.own.span()
	s.p.m.pending.Set(float64(span))
	return s.budget.Full(span)
}

// dispatch hands each record to its chain. admitted says the records were
// held and admitted already (admission.Budget.HoldAdmitted: lane records the reader
// gated).
func (s *session) dispatch(recs []*kgo.Record, admitted bool) {
	for _, r := range recs {
		class := s.p.classOf(r)
		ow := s.own.accept(r)
		if ow == nil {
			if admitted {
				s.budget.Release(class, len(r.Value), true)
			}
			continue
		}
		k := s.p.cfg.ChainKey(r)
		it := item{r: r, ow: ow, class: class, admitted: admitted}
		if !admitted {
			s.budget.Hold(class, len(r.Value))
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
			wait := res.settled
			s.mu.Lock()
			s.results = append(s.results, res)
			s.mu.Unlock()
			s.signal()
			wait.wait(it.ow.ctx)
		}
	}
}

// release gives back a result's call token.
func (s *session) release(res *result) {
	releaseToken(res.tok)
	res.tok = nil
}

// releaseToken gives back a record's token, if it holds one.
func releaseToken(tok *recordToken) {
	if tok == nil {
		return
	}
	tok.mu.Lock()
	defer tok.mu.Unlock()
	if tok.held {
		tok.held = false
		<-tok.tokens
	}
}

// drop forgets a record that leaves no result.
func (s *session) drop(it item) { s.budget.Release(it.class, len(it.r.Value), it.admitted) }

// dropResult forgets a result that is not committed (its partition went
// away): its budget and token; its chain goes on.
func (s *session) dropResult(res *result) {
	s.drop(res.item)
	s.release(res)
	res.settled.close()
}

// run decides one record, calls its destination if the decision says so,
// and returns its result; nil when the record was abandoned (its partition
// went away, or the processor stops): it is then read again by the
// partition's next owner.
func (s *session) run(it *item) (*result, error) {
	p, r := s.p, it.r
	if it.ow.ctx.Err() != nil {
		return nil, nil
	}
	res := &result{item: *it, tok: &recordToken{tokens: s.tokens}}
	a, err := arrival(r, p.cfg.Now())
	a.FromLane = r.Topic != p.cfg.Names.Raw
	if err != nil {
		p.cfg.Logger.Warn("malformed record sent to the DLQ", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		res.out.Records = []*kgo.Record{p.poisonRecord(r, a.Now, err)}
		res.stats = []stat{{provider: "unknown", status: outcome.StatusDead, origin: "unknown"}}
		return res, nil
	}
	a.Route = p.routeOf(r, a)
	if _, known := p.cfg.Providers.Get(a.Provider); !known && a.Route == "" {
		// Not in this processor's providers file (ingest's may be newer):
		// a retryable failure of the route default, not a delivery to
		// nowhere, so it is delivered once the file is.
		a.Route = headers.DefaultRoute
	}
	cur, err := s.stateOf(r.Partition, string(r.Key))
	if err != nil {
		return nil, err
	}
	if process, why := decide.Admit(cur, a); !process {
		return s.skipped(res, a, why), nil
	}
	ord, err := s.orderedOf(it.ow, r, a.Provider)
	if err != nil {
		return nil, err
	}
	bad := p.invalidPayload(r, a) // invalid.go: nil, or called on no route
	if a.Route == "" {            // a fresh ingest record: every route it matches
		var buf [4]*target
		ts, filed := p.matching(r, a.Provider, buf[:0])
		if !filed || (bad != nil && len(ts) == 0) { // delivered nowhere: its outcome is the product; invalid: the key's one DLQ entry
			next, effects := decide.Step(cur, a, bad, p.policyOf(nil, r, a.Provider))
			return s.decided(res, a, next, effects, map[string]called{a.Route: {err: bad}}, ord)
		}
		var calls map[string]called
		if bad == nil {
			// A route held for the record's entity is not called (ordering.go).
			free, held := ts, map[string]called(nil)
			if ord != nil {
				free = make([]*target, 0, len(ts))
				for _, t := range ts {
					if e := ord.check(t.route, string(r.Key)); e != nil {
						if held == nil {
							held = map[string]called{}
						}
						held[t.route] = called{err: decide.Held(e)}
						continue
					}
					free = append(free, t)
				}
			}
			calls = s.deliverAll(it, res, a, free)
			for route, c := range held {
				calls[route] = c
			}
		} else { // dead for each route it matches, none called
			calls = make(map[string]called, len(ts))
			for _, t := range ts {
				calls[t.route] = called{err: bad}
			}
		}
		results := make([]decide.RouteResult, len(ts))
		for i, t := range ts {
			if calls[t.route].abandoned {
				s.release(res)
				return nil, nil
			}
			results[i] = decide.RouteResult{Route: t.route, Result: calls[t.route].err, Policy: p.policyOf(t, r, a.Provider)}
		}
		next, effects := decide.StepRoutes(cur, a, results, p.policyOf(nil, r, a.Provider))
		return s.decided(res, a, next, effects, calls, ord)
	}
	t := p.target(a.Provider, a.Route)
	var c called
	switch _, known := p.cfg.Providers.Get(a.Provider); {
	case bad != nil:
		c.err = bad
	case !known:
		c.err = fmt.Errorf("provider %q is not in this processor's providers file", a.Provider)
	case t != nil:
		if e := ord.check(a.Route, string(r.Key)); e != nil {
			c.err = decide.Held(e)
			break
		}
		c = s.deliver(it, res, a, t, true)
	case p.routes.filed[a.Provider] || a.Route != headers.DefaultRoute:
		c.err = errRouteGone(a.Provider, a.Route)
	} // else: a provider delivered nowhere: its outcome only
	if c.abandoned {
		s.release(res)
		return nil, nil
	}
	next, effects := decide.Step(cur, a, c.err, p.policyOf(t, r, a.Provider))
	return s.decided(res, a, next, effects, map[string]called{a.Route: c}, ord)
}

// skipped is the result of a record Admit skipped: its outcome only.
func (s *session) skipped(res *result, a decide.Arrival, why string) *result {
	p := s.p
	res.out.Records = []*kgo.Record{p.outcomeRecord(res.r, a, outcome.StatusDuplicate, 0, nil, decide.Effect{Route: a.Route})}
	res.stats = []stat{{provider: p.providerLabel(a.Provider), route: a.Route, status: outcome.StatusDuplicate, origin: a.Origin}}
	if p.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) { // spares a duplicate the arguments' allocations
		p.cfg.Logger.Debug("skipped", "key", string(res.r.Key), "origin", a.Origin, "attempt", a.Attempt, "why", why)
	}
	return res
}

// deliverAll delivers a fresh record to each of its routes (ts), the
// calls at once, and returns what became of each, by route name: a slow
// route holds back none of its siblings' calls.
func (s *session) deliverAll(it *item, res *result, a decide.Arrival, ts []*target) map[string]called {
	calls := make(map[string]called, len(ts))
	if len(ts) == 1 {
		calls[ts[0].route] = s.deliver(it, res, a, ts[0], true)
		return calls
	}
	// Parking and admission first, in route order (they change the
	// item), then the calls. Each call's goroutine writes only its own
	// element of got; the map is filled after they end.
	got := make([]called, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		if t.lane == nil { // a topic route: nothing to call, nothing to wait for
			continue
		}
		if why := s.whyPark(it, res, a, t); why != nil {
			got[i] = called{err: decide.NotCalled(why)}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.deliver(it, res, a, t, false)
		}()
	}
	wg.Wait()
	for i, t := range ts {
		calls[t.route] = got[i]
	}
	return calls
}

// deliver delivers the record to one route: nothing to call for a topic
// route or a route without destination (a nil error: the decision writes
// what is due), else its HTTP destination, unless check and its lane park
// it first (whyPark).
func (s *session) deliver(it *item, res *result, a decide.Arrival, t *target, check bool) called {
	if t.lane == nil {
		return called{}
	}
	if check {
		if why := s.whyPark(it, res, a, t); why != nil {
			return called{err: decide.NotCalled(why)}
		}
	}
	return s.call(it.ow.ctx, res.tok, t.lane, it.r, a)
}

// whyPark says why a record is parked in a route's lane before any call:
// the destination paused, its breaker refusing, its queue long, or the
// record's priority class over its share (admission.Admitter.Park); nil lets it
// wait for a slot, admitting the record (once) if it was not. A record
// read from its lane was admitted when it was parked.
func (s *session) whyPark(it *item, res *result, a decide.Arrival, t *target) error {
	if t.lane == nil || a.FromLane {
		return nil
	}
	admitted, why := s.lanes.Park(t.lane.adm, it.class, it.admitted)
	if admitted && !it.admitted {
		it.admitted, res.admitted = true, true
	}
	return why
}

// decided completes a result with the records the decision's effects
// write and the key's next state (the store gets its binary form), and
// puts the state in the overlay; nil when the partition went away
// meanwhile.
func (s *session) decided(res *result, a decide.Arrival, next decide.State, effects []decide.Effect, calls map[string]called, ord *ordered) (*result, error) {
	r, key := res.r, string(res.r.Key)
	var err error
	if res.out.Records, err = s.records(r, a, next, effects, calls); err != nil {
		return nil, err
	}
	if ord != nil {
		ok, err := s.holdsChange(res, ord, ord.after(s.p, a, key, effects, calls))
		if err != nil {
			return nil, err
		}
		if !ok {
			s.release(res)
			return nil, nil
		}
		res.settled = barrier(res.tok)
	}
	provider := s.p.providerLabel(a.Provider)
	for _, e := range effects {
		if e.Kind == decide.ToOutcomes {
			res.stats = append(res.stats, stat{provider: provider, route: e.Route, status: string(e.Status), origin: a.Origin})
		}
	}
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

// records builds what a decision's effects write, in their order; calls
// are what became of each route's delivery.
//
// A parked record (decide.ToLane) goes to its route's lane topic: the
// exact record (key, body, headers, plus hookline.route) to lane partition
// r.Partition (same key, same partition count). Its outcome says where it
// waits and why. It comes back through the lane reader when the
// destination has room, and a record read from a lane that meets an open
// breaker is parked again at the lane's end. Retry-tier and DLQ copies
// carry hookline.route too; a topic route's delivery (decide.ToTopic) is
// the exact record with hookline.route, to its topic.
func (s *session) records(r *kgo.Record, a decide.Arrival, next decide.State, effects []decide.Effect, calls map[string]called) ([]*kgo.Record, error) {
	p := s.p
	out := make([]*kgo.Record, 0, len(effects))
	for _, e := range effects {
		c := calls[e.Route]
		switch e.Kind {
		case decide.ToChangelog:
			val, err := decide.Encode(next)
			if err != nil {
				return nil, fmt.Errorf("encode state of %q: %w", r.Key, err)
			}
			cr := &kgo.Record{Topic: p.cfg.Names.Changelog, Key: r.Key, Value: val}
			if e, ok := headers.Get(r, headers.Entity); ok {
				cr.Headers = []kgo.RecordHeader{{Key: headers.Entity, Value: []byte(e)}} // placed with its raw record
			}
			out = append(out, cr)
		case decide.ToTier:
			cause := c.err
			if e.Held > 0 {
				cause = nil // waiting behind its entity's head is no failed attempt
			}
			tr := p.failedRecord(p.cfg.Names.Retry[e.Tier-1], r, a, next, e.Attempt, cause, true)
			headers.SetTime(tr, headers.DueAt, p.cfg.Schedule.DueAt(a.Now, e.Tier, p.cfg.Jitter, rand.Float64))
			setRoute(tr, e.Route)
			setHeld(tr, e.Held)
			out = append(out, tr)
		case decide.ToDLQ:
			dr := p.failedRecord(p.cfg.Names.DLQ, r, a, next, e.Attempt, c.err, e.DeadReason == headers.DeadExhausted)
			headers.Set(dr, headers.DeadReason, e.DeadReason)
			setRoute(dr, e.Route)
			setHeld(dr, 0)
			out = append(out, dr)
		case decide.ToLane:
			ln := p.target(a.Provider, e.Route).lane
			if !ln.adm.Room() {
				s.reader.hold(ln)
			}
			ln.parked.Inc()
			lc := routedCopy(ln.topic, r, e.Route)
			setHeld(lc, 0)
			out = append(out, lc)
		case decide.ToTopic:
			tc := routedCopy(p.target(a.Provider, e.Route).topic, r, e.Route)
			setHeld(tc, 0)
			out = append(out, tc)
		case decide.ToOutcomes:
			out = append(out, p.outcomeRecord(r, a, string(e.Status), c.took, c.err, e))
		}
	}
	return out, nil
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
			s.dropResult(res)
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
// committed. Each commit is bounded by txnloop's endTimeout, the calls by the
// grace, so the stop needs no deadline of its own: one that expired would
// make every later end abort, and the stop would never get its results
// committed.
func (s *session) stop(ctx context.Context, l *txnloop.Loop[*result]) error {
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
		if pending > 0 || l.Open() {
			if err := l.Commit(bg); err != nil {
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
