package consume

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// lane is one destination's budget: at most cap(slots) calls in flight.
// A record waiting for a slot waits in its own chain's goroutine, so a full
// lane holds back only its own destination's records.
type lane struct {
	name     string
	topic    string // where its records are parked: webhooks.lane.<provider>
	h        deliver.Handler
	slots    chan struct{}
	waitN    atomic.Int64 // records waiting for a slot
	refusing func() bool  // the breaker refuses calls now; nil: no breaker
	// paused and drain are the operator's setting (package control): a
	// paused destination is called by no one; a drain caps its calls.
	paused   atomic.Bool
	drain    atomic.Pointer[rate.Limiter] // nil: no cap
	inflight prometheus.Gauge
	waiting  prometheus.Gauge
	parked   prometheus.Counter
}

// full reports whether the destination has no room for one more record:
// as many records wait for a slot as it has slots (its queue is full), or
// its breaker refuses calls. A record admitted then is parked in the lane
// topic instead of waiting in memory or cycling through a retry tier.
func (ln *lane) full() bool {
	return ln.paused.Load() || ln.waitN.Load() >= int64(cap(ln.slots)) || ln.refusing != nil && ln.refusing()
}

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
		if p, _ := cfg.Providers.Get(name); p.Destination != nil && p.Destination.MaxInflight > 0 {
			n = p.Destination.MaxInflight
		}
		lanes[name] = &lane{
			name:     name,
			topic:    cfg.Names.Lane(name),
			h:        h,
			parked:   m.parked.WithLabelValues(name),
			slots:    make(chan struct{}, n),
			inflight: m.laneInflight.WithLabelValues(name),
			waiting:  m.laneWaiting.WithLabelValues(name),
		}
		m.laneLimit.WithLabelValues(name).Set(float64(n))
		if b, ok := h.(interface{ BreakerOpen() bool }); ok {
			m.breakerOpen(name, b.BreakerOpen)
		}
		if b, ok := h.(interface{ Refusing() bool }); ok {
			lanes[name].refusing = b.Refusing
		}
	}
	return lanes
}

// call hands the record to its provider's destination, waiting for a slot
// in its lane (and for the drain rate, if an operator set one). When the call has returned, it takes a token of the
// session's pool of finished, uncommitted calls (tokens), holding the slot
// until it has one: when transactions fall behind, each destination stops
// after the calls it has in flight, so a crash repeats at most the calls in
// flight plus the pool. The token is given back when the result commits or
// is dropped (release). A slow call holds no token, so it holds back no
// other destination.
//
// abandoned says ctx ended (the partition went away or the processor
// stops) before the call was made or answered: that is no attempt and
// leaves no trace; the record is read again by the partition's next owner.
func (p *Processor) call(ctx context.Context, tokens chan struct{}, r *kgo.Record, a decide.Arrival) (abandoned, token bool, err error) {
	if _, ok := p.cfg.Providers.Get(a.Provider); !ok {
		return false, false, fmt.Errorf("provider %q is not in this processor's providers file", a.Provider)
	}
	ln, ok := p.lanes[a.Provider]
	if !ok {
		return false, false, nil // outcomes only
	}
	ln.waiting.Inc()
	ln.waitN.Add(1)
	select {
	case ln.slots <- struct{}{}:
		ln.waiting.Dec()
		ln.waitN.Add(-1)
	case <-ctx.Done():
		ln.waiting.Dec()
		ln.waitN.Add(-1)
		return true, false, ctx.Err()
	}
	defer func() { <-ln.slots }()
	if lim := ln.drain.Load(); lim != nil {
		if err := lim.Wait(ctx); err != nil {
			return true, false, err
		}
	}
	if ln.paused.Load() {
		return false, false, errPaused
	}
	ln.inflight.Inc()
	err = ln.h.Handle(ctx, deliver.Delivery{
		Key:         string(r.Key),
		Provider:    a.Provider,
		EventType:   headers.Value(r, headers.EventType),
		Attempt:     a.Attempt,
		Body:        r.Value,
		ContentType: headers.Value(r, headers.ContentType),
		Headers:     headers.HTTP(r),
	})
	ln.inflight.Dec()
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return true, false, err
	}
	if errors.Is(err, deliver.ErrCircuitOpen) {
		return false, false, err // the destination was not called: the caller parks the record
	}
	select {
	case tokens <- struct{}{}:
	case <-ctx.Done():
		return true, false, ctx.Err() // called, but the partition went away: the next owner calls again
	}
	return false, true, err
}
