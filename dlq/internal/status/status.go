// Package status is hookline's one answer to "is it healthy?" (`dlq
// status`, GET /status on `dlq serve`): per provider and per route, what
// was accepted and done in a recent window, what is retrying and parked
// (by tier and by priority class, due now or scheduled, and the oldest),
// the unresolved dead letters and the oldest of them, the breaker and the
// operator's setting; for webhooks.raw the processor group's lag and the
// age of the oldest record it has not processed; where the processors'
// /metrics are listed (HOOKLINE_PROCESSOR_METRICS), the records in flight
// and the deliveries completed since each processor started
// (ProcessorMetrics); and a verdict, healthy,
// degraded or failing, with its reasons (Rules).
//
// Build is pure: it counts what the readings dlq already makes give it
// (parked.Reader.Read, store.Store.List with store.Summarise, the control
// topic's settings and breaker reports, settings.Known), plus the two
// readings of this package (read.go): the raw backlog and the window's
// records of webhooks.raw and webhooks.outcomes.
package status

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
)

// The verdict's thresholds (Rules says how they are used).
const (
	// SlowAfter: a record of webhooks.raw unprocessed for this long, or a
	// retry-tier record this long past its due time, makes the system
	// degraded.
	SlowAfter = time.Minute
	// StuckAfter: that long, failing.
	StuckAfter = 5 * time.Minute
	// DefaultHeldAfter: an entity held this long makes the system
	// degraded, unless HOOKLINE_HELD_ALERT_AFTER says otherwise; the alert
	// HooklineEntityHeldLong (compose/prometheus/alerts.yml) fires at the
	// same age.
	DefaultHeldAfter = time.Hour
)

// Verdicts.
const (
	Healthy  = "healthy"
	Degraded = "degraded"
	Failing  = "failing"
)

// UnknownPriority is the priority class of a route the providers file
// does not name (or with no providers file).
const UnknownPriority = "unknown"

// Rules is the verdict's definition, as `dlq help status` prints it.
const Rules = `failing when any of:
  - the oldest unprocessed record of webhooks.raw is 5m old or older (the
    processor is stopped, or far behind);
  - a retry-tier record is 5m or more past its due time (the retrier is not
    moving it);
degraded when none of those and any of:
  - the oldest unprocessed record of webhooks.raw is 1m old or older;
  - a retry-tier record is 1m or more past its due time;
  - a route's breaker is open (a processor reported it in the last 3m);
  - a provider or route is paused by an operator;
  - records wait in a lane of a route that is not paused (its destination
    is full, or its priority class over its share);
  - the DLQ has unresolved entries;
  - an entity of an ordered provider has been held on a route for
    HOOKLINE_HELD_ALERT_AFTER (default 1h) or longer (its head has not
    ended: retrying, parked, or dead with on_dead: hold);
  - a topic could not be read to its end;
  - a processor's /metrics listed in HOOKLINE_PROCESSOR_METRICS could not
    be read (in flight and completed leave it out);
healthy otherwise. Retries waiting for their due time are not a reason:
they are the pipeline working.`

// Waiting counts records that wait in one tier ("lane" for the lanes) or
// of one priority class.
type Waiting struct {
	Tier     string `json:"tier,omitempty"`
	Priority string `json:"priority,omitempty"`
	Records  int    `json:"records"`
	// DueNow may go now: a retry-tier record whose due time has come, and
	// every lane record (it waits for room, not for a time); Scheduled
	// waits for a due time still to come.
	DueNow    int `json:"due_now"`
	Scheduled int `json:"scheduled"`
	// Oldest is when the record waiting longest was parked.
	Oldest *time.Time `json:"oldest"`
}

// Counts are what one route, one provider or the whole system holds.
type Counts struct {
	// Done is the outcomes with status done in the window.
	Done int `json:"done"`
	// Completed is the route deliveries the processors read completed
	// (outcome done) since each of them started, from their counters
	// (ProcessorMetrics); nil when HOOKLINE_PROCESSOR_METRICS lists none.
	Completed *int `json:"completed"`
	// Retrying is the records waiting in the retry tiers; Parked those
	// waiting in the lanes.
	Retrying int       `json:"retrying"`
	Parked   int       `json:"parked"`
	ByTier   []Waiting `json:"by_tier"`
	// DLQUnresolved is the DLQ entries nobody replayed or resolved;
	// DLQOldestUnresolved the oldest of them (nil when none).
	DLQUnresolved       int           `json:"dlq_unresolved"`
	DLQOldestUnresolved *store.Oldest `json:"dlq_oldest_unresolved"`
}

