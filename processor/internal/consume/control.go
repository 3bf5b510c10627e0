package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/control"
)

// followControl keeps every lane's operator setting (pause, drain rate) in
// step with the control topic until ctx ends, and closes caughtUp once the
// settings at start are applied: no session starts before, so a provider
// paused before a restart is never called after it. The "control"
// readiness check is false until then.
func (p *Processor) followControl(ctx context.Context, caughtUp chan<- struct{}) {
	p.cfg.Health.Set("control", errors.New("reading the operators' settings from "+p.cfg.Names.Control))
	var done sync.Once
	once := func() {
		done.Do(func() {
			close(caughtUp)
			p.cfg.Health.Set("control", nil)
		})
	}
	retrying(ctx, p.cfg.Logger, "following the operators' settings failed", slowBackoff, func() error {
		return control.Follow(ctx, p.cfg.NewClient, p.cfg.Names.Control, p.applyControl, once,
			func(err error) { p.cfg.Logger.Warn("operator setting ignored", "err", err) })
	})
}

// applyControl sets one provider's lane as the operator asked.
func (p *Processor) applyControl(s control.Setting) {
	ln, ok := p.lanes[s.Provider]
	if !ok {
		p.cfg.Logger.Warn("operator setting for a provider without a destination in this processor's providers file: nothing to hold", "provider", s.Provider, "setting", s.String())
		return
	}
	was := ln.setting()
	ln.paused.Store(s.Paused)
	if s.Rate > 0 && !s.Paused {
		ln.drain.Store(rate.NewLimiter(rate.Limit(s.Rate), 1))
	} else {
		ln.drain.Store(nil)
	}
	p.m.lanePaused.WithLabelValues(s.Provider).Set(map[bool]float64{true: 1, false: 0}[s.Paused])
	p.m.laneRate.WithLabelValues(s.Provider).Set(s.Rate)
	if now := ln.setting(); now != was {
		p.cfg.Logger.Info("provider "+now+" by an operator", "provider", s.Provider, "was", was, "by", s.By, "at", s.At)
	}
}

// setting says what an operator set for the lane.
func (ln *lane) setting() string {
	switch lim := ln.drain.Load(); {
	case ln.paused.Load():
		return "paused"
	case lim != nil:
		return fmt.Sprintf("draining at %g/s", float64(lim.Limit()))
	}
	return "running"
}
