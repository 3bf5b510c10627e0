package consume

import (
	"context"
	"sort"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// breakerWatch is a route whose destination has a circuit breaker.
type breakerWatch struct {
	provider, route string
	open            func() bool
}

// breakerWatches lists the routes whose destination has a circuit
// breaker, by provider and route.
func (p *setup) breakerWatches() []breakerWatch {
	var ws []breakerWatch
	for _, t := range p.routes.byLane {
		if b, ok := t.lane.h.(deliver.Breaker); ok {
			ws = append(ws, breakerWatch{t.provider, t.route, b.BreakerOpen})
		}
	}
	sort.Slice(ws, func(i, j int) bool {
		return ws[i].provider < ws[j].provider || ws[i].provider == ws[j].provider && ws[i].route < ws[j].route
	})
	return ws
}

// breakerPoll is how often the breakers are looked at for a change.
const breakerPoll = time.Second

// publishBreakers reports each route's destination's circuit breaker on
// the control topic (control.Breaker, key breaker:<provider>:<instance>
// for the route default, breaker:<provider>/<route>:<instance> for
// another) with cl until ctx ends: every destination closed at the start
// (which also clears what an earlier run of this instance left), then each
// change seen within breakerPoll, and an open breaker again every
// control.BreakerRefresh. `dlq serve` re-drives a route's DLQ entries only
// while none is open. A report that cannot be written is logged and tried
// again at the next poll; nothing else waits for it.
func (p *setup) publishBreakers(ctx context.Context, cl reportWriter) {
	ws := p.breakerWatches()
	if len(ws) == 0 || cl == nil {
		return
	}
	sent := make([]*control.Breaker, len(ws)) // the last report written per route
	t := time.NewTicker(breakerPoll)
	defer t.Stop()
	for {
		now := p.cfg.Now()
		for i, w := range ws {
			is := w.open()
			if last := sent[i]; last != nil && last.Open == is && (!is || now.Sub(last.At) < control.BreakerRefresh) {
				continue
			}
			b := control.Breaker{Provider: w.provider, Instance: p.cfg.InstanceID, Open: is, At: now.UTC()}
			if w.route != headers.DefaultRoute {
				b.Route = w.route
			}
			r, err := control.BreakerRecord(p.cfg.Names.Control, b)
			if err == nil {
				err = cl.ProduceSync(ctx, r).FirstErr()
			}
			if err != nil {
				if ctx.Err() == nil {
					p.cfg.Logger.Warn("breaker report not written; trying again", "provider", w.provider, "route", w.route, "open", is, "err", err)
				}
				continue
			}
			sent[i] = &b
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
