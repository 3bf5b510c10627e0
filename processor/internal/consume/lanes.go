package consume

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// lane is one destination's budget: at most cap(slots) calls in flight.
// A record waiting for a slot waits in its own chain's goroutine, so a full
// lane holds back only its own destination's records.
type lane struct {
	name  string
	topic string // where its records are parked: webhooks.lane.<provider>
	class providers.Priority
	h     deliver.Handler
	slots chan struct{}
	waitN atomic.Int64 // records waiting for a slot
	// queueLimit is how many may wait before the next is parked at once.
	queueLimit int64
	refusing   func() bool // the breaker refuses calls now; nil: no breaker
	// paused and drain are the operator's setting (package control): a
	// paused destination is called by no one; a drain caps its calls.
	paused   atomic.Bool
	drain    atomic.Pointer[rate.Limiter] // nil: no cap
	inflight prometheus.Gauge
	waiting  prometheus.Gauge
	parked   prometheus.Counter
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

// newLanes builds a lane for every provider with a destination.
func newLanes(cfg Config, m *metrics) map[string]*lane {
	lanes := map[string]*lane{}
	for _, name := range cfg.Providers.Names() {
		h, ok := cfg.Router.For(name)
		if !ok {
			continue
		}
		n := cfg.MaxInflight
		p, _ := cfg.Providers.Get(name)
		if p.Destination != nil && p.Destination.MaxInflight > 0 {
			n = p.Destination.MaxInflight
		}
		lanes[name] = &lane{
			name:       name,
			topic:      cfg.Names.Lane(name),
			class:      p.Priority,
			h:          h,
			parked:     m.parked.WithLabelValues(name),
			slots:      make(chan struct{}, n),
			queueLimit: int64(max(4*n, minQueueLimit, cfg.MaxPending/queueShareOfPending)),
			inflight:   m.laneInflight.WithLabelValues(name),
			waiting:    m.laneWaiting.WithLabelValues(name),
		}
		m.laneLimit.WithLabelValues(name).Set(float64(n))
		if b, ok := h.(deliver.Breaker); ok {
			m.breakerOpen(name, b.BreakerOpen)
			lanes[name].refusing = b.Refusing
		}
	}
	return lanes
}

// called is what became of a call: its error (nil: success; a
// *decide.NotCalledError: the destination was not called, and why), how
// long it took, whether it holds a token of the session's pool, and
// whether it was abandoned.
type called struct {
	err error
	// took is the destination's time, 0 when not called.
	took time.Duration
	// token says the result holds a token of session.tokens (release).
	token bool
	// abandoned says ctx ended (the partition went away or the processor
	// stops) before the call was made or answered: that is no attempt and
	// leaves no trace; the record is read again by the partition's next
	// owner.
	abandoned bool
}

// call hands the record to its provider's destination, waiting for a slot
// in its lane (and for the drain rate, if an operator set one). A record
// that waits parkAfter for a slot, or meets its destination paused or its
// breaker refusing, is not called (decide.NotCalled). When the call has
// returned, it takes a token of the session's pool of finished, uncommitted
// calls (tokens), holding the slot until it has one: when transactions fall
// behind, each destination stops after the calls it has in flight, so a
// crash repeats at most the calls in flight plus the pool. The token is
// given back when the result commits or is dropped (release). A slow call
// holds no token, so it holds back no other destination.
func (p *Processor) call(ctx context.Context, tokens chan struct{}, r *kgo.Record, a decide.Arrival) called {
	if _, ok := p.cfg.Providers.Get(a.Provider); !ok {
		return called{err: fmt.Errorf("provider %q is not in this processor's providers file", a.Provider)}
	}
	ln, ok := p.lanes[a.Provider]
	if !ok {
		return called{} // outcomes only
	}
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
	p.m.handlerSeconds.WithLabelValues(ln.name).Observe(took.Seconds())
	select {
	case tokens <- struct{}{}:
	case <-ctx.Done():
		return called{abandoned: true} // called, but the partition went away: the next owner calls again
	}
	return called{err: err, took: took, token: true}
}

// newBudget is the session's admission budget: MaxPending records and
// MaxPendingBytes, classes competing when the providers are of more than
// one priority class.
func (p *Processor) newBudget() *admission.Budget {
	seen := map[providers.Priority]bool{}
	for _, name := range p.cfg.Providers.Names() {
		if pr, ok := p.cfg.Providers.Get(name); ok {
			seen[pr.Priority] = true
		}
	}
	return admission.New(int64(p.cfg.MaxPending), p.cfg.MaxPendingBytes, len(seen) > 1, p.m.classPending)
}

// classOf is the priority class of a record's provider (normal for a
// provider this processor does not know).
func (p *Processor) classOf(r *kgo.Record) providers.Priority {
	return p.classOfProvider(headers.Value(r, headers.Provider))
}

func (p *Processor) classOfProvider(name string) providers.Priority {
	if pr, ok := p.cfg.Providers.Get(name); ok {
		return pr.Priority
	}
	return providers.PriorityNormal
}
