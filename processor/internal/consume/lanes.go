package consume

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// lane is one route's HTTP destination's budget: at most cap(slots) calls
// in flight. A record waiting for a slot waits in its own chain's
// goroutine, so a full lane holds back only its own route's records.
type lane struct {
	provider, route string
	topic           string // where its records are parked: Names.RouteLane
	class           providers.Priority
	h               deliver.Handler
	slots           chan struct{}
	waitN           atomic.Int64 // records waiting for a slot
	// queueLimit is how many may wait before the next is parked at once.
	queueLimit int64
	refusing   func() bool // the breaker refuses calls now; nil: no breaker
	// paused and drain are the operator's setting (package control): a
	// paused destination is called by no one; a drain caps its calls.
	paused atomic.Bool
	drain  atomic.Pointer[rate.Limiter] // nil: no cap
	// byProvider and byRoute are the operators' settings the above come
	// from (control.go, effective).
	byProvider, byRoute atomic.Pointer[control.Setting]
	inflight            prometheus.Gauge
	waiting             prometheus.Gauge
	parked              prometheus.Counter
	handler             prometheus.Observer
}

// Parking rules. A record waits in memory for a slot of its destination
// unless the destination is closed (paused, or its breaker refuses calls),
// its queue is long (queueLimit records already wait), or it waited
// parkAfter: then it is parked in the lane topic. A burst the destination
// clears in a moment is not parked; a destination that stays slow parks
// what it cannot take, so nothing it holds grows without bound.
const (
	parkAfter           = time.Second
	minQueueLimit       = 256
	queueShareOfPending = 4 // a destination's queue is at most MaxPending/4
)

// closed reports whether the destination takes no call now: paused by an
// operator, or its breaker refusing calls.
func (ln *lane) closed() bool {
	return ln.paused.Load() || ln.refusing != nil && ln.refusing()
}

// whyPark says why a record read now is parked at once, nil when it may
// wait for a slot.
func (ln *lane) whyPark() error {
	switch {
	case ln.paused.Load():
		return errPaused
	case ln.refusing != nil && ln.refusing():
		return deliver.ErrCircuitOpen
	case ln.waitN.Load() >= ln.queueLimit:
		return errQueueFull
	}
	return nil
}

// room reports whether the lane reader may read parked records back: the
// destination is open and fewer records wait than it has slots.
func (ln *lane) room() bool {
	return !ln.closed() && ln.waitN.Load() < int64(cap(ln.slots))
}

// errNoRoom is call's answer for a record that waited parkAfter for a
// slot: no call was made, and the record is parked.
var errNoRoom = errors.New("destination had no room")

// errQueueFull parks a record whose destination has a long queue already.
var errQueueFull = errors.New("destination queue full")

// errClassShare parks a record whose priority class holds its share of
// HOOKLINE_MAX_PENDING while another class needs the rest.
var errClassShare = errors.New("priority class over its share of HOOKLINE_MAX_PENDING")

// errPaused is call's answer for a destination an operator paused: no call
// was made, and the record is parked.
var errPaused = errors.New("destination paused by an operator")

// newLane builds the lane of a provider's route whose destination is h:
// destination.max_inflight slots, else MaxInflight.
func newLane(cfg Config, m *metrics, provider string, r *providers.Route, h deliver.Handler) *lane {
	n := cfg.MaxInflight
	if r.Destination != nil && r.Destination.MaxInflight > 0 {
		n = r.Destination.MaxInflight
	}
	ln := &lane{
		provider:   provider,
		route:      r.Name,
		topic:      cfg.Names.RouteLane(provider, r.Name),
		class:      r.Priority,
		h:          h,
		parked:     m.parked.WithLabelValues(provider, r.Name),
		slots:      make(chan struct{}, n),
		queueLimit: int64(max(4*n, minQueueLimit, cfg.MaxPending/queueShareOfPending)),
		inflight:   m.laneInflight.WithLabelValues(provider, r.Name),
		waiting:    m.laneWaiting.WithLabelValues(provider, r.Name),
		handler:    m.handlerSeconds.WithLabelValues(provider, r.Name),
	}
	m.laneLimit.WithLabelValues(provider, r.Name).Set(float64(n))
	if b, ok := h.(deliver.Breaker); ok {
		m.breakerOpen(provider, r.Name, b.BreakerOpen)
		ln.refusing = b.Refusing
	}
	return ln
}

// called is what became of a call: its error (nil: success; a
// *decide.NotCalledError: the destination was not called, and why), how
// long it took, and whether it was abandoned.
type called struct {
	err error
	// took is the destination's time, 0 when not called.
	took time.Duration
	// abandoned says ctx ended (the partition went away or the processor
	// stops) before the call was made or answered: that is no attempt and
	// leaves no trace; the record is read again by the partition's next
	// owner.
	abandoned bool
}

