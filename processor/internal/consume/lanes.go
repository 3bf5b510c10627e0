package consume

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// lane is one route's HTTP destination: its admission (package
// admission: at most its slots in flight, its queue limit, closed while
// paused or refusing), its handler and the operator's drain rate.
type lane struct {
	provider, route string
	topic           string // where its records are parked: Names.RouteLane
	h               deliver.Handler
	adm             *admission.Lane
	// drain is the operator's drain rate (package control): it caps a
	// destination's calls.
	drain atomic.Pointer[rate.Limiter] // nil: no cap
	// byProvider and byRoute are the operators' settings the pause and
	// drain come from (control.go, effective).
	byProvider, byRoute atomic.Pointer[control.Setting]
	// limiter adapts the calls in flight between 1 and the slots (the
	// admission chain's limit stage); nil: a fixed limit
	// (destination.adaptive: false). limit is its gauge.
	limiter limiter
	// dead tracks since when every call failed (autopause.go); nil: the
	// destination has auto_pause_after: 0.
	dead *deadRoute
	// trial paces the trial calls while the route is auto-paused
	// (trial.go); nil: no auto-pause, or destination.trial_every: 0.
	trial    *trial
	limit    prometheus.Gauge
	cuts     map[admission.Cut]prometheus.Counter // the limiter's cuts by cause; nil: a fixed limit
	inflight prometheus.Gauge
	parked   prometheus.Counter
	handler  prometheus.ObserverVec // by event_type
}

// newLane builds the lane of a provider's route whose destination is h:
// destination.max_inflight slots, else MaxInflight, and an adaptive limit
// below them unless the destination says adaptive: false.
func newLane(cfg Config, m *laneMetrics, provider string, r *providers.Route, h deliver.Handler) *lane {
	n := cfg.MaxInflight
	if r.Destination != nil && r.Destination.MaxInflight > 0 {
		n = r.Destination.MaxInflight
	}
	ln := &lane{
		provider: provider,
		route:    r.Name,
		topic:    cfg.Names.RouteLane(provider, r.Name),
		h:        h,
		parked:   m.parked.WithLabelValues(provider, r.Name),
		inflight: m.laneInflight.WithLabelValues(provider, r.Name),
		limit:    m.laneAdaptive.WithLabelValues(provider, r.Name),
		handler:  m.handlerSeconds.MustCurryWith(prometheus.Labels{"provider": provider, "route": r.Name}),
	}
	m.laneLimit.WithLabelValues(provider, r.Name).Set(float64(n))
	ac := admission.LaneConfig{Slots: n, MaxPending: cfg.MaxPending, Class: r.Priority, Waiting: m.laneWaiting.WithLabelValues(provider, r.Name)}
	if b, ok := h.(deliver.Breaker); ok {
		m.breakerOpen(provider, r.Name, b.BreakerOpen)
		ac.Refusing, ac.Refused = b.Refusing, deliver.ErrCircuitOpen
	}
	ln.adm = admission.NewLane(ac)
	if r.Destination != nil && r.Destination.AutoPauseAfter > 0 {
		ln.dead = &deadRoute{after: r.Destination.AutoPauseAfter}
		if r.Destination.TrialEvery > 0 {
			ln.trial = &trial{every: r.Destination.TrialEvery, answering: m.answering.WithLabelValues(provider, r.Name)}
		}
	}
	if r.Destination == nil || !r.Destination.Fixed {
		lim := admission.NewLimiter(n)
		ln.limiter = lim
		ln.adm.SetLimit(lim.Limit())
		ln.cuts = make(map[admission.Cut]prometheus.Counter, len(admission.Cuts))
		for _, c := range admission.Cuts {
			ln.cuts[c] = m.limitCuts.WithLabelValues(provider, r.Name, c.String())
		}
	}
	ln.limit.Set(float64(ln.adm.Limit()))
	return ln
}

// limiter is a destination's adaptive concurrency limit
// (admission.Limiter): told of each call's start and answer, it says how
// many calls the destination may have in flight now.
type limiter interface {
	Start() admission.Ticket
	Abandon(admission.Ticket)
	Done(admission.Ticket, admission.Sample) (int, admission.Cut)
}

var _ limiter = (*admission.Limiter)(nil)

// recordToken is a record's share of the session's pool of finished,
// uncommitted calls: one token per record, taken when its first call
// returns, shared by its other routes' calls. (A token per call would let
// records whose first calls hold every token wait for their other calls'
// tokens forever.)
type recordToken struct {
	tokens chan struct{}
	mu     sync.Mutex
	held   bool
}

// take holds the record's token, waiting for one if it has none; false
// when ctx ended first.
func (t *recordToken) take(ctx context.Context) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		return true
	}
	select {
	case t.tokens <- struct{}{}:
		t.held = true
		return true
	case <-ctx.Done():
		return false
	}
}
