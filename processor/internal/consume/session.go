package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/providers/transform"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/offsets"
	"github.com/hookline/hookline/processor/internal/runners"
	"github.com/hookline/hookline/processor/internal/standby"
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
	// calls is the admission chain every destination call goes through
	// (calls.go).
	calls caller

	// tokens bound the finished calls not yet committed (MaxBatch): a
	// crash repeats at most these and the calls in flight.
	tokens chan struct{}
	ready  chan struct{} // a result or an error arrived (capacity 1)
	room   chan struct{} // a transaction committed (capacity 1)
	work   sync.WaitGroup
	// runners run the chains on goroutines kept between chains, with the
	// stack a chain's run grew (package runners).
	runners *runners.Pool
}

// idleRunners bounds the chain goroutines kept waiting for a chain: at
// 3,200 events/s, with some 30 ms from a chain's start to its record's
// commit (bench-e2e's half load: the call, the wait for a transaction),
// about a hundred chains run at once; an idle runner's stack is halved by
// each garbage collection while it waits.
const idleRunners = 256

// chain is the queue of one chain key's records.
type chain struct{ queue []item }

// overlaid is a key's state decided by a record whose transaction has not
// been applied to the store yet.
type overlaid struct {
	part int32
	st   decide.State
	// holds are an entity's holds, for an entity key (ordering.go).
	holds decide.Holds
	seq   uint64
}

// newSession builds a session of p: its reader and its ownership of
// partitions, each given the session as the small interface it defines of
// what it uses (recordSink, partitionUser).
func newSession(p *setup, sb *standby.Set, hanging hangingGate) (*session, error) {
	s := &session{p: p, chains: map[string]*chain{}, overlay: map[string]overlaid{}, ready: make(chan struct{}, 1), room: make(chan struct{}, 1),
		tokens: make(chan struct{}, p.cfg.MaxBatch), budget: p.newBudget(), runners: runners.New(idleRunners)}
	s.lanes = s.budget
	s.calls = newChain(s.budget)
	var err error
	if s.reader, err = newReader(p, s.budget, s.lanes, s.room, s); err != nil {
		return nil, err
	}
	s.own = newOwnership(p, sb, hanging, s)
	return s, nil
}

// The session is what its reader and its ownership ask it for.
var (
	_ recordSink    = (*session)(nil)
	_ partitionUser = (*session)(nil)
)

// partitionReady starts reading a restored partition at its windows
// (ownership's partitionUser); its empty lanes wait for a parked record.
func (s *session) partitionReady(part int32, wins map[string]*offsets.Window, empty []string) {
	s.reader.add(part, wins, empty)
}

// partitionsGone stops reading partitions that went away and drops their
// work (ownership's partitionUser).
func (s *session) partitionsGone(parts map[int32]bool) {
	s.reader.remove(parts)
	s.forget(parts)
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
	s.p.mBudget.pending.Set(float64(span))
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
		it := item{r: r, ow: ow, class: class, admitted: admitted}
		if !admitted {
			s.budget.Hold(class, len(r.Value))
		}
		s.queue(it)
	}
}

// trial runs r, the head record of ln's lane, as the route's trial call
// (recordSink; trial.go). A record not to be run (its partition not
// owned, or finished before) makes no trial.
func (s *session) trial(r *kgo.Record, ln *lane) {
	ow := s.own.accept(r)
	if ow == nil {
		ln.trial.end(trialNotCalled)
		return
	}
	it := item{r: r, ow: ow, class: s.p.classOf(r), trial: ln}
	s.budget.Hold(it.class, len(r.Value))
	s.queue(it)
}

// queue puts an item at the end of its chain, starting the chain (on a
// runner) if it has none.
func (s *session) queue(it item) {
	k := s.p.cfg.ChainKey(it.r)
	s.mu.Lock()
	if c, ok := s.chains[k]; ok {
		c.queue = append(c.queue, it)
		s.mu.Unlock()
		return
	}
	c := &chain{queue: []item{it}}
	s.chains[k] = c
	s.mu.Unlock()
	s.work.Add(1)
	s.runners.Go(func() { s.runChain(k, c) })
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
			wait.wait(it.ow.context())
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
	endSpan(res.span, errAbandoned)
}