// recordToken is a record's share of the session's pool of finished,
// uncommitted calls: one token per record, taken when its first call
// returns, shared by its other routes' calls. (A token per call would let
// records whose first calls hold every token wait for their other calls'
// tokens forever.)
type recordToken struct {
	tokens chan struct{}
	mu     sync.Mutex
	held   bool
}

// take holds the record's token, waiting for one if it has none; false
// when ctx ended first.
func (t *recordToken) take(ctx context.Context) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		return true
	}
	select {
	case t.tokens <- struct{}{}:
		t.held = true
		return true
	case <-ctx.Done():
		return false
	}
}

// call hands the record to a route's HTTP destination, waiting for a slot
// in its lane (and for the drain rate, if an operator set one). A record
// that waits parkAfter for a slot, or meets its destination paused or its
// breaker refusing, is not called (decide.NotCalled). When the call has
// returned, the record takes its token of the session's pool of finished,
// uncommitted calls (tok), holding the slot until it has one: when
// transactions fall behind, each destination stops after the calls it has
// in flight, so a crash repeats at most the calls in flight plus the
// pool's records' calls. The token is given back when the result commits
// or is dropped (release). A slow call holds no token, so it holds back no
// other destination.
func (p *Processor) call(ctx context.Context, tok *recordToken, ln *lane, r *kgo.Record, a decide.Arrival) called {
	ln.waiting.Inc()
	ln.waitN.Add(1)
	var tooLong <-chan time.Time // a lane record waits as long as it takes: it was parked already
	if !a.FromLane {
		t := time.NewTimer(parkAfter)
		defer t.Stop()
		tooLong = t.C
	}
	select {
	case ln.slots <- struct{}{}:
		ln.waiting.Dec()
		ln.waitN.Add(-1)
	case <-tooLong:
		ln.waiting.Dec()
		ln.waitN.Add(-1)
		return called{err: decide.NotCalled(errNoRoom)}
	case <-ctx.Done():
		ln.waiting.Dec()
		ln.waitN.Add(-1)
		return called{abandoned: true}
	}
	defer func() { <-ln.slots }()
	if lim := ln.drain.Load(); lim != nil {
		if err := lim.Wait(ctx); err != nil {
			return called{abandoned: true}
		}
	}
	if ln.paused.Load() {
		return called{err: decide.NotCalled(errPaused)}
	}
	ln.inflight.Inc()
	start := time.Now()
	err := ln.h.Handle(ctx, deliver.Delivery{
		Key:         string(r.Key),
		Provider:    a.Provider,
		Route:       ln.route,
		EventType:   headers.Value(r, headers.EventType),
		Attempt:     a.Attempt,
		Body:        r.Value,
		ContentType: headers.Value(r, headers.ContentType),
		Headers:     headers.HTTP(r),
	})
	took := time.Since(start)
	ln.inflight.Dec()
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return called{abandoned: true}
	case errors.Is(err, deliver.ErrCircuitOpen):
		return called{err: decide.NotCalled(err)} // refused by the breaker before any call
	}
	ln.handler.Observe(took.Seconds())
	if !tok.take(ctx) {
		return called{abandoned: true} // called, but the partition went away: the next owner calls again
	}
	return called{err: err, took: took}
}

// newBudget is the session's admission budget: MaxPending records and
// MaxPendingBytes, classes competing when the routes are of more than one
// priority class.
func (p *Processor) newBudget() *admission.Budget {
	seen := map[providers.Priority]bool{}
	for _, name := range p.cfg.Providers.Names() {
		if pr, ok := p.cfg.Providers.Get(name); ok {
			seen[pr.Priority] = true
		}
	}
	for _, t := range p.routes.byKey {
		seen[t.class] = true
	}
	return admission.New(int64(p.cfg.MaxPending), p.cfg.MaxPendingBytes, len(seen) > 1, p.m.classPending)
}

// classOf is the priority class of a record: its route's, for a record of
// one route (a lane copy, a retry); else its provider's (the highest of
// its routes'), normal for a provider this processor does not know.
func (p *Processor) classOf(r *kgo.Record) providers.Priority {
	provider := headers.Value(r, headers.Provider)
	route := headers.Value(r, headers.Route)
	if t, ok := p.routes.byLane[r.Topic]; ok {
		return t.class
	}
	if route != "" {
		if t := p.target(provider, route); t != nil {
			return t.class
		}
	}
	return p.classOfProvider(provider)
}

func (p *Processor) classOfProvider(name string) providers.Priority {
	if pr, ok := p.cfg.Providers.Get(name); ok {
		return pr.Priority
	}
	return providers.PriorityNormal
}
