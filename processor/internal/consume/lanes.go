package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// lane is one destination's budget: at most cap(slots) calls in flight.
// A record waiting for a slot waits in its own chain's goroutine, so a full
// lane holds back only its own destination's records.
type lane struct {
	name     string
	h        deliver.Handler
	slots    chan struct{}
	inflight prometheus.Gauge
	waiting  prometheus.Gauge
}

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
			h:        h,
			slots:    make(chan struct{}, n),
			inflight: m.laneInflight.WithLabelValues(name),
			waiting:  m.laneWaiting.WithLabelValues(name),
		}
		m.laneLimit.WithLabelValues(name).Set(float64(n))
		if b, ok := h.(interface{ BreakerOpen() bool }); ok {
			m.breakerOpen(name, b.BreakerOpen)
		}
	}
	return lanes
}

// call hands the record to its provider's destination, waiting for a slot
// in its lane and then for a token of the session's pool of uncommitted
// calls (taken in that order, so records waiting for a full lane hold no
// token). A call that was made keeps its token until its result commits or
// is dropped (release); one abandoned gives it back here. abandoned says ctx ended (the partition went away or the
// processor stops) before the call was made or answered: that is no attempt
// and leaves no trace; the record is read again by the partition's next
// owner.
func (p *Processor) call(ctx context.Context, tokens chan struct{}, r *kgo.Record, a decide.Arrival) (abandoned, token bool, err error) {
	if _, ok := p.cfg.Providers.Get(a.Provider); !ok {
		return false, false, fmt.Errorf("provider %q is not in this processor's providers file", a.Provider)
	}
	ln, ok := p.lanes[a.Provider]
	if !ok {
		return false, false, nil // outcomes only
	}
	ln.waiting.Inc()
	select {
	case ln.slots <- struct{}{}:
	case <-ctx.Done():
		ln.waiting.Dec()
		return true, false, ctx.Err()
	}
	defer func() { <-ln.slots }()
	select {
	case tokens <- struct{}{}:
		ln.waiting.Dec()
	case <-ctx.Done():
		ln.waiting.Dec()
		return true, false, ctx.Err()
	}
	ln.inflight.Inc()
	defer ln.inflight.Dec()
	err = ln.h.Handle(ctx, deliver.Delivery{
		Key:         string(r.Key),
		Provider:    a.Provider,
		EventType:   headers.Value(r, headers.EventType),
		Attempt:     a.Attempt,
		Body:        r.Value,
		ContentType: headers.Value(r, headers.ContentType),
		Headers:     headers.HTTP(r),
	})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		<-tokens
		return true, false, err
	}
	if errors.Is(err, deliver.ErrCircuitOpen) {
		// The destination was not called: straight to the first tier, the
		// attempt not used up.
		return false, true, retry.NotAttempted(err)
	}
	return false, true, err
}
