package consume

import (
	"context"
	"reflect"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/processor/internal/decide"
)

// DefaultHoldsEvery is how often the processor counts the entities held in
// its partitions unless Config.HoldsEvery says otherwise.
const DefaultHoldsEvery = 10 * time.Second

// holdsScanShare bounds the time spent scanning holds: the next scan
// waits at least this many times as long as the last one took, so scans
// take at most a tenth of one core however many entities are held.
const holdsScanShare = 10

// watchHolds counts, until ctx ends, the entities held in the partitions
// the session owns and has restored (issue 24: an ordered provider's
// entity whose head waits on a route, with later records held behind it),
// every Config.HoldsEvery: a scan of each partition's holds in the state
// store (state.Store.Scan of decide.EntityPrefix: the holds' keys only,
// what Apply committed). After each scan it sets the gauges
// hookline_processor_entities_held and _entity_held_seconds per provider
// and route, and reports each partition whose holds changed, or still
// holds some after control.HeldRefresh, on the control topic
// (control.HeldReport, key held:<partition>) for `dlq status`. It does
// nothing when no provider is ordered, and writes no report without cl. A report that cannot be written is
// logged and written at the next scan.
func (p *setup) watchHolds(ctx context.Context, own *ownership, cl reportWriter) {
	always := p.orderedRoutes()
	if len(always) == 0 {
		return
	}
	sent := map[int32]control.HeldReport{} // the last report written per partition
	every := p.cfg.HoldsEvery
	if every <= 0 {
		every = DefaultHoldsEvery
	}
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		reports := p.scanHolds(own)
		now := p.cfg.Now()
		var shown []control.HeldRoute
		for _, r := range control.HeldReports(reports).Routes(now) {
			if _, ok := p.cfg.Providers.Get(r.Provider); ok { // labels: configured providers only
				shown = append(shown, r)
			}
		}
		p.mHolds.setHeld(shown, always, now)
		if cl != nil {
			p.publishHeld(ctx, cl, own, reports, sent)
		}
		t.Reset(max(every, holdsScanShare*time.Since(start)))
	}
}

// scanHolds reads the holds of every partition own has restored: one
// report per partition, stamped now. A partition whose scan fails is left
// out (logged), so its last report stays until it is stale.
func (p *setup) scanHolds(own *ownership) map[int32]control.HeldReport {
	now := p.cfg.Now().UTC()
	out := map[int32]control.HeldReport{}
	for _, part := range own.restored() {
		by := map[[2]string]*control.HeldRoute{}
		bad := 0
		err := p.cfg.Store.Scan(part, decide.EntityPrefix, func(key string, v []byte) error {
			provider, entity, ok := decide.SplitEntityKey(key)
			hs, err := decide.DecodeHolds(v)
			if !ok || err != nil {
				bad++
				return nil
			}
			tallyHolds(by, provider, entity, hs, p.tierName)
			return nil
		})
		if bad > 0 {
			p.cfg.Logger.Warn("held entities: unreadable holds skipped", "partition", part, "count", bad)
		}
		if err != nil {
			p.cfg.Logger.Warn("held entities: scan failed", "partition", part, "err", err)
			continue
		}
		h := control.HeldReport{Partition: part, Instance: p.cfg.InstanceID, At: now}
		for _, r := range by {
			h.Routes = append(h.Routes, *r)
		}
		h.Routes = control.HeldReports{part: h}.Routes(now) // sorted
		out[part] = h
	}
	return out
}

// tallyHolds adds an entity's holds to by, per provider and route: a hold
// counts when records wait behind it (Hold.Waiting), with its waiting
// records, and the route keeps its control.HeldTop oldest. tierName names
// a retry tier by its number.
func tallyHolds(by map[[2]string]*control.HeldRoute, provider, entity string, hs decide.Holds, tierName func(int) string) {
	for _, x := range hs {
		if x.Waiting() <= 0 {
			continue
		}
		k := [2]string{provider, x.Route}
		r := by[k]
		if r == nil {
			r = &control.HeldRoute{Provider: provider, Route: x.Route}
			by[k] = r
		}
		r.Entities++
		r.Waiting += x.Waiting()
		e := control.HeldEntity{Entity: entity, Head: x.Head, Since: x.Since, Waiting: x.Waiting(), Dead: x.Dead}
		if x.Head != "" {
			e.Tier = tierName(x.Tier)
		}
		r.KeepOldest(e)
	}
}

// tierName is the name of retry tier i (1-based), "lane" for 0 (the head
// is parked in its route's lane).
func (p *setup) tierName(i int) string {
	names := p.cfg.Schedule.Names()
	switch {
	case i == 0:
		return "lane"
	case i > 0 && i <= len(names):
		return names[i-1]
	}
	return ""
}

// publishHeld writes the report of each partition in reports that changed
// since sent's, or still names held entities control.HeldRefresh after
// it, and that own still has; sent forgets the partitions not in reports
// (a partition back later is reported afresh).
func (p *setup) publishHeld(ctx context.Context, cl reportWriter, own *ownership, reports, sent map[int32]control.HeldReport) {
	for part := range sent {
		if _, ok := reports[part]; !ok {
			delete(sent, part)
		}
	}
	for part, h := range reports {
		last, ok := sent[part]
		if ok && reflect.DeepEqual(last.Routes, h.Routes) && (len(h.Routes) == 0 || h.At.Sub(last.At) < control.HeldRefresh) {
			continue
		}
		if !own.owner(part).isReady() {
			continue // revoked since the scan: its new owner reports it
		}
		r, err := control.HeldRecord(p.cfg.Names.Control, h)
		if err == nil {
			err = cl.ProduceSync(ctx, r).FirstErr()
		}
		if err != nil {
			if ctx.Err() == nil {
				p.cfg.Logger.Warn("held report not written; trying again", "partition", part, "err", err)
			}
			continue
		}
		sent[part] = h
	}
}
