package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/control"
)

// followControl keeps every lane's operator setting (pause, drain rate) in
// step with the control topic until ctx ends, and closes caughtUp once the
// settings at start are applied: no session starts before, so a provider
// paused before a restart is never called after it. The adaptive limits
// this instance kept there (limits.go) are applied before too. The "control"
// readiness check is false until then.
func (p *setup) followControl(ctx context.Context, caughtUp chan<- struct{}) {
	p.cfg.Health.Set("control", errors.New("reading the operators' settings from "+p.cfg.Names.Control))
	var done sync.Once
	once := func() {
		done.Do(func() {
			close(caughtUp)
			p.cfg.Health.Set("control", nil)
		})
	}
	retrying(ctx, p.cfg.Logger, "following the operators' settings failed", slowBackoff, func() error {
		return control.FollowAll(ctx, p.cfg.NewClient, p.cfg.Names.Control, control.Appliers{Setting: p.applyControl, Limit: p.applyKeptLimit}, once,
			func(err error) { p.cfg.Logger.Warn("operator setting ignored", "err", err) })
	})
}

// applyControl applies one operator setting: a provider's (s.Route empty)
// to every route of the provider, a route's to that route. A route is
// paused while either its provider or itself is paused, and drained at its
// own rate if it has one, else at its provider's.
func (p *setup) applyControl(s control.Setting) {
	var lanes []*lane
	for _, t := range p.routes.byLane {
		if t.provider == s.Provider && (s.Route == "" || t.route == s.Route) {
			lanes = append(lanes, t.lane)
		}
	}
	if len(lanes) == 0 {
		what := "provider"
		if s.Route != "" {
			what = "route " + s.Route + " of the provider"
		}
		p.cfg.Logger.Warn("operator setting for a "+what+" without an HTTP destination in this processor's providers file: nothing to hold", "provider", s.Provider, "route", s.Route, "setting", s.String())
		return
	}
	for _, ln := range lanes {
		was := ln.setting()
		if s.Route == "" {
			ln.byProvider.Store(&s)
		} else {
			ln.byRoute.Store(&s)
		}
		paused, rps := ln.effective()
		ln.adm.SetPaused(paused)
		if rps > 0 && !paused {
			ln.drain.Store(rate.NewLimiter(rate.Limit(rps), 1))
		} else {
			ln.drain.Store(nil)
		}
		p.mLanes.lanePaused.WithLabelValues(ln.provider, ln.route).Set(map[bool]float64{true: 1, false: 0}[paused])
		auto := paused && ln.autoPaused()
		p.mLanes.autoPaused.WithLabelValues(ln.provider, ln.route).Set(map[bool]float64{true: 1, false: 0}[auto])
		if ln.trial != nil {
			var at time.Time
			if rs := ln.byRoute.Load(); rs != nil {
				at = rs.At
			}
			ln.trial.set(auto && !ln.providerPaused(), at, p.cfg.Now())
		}
		if !paused && ln.dead != nil {
			ln.dead.reset() // resumed: another auto_pause_after of failures to pause it again
		}
		p.mLanes.laneRate.WithLabelValues(ln.provider, ln.route).Set(rps)
		if now := ln.setting(); now != was {
			p.cfg.Logger.Info("route "+now+" by an operator", "provider", ln.provider, "route", ln.route, "was", was, "by", s.By, "at", s.At)
		}
	}
}

// effective combines the provider's and the route's settings: paused if
// either is, at the route's rate if it has one, else the provider's.
func (ln *lane) effective() (paused bool, rps float64) {
	for _, s := range []*control.Setting{ln.byProvider.Load(), ln.byRoute.Load()} {
		if s == nil {
			continue
		}
		paused = paused || s.Paused
		if s.Rate > 0 {
			rps = s.Rate // the route's, loaded last, wins
		}
	}
	return paused, rps
}

// autoPaused says whether the route's own setting is a processor's
// auto-pause (control.AutoPauseBy).
func (ln *lane) autoPaused() bool {
	s := ln.byRoute.Load()
	return s != nil && s.Paused && s.By == control.AutoPauseBy
}

// providerPaused says whether the route's provider is paused by an
// operator (dlq provider pause): no trial call then, even if the route's
// own setting is an auto-pause.
func (ln *lane) providerPaused() bool {
	s := ln.byProvider.Load()
	return s != nil && s.Paused
}

// setting says what an operator set for the lane.
func (ln *lane) setting() string {
	switch lim := ln.drain.Load(); {
	case ln.adm.Paused():
		return "paused"
	case lim != nil:
		return fmt.Sprintf("draining at %g/s", float64(lim.Limit()))
	}
	return "running"
}