// Route is one route of a provider.
type Route struct {
	Route    string `json:"route"`
	Priority string `json:"priority"`
	Counts
	// State is running, paused or draining, from the route's own setting
	// and its provider's (paused if either is; the route's rate, else the
	// provider's); PausedBy says whose pause holds it (provider, route).
	State    string  `json:"state"`
	PausedBy string  `json:"paused_by,omitempty"`
	Rate     float64 `json:"rate"`
	// AutoPaused says why a processor paused the route (its setting is by
	// auto-pause): since when every call failed and the last error.
	AutoPaused string `json:"auto_paused,omitempty"`
	// AnsweringAgain is when a trial call of the auto-paused route was
	// answered (control.Trials.Answering: its last trial under this pause
	// was): its receiver answers again and the operator may resume it; nil
	// otherwise.
	AnsweringAgain *time.Time `json:"answering_again,omitempty"`
	// Breaker is open, closed or unreported (control.Breakers.RouteState);
	// BreakerInstance names a processor reporting it open.
	Breaker         string `json:"breaker"`
	BreakerInstance string `json:"breaker_instance,omitempty"`
	// Held is what is held on the route, from the processors' reports.
	Held Held `json:"held"`
	// ConcurrencyLimit is the calls the processors read let in flight to
	// the route's destination now, summed over them (each adapts its own
	// between 1 and max_inflight; issue 34), and MaxInflight the sum of
	// their ceilings; nil when no processor read reports the route.
	ConcurrencyLimit *int `json:"concurrency_limit"`
	MaxInflight      *int `json:"max_inflight"`
}

// Held is what is held on a route of an ordered provider (issue 24), as
// the processors owning the partitions last reported it (a report older
// than control.HeldStale does not count): the entities whose later
// records wait behind their head, the records waiting, and the
// control.HeldTop entities held longest, oldest first.
type Held struct {
	Entities int          `json:"entities"`
	Waiting  int          `json:"waiting"`
	Oldest   []HeldEntity `json:"oldest"`
}

// HeldEntity is one of a route's entities held longest, and for how long.
type HeldEntity struct {
	control.HeldEntity
	AgeSeconds float64 `json:"age_seconds"`
}

// Provider is one provider and its routes.
type Provider struct {
	Provider string `json:"provider"`
	// Accepted is the records ingest accepted in the window
	// (hookline.origin ingest on webhooks.raw); AcceptedPerSecond that
	// over the window.
	Accepted          int     `json:"accepted"`
	AcceptedPerSecond float64 `json:"accepted_per_second"`
	Counts
	ByPriority []Waiting `json:"by_priority"`
	// State is the provider-wide setting (running, paused, draining).
	State string `json:"state"`
	// Breaker is open when any route's is, else closed when any route's
	// was reported, else unreported.
	Breaker string  `json:"breaker"`
	Routes  []Route `json:"routes"`
}

// Partition is the backlog of one partition of webhooks.raw.
type Partition struct {
	Partition int32 `json:"partition"`
	// Committed is the processor group's committed offset (its low-water
	// mark: records above it may be finished already); End the last
	// stable offset; Lag End - Committed.
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	Lag       int64 `json:"lag"`
	// OldestAt is the timestamp of the record at Committed.
	OldestAt *time.Time `json:"oldest_unprocessed_at"`
}

// Backlog is what the processor group has not processed of webhooks.raw.
type Backlog struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
	// OldestAt is the oldest OldestAt of the partitions; OldestAgeSeconds
	// its age (0 when nothing waits).
	OldestAt         *time.Time  `json:"oldest_unprocessed_at"`
	OldestAgeSeconds float64     `json:"oldest_unprocessed_age_seconds"`
	Partitions       []Partition `json:"partitions"`
}