// run takes one record through its path, top to bottom: its arrival and
// its key's state, Admit (a skip writes its outcome only), the plan
// (decide.MakePlan: per route call, hold, park, dead-letter, retry or
// write), the plan's calls through the admission chain (execute), and
// the settle (decide.Settle: the key's next state, the entity's holds,
// the effects), turned into records (settled). It returns nil when the
// record was abandoned (its partition went away, or the processor
// stops): it is then read again by the partition's next owner.
func (s *session) run(it *item) (*result, error) {
	if it.trial == nil {
		return s.run1(it)
	}
	res, err := s.run1(it)
	if res == nil && err == nil && !it.ow.gone() {
		s.unread(it)
	}
	if res == nil && it.ended == trialAnswered {
		it.ended = trialNotCalled // answered, but its partition went away: its next owner calls again
	}
	it.trial.trial.end(it.ended)
	if it.ended == trialAnswered {
		s.p.cfg.Logger.Warn("trial call of an auto-paused route answered: its receiver answers again; resume the route with dlq route resume", "provider", it.trial.provider, "route", it.trial.route)
	}
	return res, err
}

// unread takes a trial's record back to the head of its lane: out of its
// partition's window and the reader's fetch, so it is read and run again
// when the lane is (its trial made no attempt and wrote nothing).
func (s *session) unread(it *item) {
	if it.ow.unread(it.r.Topic, it.r.Offset) {
		s.reader.unread(it.r)
	}
}

// run1 is run for one record.
func (s *session) run1(it *item) (*result, error) {
	if it.ow.gone() {
		return nil, nil
	}
	if !s.p.cfg.Tracer.On() {
		return s.runIn(it.ow.context(), it)
	}
	ctx, span := s.p.startProcess(it.ow.context(), it.r)
	res, err := s.runIn(ctx, it)
	if res == nil {
		endSpan(span, errAbandoned)
		return nil, err
	}
	res.span = span
	return res, err
}

// runIn is run in ctx: the partition's context, with the record's span
// when tracing is on.
func (s *session) runIn(ctx context.Context, it *item) (*result, error) {
	r := it.r
	a, err := s.p.arrivalOf(r)
	if err != nil {
		return s.poisoned(ctx, it, a, err), nil
	}
	cur, err := s.stateOf(r.Partition, string(r.Key))
	if err != nil {
		return nil, err
	}
	if process, why := decide.Admit(cur, a); !process {
		return s.skipped(ctx, it, a, why), nil
	}
	in, ord, sent, err := s.planInput(it, a, cur)
	if err != nil {
		return nil, err
	}
	pl := decide.MakePlan(in)
	if pl.Skip != "" {
		return s.skipped(ctx, it, a, pl.Skip), nil
	}
	rec := &callRecord{r: r, a: a, class: it.class, tok: &recordToken{tokens: s.tokens}, admitted: it.admitted, eventType: s.p.eventTypeLabel(a.Provider, r), sent: sent, trial: it.trial}
	results, ok := s.execute(ctx, rec, pl)
	it.admitted = rec.admitted
	if ok && it.trial != nil {
		var commits bool
		if commits, it.ended = trialCommits(pl, results); !commits {
			ok = false // back to the head of its lane (run): no attempt spent
		}
	}
	if !ok {
		releaseToken(rec.tok)
		return nil, nil
	}
	return s.settled(ctx, &result{item: *it, tok: rec.tok}, pl, routeResults{pl.Steps, results, sent}, decide.Settle(pl, results), ord)
}

// arrivalOf is the record's arrival (its headers, now), with the route it
// is for. A record hookline cannot deduplicate is an error (poisoned).
func (p *setup) arrivalOf(r *kgo.Record) (decide.Arrival, error) {
	a, err := arrival(r, p.cfg.Now())
	a.FromLane = r.Topic != p.cfg.Names.Raw
	if err != nil {
		return a, err
	}
	a.Route = p.routeOf(r, a)
	if _, known := p.cfg.Providers.Get(a.Provider); !known && a.Route == "" {
		// Not in this processor's providers file (ingest's may be newer):
		// a retryable failure of the route default, not a delivery to
		// nowhere, so it is delivered once the file is.
		a.Route = headers.DefaultRoute
	}
	return a, nil
}

