package consume

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/processor/internal/decide"
)

// deadRoute tracks since when every call of one route failed, as this
// processor saw its calls: the first failure after the last success
// starts the span, any success ends it. A route whose span reaches its
// destination.auto_pause_after is paused (autoPause). It is safe for
// concurrent use.
type deadRoute struct {
	after time.Duration // > 0

	mu      sync.Mutex
	since   time.Time // the first failure since the last success; zero: none
	lastErr string
	written bool // the pause is written; nothing more until a resume
}

// observe records one answered call: err nil is a success.
func (d *deadRoute) observe(at time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.since, d.lastErr = time.Time{}, ""
		return
	}
	if d.since.IsZero() {
		d.since = at
	}
	d.lastErr = err.Error()
}

// due says whether the route is to be paused now: every call failed since
// since (for at least after), the last with lastErr, and no pause written
// yet. A true answer counts as written.
func (d *deadRoute) due(now time.Time) (since time.Time, lastErr string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.written || d.since.IsZero() || now.Sub(d.since) < d.after {
		return time.Time{}, "", false
	}
	d.written = true
	return d.since, d.lastErr, true
}

// reset forgets the span: the route was resumed, so it needs another
// auto_pause_after of failures to be paused again.
func (d *deadRoute) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.since, d.lastErr, d.written = time.Time{}, "", false
}

// watchDead tells the route's deadRoute (a route with auto_pause_after)
// of each answered call. now is the clock of the answers.
func watchDead(now func() time.Time) stage {
	return func(next caller) caller {
		return func(ctx context.Context, d *delivery) called {
			c := next(ctx, d)
			if dr := d.ln.dead; dr != nil && !c.abandoned && c.res.Kind == decide.ResultCalled {
				dr.observe(now(), c.res.Err)
			}
			return c
		}
	}
}

// anyAutoPause says whether some route has an auto_pause_after.
func (p *setup) anyAutoPause() bool {
	for _, t := range p.routes.byLane {
		if t.lane.dead != nil {
			return true
		}
	}
	return false
}

// autoPausePoll is how often the routes are looked at for one to pause.
const autoPausePoll = time.Second

// autoPause writes the pause `dlq route pause` writes (By
// control.AutoPauseBy, Why naming since when every call failed and the
// last error) for each route whose every call failed for its
// auto_pause_after, with cl until ctx ends. Every processor follows the
// control topic, so a pause from one holds the route in all. A pause not
// written is logged and tried again at the next poll.
func (p *setup) autoPause(ctx context.Context, cl reportWriter) {
	var lanes []*lane
	for _, t := range p.routes.byLane {
		if t.lane.dead != nil {
			lanes = append(lanes, t.lane)
		}
	}
	if len(lanes) == 0 || cl == nil {
		return
	}
	t := time.NewTicker(autoPausePoll)
	defer t.Stop()
	for {
		for _, ln := range lanes {
			if ln.adm.Paused() {
				continue
			}
			now := p.cfg.Now()
			since, lastErr, ok := ln.dead.due(now)
			if !ok {
				continue
			}
			s := control.Setting{Provider: ln.provider, Route: ln.route, Paused: true, By: control.AutoPauseBy, At: now.UTC(),
				Why: fmt.Sprintf("every call failed since %s (auto_pause_after %s); last error: %s", since.UTC().Format(time.RFC3339), ln.dead.after, lastErr)}
			r, err := control.Record(p.cfg.Names.Control, s)
			if err == nil {
				err = cl.ProduceSync(ctx, r).FirstErr()
			}
			if err != nil {
				ln.dead.mu.Lock()
				ln.dead.written = false
				ln.dead.mu.Unlock()
				if ctx.Err() == nil {
					p.cfg.Logger.Warn("auto-pause not written; trying again", "provider", ln.provider, "route", ln.route, "err", err)
				}
				continue
			}
			p.cfg.Logger.Warn("route paused: every call failed for its auto_pause_after; resume it with dlq route resume once its receiver answers", "provider", ln.provider, "route", ln.route, "why", s.Why)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