// Totals are the whole system's counts.
type Totals struct {
	Accepted          int     `json:"accepted"`
	AcceptedPerSecond float64 `json:"accepted_per_second"`
	Counts
	ByPriority []Waiting `json:"by_priority"`
	// InFlight is the records the processors read have taken from
	// webhooks.raw and the lanes and not yet committed (their
	// hookline_processor_pending_records); nil when HOOKLINE_PROCESSOR_METRICS
	// lists none.
	InFlight *int `json:"in_flight"`
	// CompletedSince is when the earliest processor read started: Completed
	// counts from there (nil when none was read).
	CompletedSince *time.Time `json:"completed_since"`
}

// Report is `dlq status --json` and GET /status.
type Report struct {
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons"`
	// At is when it was counted; WindowSeconds the window Accepted and
	// Done count over, ending at At.
	At            time.Time  `json:"at"`
	WindowSeconds float64    `json:"window_seconds"`
	Raw           Backlog    `json:"raw"`
	Totals        Totals     `json:"totals"`
	Providers     []Provider `json:"providers"`
	// Incomplete names partitions that could not be read to their end.
	Incomplete []string `json:"incomplete,omitempty"`
	// Processors is what each processor's /metrics said
	// (HOOKLINE_PROCESSOR_METRICS); empty when it lists none.
	Processors []Processor `json:"processors"`
}

// RouteKey names a route of a provider in Inputs.Done.
type RouteKey struct{ Provider, Route string }

// Inputs are the readings Build counts.
type Inputs struct {
	Now    time.Time
	Window time.Duration
	// Known gives the providers and routes listed even when nothing of
	// theirs is anywhere, and each route's priority class.
	Known settings.Known
	// Parked is every waiting record (parked.Report.Records read without a
	// limit).
	Parked []parked.Record
	// DLQ is every entry of webhooks.dlq with its resolution.
	DLQ []*store.Entry
	// Settings are the operators' settings by name; Breakers the
	// processors' breaker reports.
	Settings map[string]control.Setting
	Breakers control.Breakers
	// Trials are the processors' reports of the trial calls of
	// auto-paused routes.
	Trials control.Trials
	Raw    Backlog
	// Accepted counts by provider the records ingest accepted in the
	// window; Done the outcomes done by route.
	Accepted   map[string]int
	Done       map[RouteKey]int
	Incomplete []string
	// Held are the processors' held-entities reports; HeldAfter the age of
	// a hold that makes the system degraded (0: DefaultHeldAfter).
	Held      control.HeldReports
	HeldAfter time.Duration
	// Processors are the processors' own readings (ProcessorMetrics) and
	// Completed their completed counts by route; nil Processors: none
	// listed, the report says null for in flight and completed.
	Processors []Processor
	Completed  map[RouteKey]int
}

// waitAcc accumulates Waiting rows.
type waitAcc map[string]*Waiting

func (w waitAcc) add(key string, mk func() Waiting, r parked.Record, due bool) {
	c, ok := w[key]
	if !ok {
		v := mk()
		c = &v
		w[key] = c
	}
	c.Records++
	if due {
		c.DueNow++
	} else {
		c.Scheduled++
	}
	if c.Oldest == nil || r.ParkedAt.Before(*c.Oldest) {
		at := r.ParkedAt
		c.Oldest = &at
	}
}

func (w waitAcc) list() []Waiting {
	out := make([]Waiting, 0, len(w))
	for _, c := range w {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Waiting) int {
		return cmp.Or(priorityRank(b.Priority)-priorityRank(a.Priority), cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Priority, b.Priority))
	})
	return out
}

// priorityRank orders classes highest first (unknown last).
func priorityRank(p string) int {
	return map[string]int{"critical": 4, "high": 3, "normal": 2, "low": 1}[p]
}

// group is what Build gathers for one place (a route, a provider, all).
type group struct {
	done, completed, retrying, parked int
	tiers, prios                      waitAcc
	dlq                               []*store.Entry
}

func newGroup() *group { return &group{tiers: waitAcc{}, prios: waitAcc{}} }

