package consume

import (
	"context"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/processor/internal/admission"
)

// keeper is a limiter whose state a restart starts from
// (admission.Limiter.Kept and Resume).
type keeper interface {
	Kept() (limit, threshold int)
	Resume(kept, threshold int) int
}

var _ keeper = (*admission.Limiter)(nil)

// How the adaptive limits are written (publishLimits): looked at every
// limitLook, a limit is written when it moved by limitMoved of the one
// written last (slow start doubling, an AIMD cut), or moved at all and
// limitRefresh passed, or did not move for limitKeepAlive; a restart
// starts from a limit about a second old while it ramps, an AIMD sawtooth
// writes a record per cut, not per step, and a running instance's report
// is never older than control.LimitKeptFor, however long its limit holds.
const (
	limitLook      = time.Second
	limitMoved     = 0.1
	limitRefresh   = 30 * time.Second
	limitKeepAlive = 10 * time.Minute
)

// limitDue says whether a limit n is to be written, the last written
// being sent (0: none) at at.
func limitDue(n, sent int, at, now time.Time) bool {
	switch d := n - sent; {
	case d == 0:
		return now.Sub(at) >= limitKeepAlive
	case sent == 0, float64(max(d, -d)) >= limitMoved*float64(sent):
		return true
	}
	return now.Sub(at) >= limitRefresh
}

// anyAdaptive says whether some route has an adaptive limit.
func (p *setup) anyAdaptive() bool {
	for _, t := range p.routes.byLane {
		if t.lane.limiter != nil {
			return true
		}
	}
	return false
}

// applyKeptLimit starts a route's adaptive limit from the one this instance
// learned before a restart (control.Limit of this instance id, at most
// control.LimitKeptFor old), if its limiter has made no call yet
// (admission.Limiter.Resume): the control topic is read to its end before
// any session starts. Another instance's report, a route no longer in the
// file or with adaptive: false, or an older report, is ignored; an older
// report is also noted for deletion (staleLimits).
func (p *setup) applyKeptLimit(l control.Limit) {
	p.staleLimits.note(l, p.cfg.Now())
	if l.Instance != p.cfg.InstanceID || l.Limit < 1 || p.cfg.Now().Sub(l.At) > control.LimitKeptFor {
		return
	}
	t := p.target(l.Provider, control.RouteOr(l.Route))
	if t == nil || t.lane == nil {
		return
	}
	ln := t.lane
	k, ok := ln.limiter.(keeper)
	if !ok {
		return
	}
	was := ln.adm.Limit()
	n := k.Resume(l.Limit, l.Threshold)
	ln.adm.SetLimit(n)
	ln.limit.Set(float64(n))
	if n != was {
		p.cfg.Logger.Info("adaptive limit starts from the one kept before the restart", "provider", ln.provider, "route", ln.route, "limit", n, "kept_at", l.At)
	}
}

// publishLimits writes each adaptive route's limit on the control topic
// (control.Limit, key limit:<provider>/<route>:<instance>) when it moved
// (limitDue), with cl until ctx ends; a restart of this instance starts
// from it (applyKeptLimit); and deletes the stale reports read meanwhile
// (staleLimits). A report not written is logged and tried again at the
// next look.
func (p *setup) publishLimits(ctx context.Context, cl reportWriter) {
	var lanes []*lane
	var keepers []keeper
	for _, t := range p.routes.byLane {
		if k, ok := t.lane.limiter.(keeper); ok {
			lanes, keepers = append(lanes, t.lane), append(keepers, k)
		}
	}
	if len(lanes) == 0 || cl == nil {
		return
	}
	sent := make([]int, len(lanes)) // the last limit written per lane; 0: none
	sentAt := make([]time.Time, len(lanes))
	tk := time.NewTicker(limitLook)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		for i, ln := range lanes {
			n, th := keepers[i].Kept()
			now := p.cfg.Now()
			if !limitDue(n, sent[i], sentAt[i], now) {
				continue
			}
			r, err := control.LimitRecord(p.cfg.Names.Control, control.Limit{Provider: ln.provider, Route: ln.route, Instance: p.cfg.InstanceID, Limit: n, Threshold: th, At: now.UTC()})
			if err == nil {
				err = cl.ProduceSync(ctx, r).FirstErr()
			}
			if err != nil {
				if ctx.Err() == nil {
					p.cfg.Logger.Warn("limit report not written; trying again", "provider", ln.provider, "route", ln.route, "err", err)
				}
				continue
			}
			sent[i], sentAt[i] = n, now
		}
		p.deleteStaleLimits(ctx, cl)
	}
}

// deleteStaleLimits writes a tombstone for each stale report noted since
// the last look; one not written is noted again, for the next look. A
// report its instance rewrote in the same instant would be deleted with
// it: that instance writes it again within limitKeepAlive, and until then
// a restart of it slow-starts, as without a report.
func (p *setup) deleteStaleLimits(ctx context.Context, cl reportWriter) {
	for _, l := range p.staleLimits.take() {
		if err := cl.ProduceSync(ctx, control.LimitTombstone(p.cfg.Names.Control, l)).FirstErr(); err != nil {
			if ctx.Err() == nil {
				p.cfg.Logger.Warn("stale limit report not deleted; trying again", "provider", l.Provider, "route", l.Route, "instance", l.Instance, "err", err)
			}
			p.staleLimits.note(l, p.cfg.Now())
			continue
		}
		p.cfg.Logger.Info("stale limit report deleted", "provider", l.Provider, "route", l.Route, "instance", l.Instance, "written_at", l.At)
	}
}