// poisoned is the result of a malformed record: to the DLQ as permanent,
// no state touched.
func (s *session) poisoned(ctx context.Context, it *item, a decide.Arrival, err error) *result {
	r := it.r
	s.p.cfg.Logger.Warn("malformed record sent to the DLQ", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
	res := &result{item: *it, tok: &recordToken{tokens: s.tokens}}
	dr := s.p.poisonRecord(r, a.Now, err)
	if s.p.cfg.Tracer.On() {
		ctx = s.p.keep(ctx, r, err, headers.DeadPermanent)
		s.p.cfg.Tracer.Inject(ctx, dr)
	}
	res.out.Records = []*kgo.Record{dr}
	res.stats = []stat{{provider: "unknown", status: outcome.StatusDead, origin: "unknown"}}
	return res
}

// skipped is the result of a record Admit skipped: its outcome only.
func (s *session) skipped(ctx context.Context, it *item, a decide.Arrival, why string) *result {
	p := s.p
	res := &result{item: *it, tok: &recordToken{tokens: s.tokens}}
	res.out.Records = []*kgo.Record{p.outcomeRecord(p.outcomeOf(ctx, res.r, a), res.r, a, outcome.StatusDuplicate, 0, nil, decide.Effect{Route: a.Route})}
	res.stats = []stat{{provider: p.providerLabel(a.Provider), route: a.Route, status: outcome.StatusDuplicate, origin: a.Origin}}
	if p.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) { // spares a duplicate the arguments' allocations
		p.cfg.Logger.Debug("skipped", "key", string(res.r.Key), "origin", a.Origin, "attempt", a.Attempt, "why", why)
	}
	return res
}

// planInput gathers what the plan needs of a record Admit let through:
// its entity's holds (ordered providers), whether its body is valid, its
// provider's routes (those a fresh record's event matches, else its
// route), admission's view of their destinations now, and what their
// transforms gave (run here, before the plan: transforms.go), with the
// transformed requests to send.
func (s *session) planInput(it *item, a decide.Arrival, cur *decide.State) (decide.Input, *ordered, sends, error) {
	p, r := s.p, it.r
	in := decide.Input{Key: string(r.Key), State: cur, Arrival: a, KeyPolicy: p.policyOf(nil, r, a.Provider), Tiers: len(p.cfg.Names.Retry)}
	_, in.Known = p.cfg.Providers.Get(a.Provider)
	in.Filed = p.routes.filed[a.Provider]
	ord, err := s.orderedOf(it.ow, r, a.Provider)
	if err != nil {
		return in, nil, nil, err
	}
	if ord != nil {
		in.Entity = &decide.Entity{Holds: ord.holds, Seq: ord.seq}
	}
	in.Invalid = p.invalidPayload(r, a)
	var buf [4]*target
	ts := buf[:0]
	if a.Route == "" {
		ts, _ = p.matching(r, a.Provider, ts)
	} else if t := p.target(a.Provider, a.Route); t != nil && in.Known {
		ts = append(ts, t)
	} else if a.Route == headers.DefaultRoute && in.Known && in.Filed {
		// The route default of a provider whose file has routes but none
		// named default (destination: moved to routes:): what waited for
		// it goes to the routes its event matches (decide.Input.Moved).
		in.Moved = true
		ts, _ = p.matching(r, a.Provider, ts)
	}
	in.Routes = make([]decide.Route, len(ts))
	for i, t := range ts {
		in.Routes[i] = decide.Route{Name: t.route, Policy: routePolicy(t, in.KeyPolicy, in.Known), Call: t.lane != nil, HoldOnDead: t.holdOnDead}
		if t.lane != nil && !a.FromLane { // a lane copy was parked already: it waits
			in.Routes[i].Closed = t.lane.adm.WhyPark()
		}
	}
	var sent sends
	for i, t := range ts {
		if t.transform == nil || in.Invalid != nil { // an invalid payload is dead before any script
			continue
		}
		var req *transform.Request
		if in.Routes[i].Transform, req = p.transformed(r, a.Provider, t); req != nil {
			sent = append(sent, send{route: t.route, req: *req})
		}
	}
	return in, ord, sent, nil
}

// orderedOf returns the record's entity and holds; nil for a record
// without hookline.entity (not ordered, or its own entity). ow is the
// record's partition: an entity its heldKeys do not name has no holds in
// the store, and costs no read.
func (s *session) orderedOf(ow *partition, r *kgo.Record, provider string) (*ordered, error) {
	e, ok := headers.Get(r, headers.Entity)
	if !ok || e == "" {
		return nil, nil
	}
	o := &ordered{key: decide.EntityKey(provider, e), entity: e}
	// A number the processor did not write (a hand-made record) counts as
	// none: the record is held afresh or delivered, never a reason to stop.
	if n, err := strconv.Atoi(headers.Value(r, headers.Held)); err == nil && n > 0 {
		o.seq = n
	}
	s.mu.Lock()
	ov, ok := s.overlay[o.key]
	s.mu.Unlock()
	if ok {
		o.holds = ov.holds
		return o, nil
	}
	if !ow.heldKeys().may(o.key) {
		return o, nil
	}
	v, ok, err := s.p.cfg.Store.Get(r.Partition, o.key)
	if err != nil {
		return nil, fmt.Errorf("read holds of entity %q: %w", e, err)
	}
	if ok {
		if o.holds, err = decide.DecodeHolds(v); err != nil {
			return nil, fmt.Errorf("decode holds of entity %q: %w", e, err)
		}
	}
	return o, nil
}