// counts are g's; completed says whether processors were read.
func (g *group) counts(now time.Time, completed bool) Counts {
	st := store.Summarise(g.dlq, now)
	c := Counts{Done: g.done, Retrying: g.retrying, Parked: g.parked, ByTier: g.tiers.list(),
		DLQUnresolved: st.Unresolved, DLQOldestUnresolved: st.OldestUnresolved}
	if completed {
		n := g.completed
		c.Completed = &n
	}
	return c
}

// Build counts in and gives the verdict.
func Build(in Inputs) Report {
	now := in.Now
	routes := map[RouteKey]*group{}
	provs := map[string]*group{}
	all := newGroup()
	place := func(p, r string) []*group {
		k := RouteKey{p, r}
		if routes[k] == nil {
			routes[k] = newGroup()
		}
		if provs[p] == nil {
			provs[p] = newGroup()
		}
		return []*group{routes[k], provs[p], all}
	}
	for _, n := range in.Known.Names() {
		provs[n] = newGroup()
	}
	for _, s := range in.Known.Routes() {
		place(s.Provider, s.Route)
	}
	for _, s := range in.Settings {
		if s.Route != "" {
			place(s.Provider, s.Route)
		} else if provs[s.Provider] == nil {
			provs[s.Provider] = newGroup()
		}
	}
	for p := range in.Accepted {
		if provs[p] == nil {
			provs[p] = newGroup()
		}
	}
	for k, n := range in.Done {
		for _, g := range place(k.Provider, k.Route) {
			g.done += n
		}
	}
	for k, n := range in.Completed {
		for _, g := range place(k.Provider, k.Route) {
			g.completed += n
		}
	}
	held := map[RouteKey]Held{}
	for _, h := range in.Held.Routes(now) {
		k := RouteKey{h.Provider, h.Route}
		place(k.Provider, k.Route)
		held[k] = heldOf(h, now)
	}
	heldAfter := cmp.Or(in.HeldAfter, DefaultHeldAfter)
	var overdue time.Duration
	overdueTier := ""
	for _, r := range in.Parked {
		prio := cmp.Or(in.Known.Priority(r.Provider, r.Route), UnknownPriority)
		due := true
		if r.Tier != parked.TierLane {
			if at, err := headers.ParseTime(r.DueAt); err == nil {
				due = !at.After(now)
				if late := now.Sub(at); late > overdue {
					overdue, overdueTier = late, r.Tier
				}
			}
		}
		for _, g := range place(r.Provider, r.Route) {
			if r.Tier == parked.TierLane {
				g.parked++
			} else {
				g.retrying++
			}
			g.tiers.add(r.Tier, func() Waiting { return Waiting{Tier: r.Tier} }, r, due)
			g.prios.add(prio, func() Waiting { return Waiting{Priority: prio} }, r, due)
		}
	}
	for _, e := range in.DLQ {
		for _, g := range place(cmp.Or(e.Header(headers.Provider), "(none)"), e.Route()) {
			g.dlq = append(g.dlq, e)
		}
	}

	rep := Report{At: now.UTC(), WindowSeconds: in.Window.Seconds(), Raw: in.Raw, Providers: []Provider{}, Reasons: []string{},
		Incomplete: in.Incomplete, Processors: slices.Clone(in.Processors)}
	if rep.Processors == nil {
		rep.Processors = []Processor{}
	}
	withProc := in.Processors != nil
	perSecond := func(n int) float64 {
		if in.Window <= 0 {
			return 0
		}
		return float64(n) / in.Window.Seconds()
	}
	rep.Totals = Totals{Counts: all.counts(now, withProc), ByPriority: all.prios.list()}
	var failing, degraded []string
	if withProc {
		n := 0
		for _, p := range in.Processors {
			n += p.InFlight
			if p.Error != "" {
				degraded = append(degraded, fmt.Sprintf("processor metrics %s: %s (in flight and completed leave it out)", p.URL, p.Error))
			}
			if p.StartedAt != nil && (rep.Totals.CompletedSince == nil || p.StartedAt.Before(*rep.Totals.CompletedSince)) {
				rep.Totals.CompletedSince = p.StartedAt
			}
		}
		rep.Totals.InFlight = &n
	}
	for _, n := range in.Accepted {
		rep.Totals.Accepted += n
	}
	rep.Totals.AcceptedPerSecond = perSecond(rep.Totals.Accepted)
	for name, g := range provs {
		pset := in.Settings[name]
		p := Provider{Provider: name, Accepted: in.Accepted[name], AcceptedPerSecond: perSecond(in.Accepted[name]),
			Counts: g.counts(now, withProc), ByPriority: g.prios.list(), State: settings.ViewOf(pset).State, Breaker: control.BreakerUnreported, Routes: []Route{}}
		for k, rg := range routes {
			if k.Provider != name {
				continue
			}
			rt := Route{Route: k.Route, Priority: cmp.Or(in.Known.Priority(name, k.Route), UnknownPriority), Counts: rg.counts(now, withProc)}
			rset := in.Settings[control.Setting{Provider: name, Route: k.Route}.Name()]
			rt.State, rt.PausedBy, rt.Rate = combine(pset, rset)
			if rset.Paused && rset.By == control.AutoPauseBy {
				rt.AutoPaused = rset.Why
				if at, ok := in.Trials.Answering(rset); ok {
					at = at.UTC()
					rt.AnsweringAgain = &at
				}
			}
			rt.Breaker, rt.BreakerInstance = in.Breakers.RouteState(name, k.Route, now)
			rt.ConcurrencyLimit, rt.MaxInflight = limitOf(in.Processors, k)
			if rt.Held = held[k]; rt.Held.Oldest == nil {
				rt.Held.Oldest = []HeldEntity{}
			}
			switch {
			case rt.Breaker == control.BreakerOpen:
				p.Breaker = control.BreakerOpen
			case rt.Breaker == control.BreakerClosed && p.Breaker == control.BreakerUnreported:
				p.Breaker = control.BreakerClosed
			}
			degraded = append(degraded, routeReasons(name, rt, heldAfter)...)
			p.Routes = append(p.Routes, rt)
		}
		slices.SortFunc(p.Routes, func(a, b Route) int { return cmp.Compare(a.Route, b.Route) })
		rep.Providers = append(rep.Providers, p)
	}
	slices.SortFunc(rep.Providers, func(a, b Provider) int { return cmp.Compare(a.Provider, b.Provider) })

	if in.Raw.Lag > 0 && in.Raw.OldestAt != nil {
		age := now.Sub(*in.Raw.OldestAt)
		msg := fmt.Sprintf("%s: the oldest unprocessed record is %s old (lag %d records in group %s)", in.Raw.Topic, round(age), in.Raw.Lag, in.Raw.Group)
		switch {
		case age >= StuckAfter:
			failing = append(failing, msg+": is the processor running?")
		case age >= SlowAfter:
			degraded = append(degraded, msg)
		}
	}
	if overdueTier != "" {
		msg := fmt.Sprintf("retry tier %s: a record is %s past its due time", overdueTier, round(overdue))
		switch {
		case overdue >= StuckAfter:
			failing = append(failing, msg+": is the retrier running?")
		case overdue >= SlowAfter:
			degraded = append(degraded, msg)
		}
	}
	if len(in.Incomplete) > 0 {
		degraded = append(degraded, fmt.Sprintf("not read to the end: %v", in.Incomplete))
	}
	slices.Sort(degraded)
	rep.Reasons = append(append(rep.Reasons, failing...), degraded...)
	switch {
	case len(failing) > 0:
		rep.Verdict = Failing
	case len(degraded) > 0:
		rep.Verdict = Degraded
	default:
		rep.Verdict = Healthy
	}
	return rep
}

