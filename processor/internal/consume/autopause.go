package consume

import (
	"context"
	"fmt"
	"time"

	"github.com/hookline/hookline/pkg/control"
)

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
// auto_pause_after, and the reports of the trial calls of the routes
// auto-paused (control.Trial: a trial answered, or failed after an
// answer), with cl until ctx ends. Every processor follows the control
// topic, so a pause from one holds the route in all. A pause or report not
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
			if ln.trial != nil {
				p.reportTrial(ctx, cl, ln)
			}
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
				ln.dead.unwritten()
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

// reportTrial writes what ln's trial calls found, if it changed
// (control.Trial): `dlq status` and the console say the route answers
// again.
func (p *setup) reportTrial(ctx context.Context, cl reportWriter, ln *lane) {
	pause, answering, ok := ln.trial.report()
	if !ok {
		return
	}
	r, err := control.TrialRecord(p.cfg.Names.Control, control.Trial{Provider: ln.provider, Route: ln.route, Pause: pause, Answering: answering, Instance: p.cfg.InstanceID, At: p.cfg.Now().UTC()})
	if err == nil {
		err = cl.ProduceSync(ctx, r).FirstErr()
	}
	if err != nil {
		ln.trial.unwritten(pause)
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("trial report not written; trying again", "provider", ln.provider, "route", ln.route, "err", err)
		}
	}
}