// holdsChange adds to res the entity's new holds (decide.Settled.Holds,
// when they changed): its changelog record (placed with the raw record,
// by hookline.entity), its store change and its overlay entry.
func (s *session) holdsChange(res *result, o *ordered, hs decide.Holds) (bool, error) {
	val, err := decide.EncodeHolds(hs)
	if err != nil {
		return false, fmt.Errorf("encode holds of entity %q: %w", o.entity, err)
	}
	cr := &kgo.Record{Topic: s.p.cfg.Names.Changelog, Key: []byte(o.key), Value: val,
		Headers: []kgo.RecordHeader{{Key: headers.Entity, Value: []byte(o.entity)}}}
	res.out.Records = append(res.out.Records, cr)
	res.holdChange = &state.Change{Partition: res.r.Partition, Key: o.key, Value: val}
	s.mu.Lock()
	defer s.mu.Unlock()
	if res.ow.gone() {
		return false, nil
	}
	s.seq++
	s.overlay[o.key] = overlaid{part: res.r.Partition, holds: hs, seq: s.seq}
	res.holdSeq = s.seq
	return true, nil
}

// execute runs a plan's calls, each through the admission chain, at once:
// a slow route holds back none of its siblings' calls. It returns one
// result per step of the plan (the plan's own for a step it settles
// itself), and false when a call was abandoned: the record is then read
// again by the partition's next owner.
func (s *session) execute(ctx context.Context, rec *callRecord, pl decide.Plan) ([]decide.Result, bool) {
	results := make([]decide.Result, len(pl.Steps))
	n := pl.Calls()
	var got []called // n > 1: each call's goroutine writes only its own element
	if n > 1 {
		got = make([]called, len(pl.Steps))
	}
	var wg sync.WaitGroup
	for i, st := range pl.Steps {
		if st.Action != decide.ActCall {
			results[i] = st.Result
			continue
		}
		d := &delivery{rec: rec, ln: s.p.target(rec.a.Provider, st.Route.Name).lane, tr: s.p.cfg.Tracer}
		if n == 1 { // the common case: no goroutine
			c := s.calls(ctx, d)
			if c.abandoned {
				return nil, false
			}
			results[i] = c.res
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.calls(ctx, d)
		}()
	}
	wg.Wait()
	for i := range got {
		if pl.Steps[i].Action != decide.ActCall {
			continue
		}
		if got[i].abandoned {
			return nil, false
		}
		results[i] = got[i].res
	}
	return results, true
}

// settled completes a result with the records the settle's effects
// write, the key's next state (the store gets its binary form) and the
// entity's holds when they changed, and puts them in the overlay; nil
// when the partition went away meanwhile.
func (s *session) settled(ctx context.Context, res *result, pl decide.Plan, results routeResults, st decide.Settled, ord *ordered) (*result, error) {
	r, key, a := res.r, string(res.r.Key), pl.In.Arrival
	var err error
	if res.out.Records, err = s.records(ctx, r, a, st.State, st.Effects, results); err != nil {
		return nil, err
	}
	if ord != nil {
		if st.HoldsChanged {
			ok, err := s.holdsChange(res, ord, st.Holds)
			if err != nil {
				return nil, err
			}
			if !ok {
				s.release(res)
				return nil, nil
			}
		}
		res.settled = barrier(res.tok)
	}
	provider, eventType := s.p.providerLabel(a.Provider), s.p.eventTypeLabel(a.Provider, r)
	for _, e := range st.Effects {
		if e.Kind == decide.ToOutcomes {
			res.stats = append(res.stats, stat{provider: provider, route: e.Route, status: string(e.Status), origin: a.Origin, eventType: eventType})
		}
	}
	stored, err := decide.EncodeStored(st.State)
	if err != nil {
		return nil, fmt.Errorf("encode stored state of %q: %w", key, err)
	}
	res.change = &state.Change{Partition: r.Partition, Key: key, Value: stored, ExpiresAt: st.State.ExpiresAt}
	seq, ok := s.remember(res.ow, r.Partition, key, st.State)
	if !ok {
		s.release(res)
		return nil, nil
	}
	res.seq = seq
	return res, nil
}