// heldOf is a route's held entities as the report shows them.
func heldOf(h control.HeldRoute, now time.Time) Held {
	out := Held{Entities: h.Entities, Waiting: h.Waiting, Oldest: make([]HeldEntity, 0, len(h.Oldest))}
	for _, e := range h.Oldest {
		out.Oldest = append(out.Oldest, HeldEntity{HeldEntity: e, AgeSeconds: max(0, now.Sub(e.Since).Seconds())})
	}
	return out
}

// HeldWhere says where a held entity's head waits, and what to run.
func HeldWhere(e control.HeldEntity) string {
	switch {
	case e.Head == "":
		return "its head ended; the records held behind it drain"
	case e.Dead:
		return fmt.Sprintf("behind %s, dead with on_dead: hold (dlq trace %s, then dlq replay)", e.Head, e.Head)
	case e.Tier == "lane":
		return fmt.Sprintf("behind %s, parked in the route's lane (dlq trace %s)", e.Head, e.Head)
	}
	return fmt.Sprintf("behind %s, in retry tier %s (dlq trace %s)", e.Head, e.Tier, e.Head)
}

// routeReasons are the reasons for degraded that one route gives; an
// entity held heldAfter or longer is one.
func routeReasons(provider string, rt Route, heldAfter time.Duration) []string {
	name := provider + "/" + rt.Route
	var out []string
	if rt.Breaker == control.BreakerOpen {
		out = append(out, fmt.Sprintf("%s: breaker open (processor %s)", name, rt.BreakerInstance))
	}
	if rt.AutoPaused != "" && rt.PausedBy == "route" && rt.AnsweringAgain != nil {
		out = append(out, fmt.Sprintf("%s: paused by auto-pause (%s), %d records parked in its lane; a trial call was answered at %s: its receiver answers again, dlq route resume %s",
			name, rt.AutoPaused, rt.Parked, rt.AnsweringAgain.Format(time.RFC3339), name))
	} else if rt.AutoPaused != "" && rt.PausedBy == "route" {
		out = append(out, fmt.Sprintf("%s: paused by auto-pause (%s), %d records parked in its lane; dlq route resume %s once its receiver answers", name, rt.AutoPaused, rt.Parked, name))
	} else if rt.PausedBy != "" {
		out = append(out, fmt.Sprintf("%s: paused (by its %s setting), %d records parked in its lane", name, rt.PausedBy, rt.Parked))
	} else if rt.Parked > 0 {
		out = append(out, fmt.Sprintf("%s: %d records parked in its lane (destination full, or class %s over its share)", name, rt.Parked, rt.Priority))
	}
	if rt.DLQUnresolved > 0 {
		out = append(out, fmt.Sprintf("%s: %d unresolved dead letters, the oldest %s old (dlq list --unresolved --provider %s --route %s)",
			name, rt.DLQUnresolved, round(time.Duration(rt.DLQOldestUnresolved.AgeSeconds)*time.Second), provider, rt.Route))
	}
	if len(rt.Held.Oldest) > 0 {
		e := rt.Held.Oldest[0]
		if age := time.Duration(e.AgeSeconds * float64(time.Second)); age >= heldAfter {
			out = append(out, fmt.Sprintf("%s: entity %s held for %s, %s; %d entities held, %d records waiting",
				name, e.Entity, round(age), HeldWhere(e.HeldEntity), rt.Held.Entities, rt.Held.Waiting))
		}
	}
	return out
}

// combine is what the processor makes of a provider's setting and its
// route's (docs/processor.md, Routes): paused if either is, the route's
// rate, else the provider's.
func combine(provider, route control.Setting) (state, pausedBy string, rate float64) {
	switch {
	case provider.Paused:
		return "paused", "provider", 0
	case route.Paused:
		return "paused", "route", 0
	case route.Rate > 0:
		return "draining", "", route.Rate
	case provider.Rate > 0:
		return "draining", "", provider.Rate
	}
	return "running", "", 0
}

// round shortens a duration for a reason: seconds below an hour, minutes
// above.
func round(d time.Duration) time.Duration {
	if d >= time.Hour {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// limitOf sums the processors' concurrency limits and ceilings of route k;
// nil when none reports it.
func limitOf(procs []Processor, k RouteKey) (limit, maxInflight *int) {
	for _, p := range procs {
		for _, l := range p.Limits {
			if l.Provider != k.Provider || l.Route != k.Route {
				continue
			}
			if limit == nil {
				limit, maxInflight = new(int), new(int)
			}
			*limit += l.Limit
			*maxInflight += l.MaxInflight
		}
	}
	return limit, maxInflight
}