// routeResults are a plan's steps and their results, in step order, and
// the requests its routes' transforms returned.
type routeResults struct {
	steps   []decide.RouteStep
	results []decide.Result
	sent    sends
}

// of is the result of route's step; zero (called, no error) for a route
// the plan has no step for (unrouted).
func (rr routeResults) of(route string) decide.Result {
	for i, st := range rr.steps {
		if st.Route.Name == route {
			return rr.results[i]
		}
	}
	return decide.Result{}
}

// records builds what a settle's effects write, in their order; results
// are what became of each route's delivery, by route.
//
// A parked record (decide.ToLane) goes to its route's lane topic: the
// exact record (key, body, headers, plus hookline.route) to lane partition
// r.Partition (same key, same partition count). Its outcome says where it
// waits and why. It comes back through the lane reader when the
// destination has room, and a record read from a lane that meets an open
// breaker is parked again at the lane's end. Retry-tier and DLQ copies
// carry hookline.route too; a topic route's delivery (decide.ToTopic) is
// the exact record with hookline.route, to its topic.
//
// With tracing on, every copy carries the trace context of the record's
// span (or of the span keep started for a failure the sampler dropped),
// and the outcomes name its trace.
func (s *session) records(ctx context.Context, r *kgo.Record, a decide.Arrival, next decide.State, effects []decide.Effect, results routeResults) (out []*kgo.Record, err error) {
	p := s.p
	if p.cfg.Tracer.On() {
		ctx = p.traceSettle(ctx, r, effects, func(route string) error {
			if c := results.of(route); c.Kind == decide.ResultCalled {
				return c.Err
			}
			return nil
		})
		defer func() {
			for _, o := range out {
				if o.Topic != p.cfg.Names.Changelog && o.Topic != p.cfg.Names.Outcomes {
					p.cfg.Tracer.Inject(ctx, o)
				}
			}
		}()
	}
	out = make([]*kgo.Record, 0, len(effects))
	var shared outcome.Outcome // what the record's outcomes share (outcomeOf), once one is written
	sharedMade := false
	for _, e := range effects {
		c := results.of(e.Route)
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
			cause := c.Err
			if e.Held > 0 {
				cause = nil // waiting behind its entity's head is no failed attempt
			}
			tr := p.failedRecord(p.cfg.Names.Retry[e.Tier-1], r, a, next, e.Attempt, cause, true)
			headers.SetTime(tr, headers.DueAt, retry.NotBefore(p.cfg.Schedule.DueAt(a.Now, e.Tier, p.cfg.Jitter, rand.Float64), e.NotBefore))
			headers.Delete(tr, headers.RetryAfter) // an earlier failure's
			if !e.RetryAfter.IsZero() {
				headers.SetTime(tr, headers.RetryAfter, e.RetryAfter)
			}
			setRoute(tr, e.Route)
			setHeld(tr, e.Held)
			out = append(out, tr)
		case decide.ToDLQ:
			dr := p.failedRecord(p.cfg.Names.DLQ, r, a, next, e.Attempt, c.Err, e.DeadReason == headers.DeadExhausted)
			headers.Set(dr, headers.DeadReason, e.DeadReason)
			if ipe := (*decide.InvalidPayloadError)(nil); errors.As(c.Err, &ipe) {
				// The reason, whoever found it: ingest (its header,
				// kept) or this processor's check (invalid.go).
				headers.SetInvalidPayload(dr, ipe.Reason)
			}
			setRoute(dr, e.Route)
			setHeld(dr, 0)
			out = append(out, dr)
		case decide.ToLane:
			ln := p.target(a.Provider, e.Route).lane
			if !ln.adm.Room() {
				s.reader.hold(ln)
			}
			s.reader.parked(ln.topic, r.Partition)
			ln.parked.Inc()
			out = append(out, routedCopy(ln.topic, r, e.Route))
		case decide.ToTopic:
			topic := p.target(a.Provider, e.Route).topic
			if req := results.sent.of(e.Route); req != nil {
				tc := transformedCopy(topic, r, e.Route, req)
				setHeld(tc, 0)
				out = append(out, tc)
			} else {
				out = append(out, routedCopy(topic, r, e.Route))
			}
		case decide.ToOutcomes:
			if !sharedMade {
				shared, sharedMade = p.outcomeOf(ctx, r, a), true
			}
			out = append(out, p.outcomeRecord(shared, r, a, string(e.Status), c.Took, c.Err, e))
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
func (s *session) remember(ow *partition, part int32, key string, st decide.State) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ow.gone() {
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
