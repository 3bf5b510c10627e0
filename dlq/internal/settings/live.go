package settings

import (
	"context"
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/control"
)

// Live is the current setting of every provider and route, kept by Follow
// (dlq serve), with a gauge pair per provider, hookline_dlq_provider_paused
// (1 or 0) and hookline_dlq_provider_rate (calls per second, 0 for no
// cap), and per route, hookline_dlq_route_paused and
// hookline_dlq_route_rate. The providers and routes of the file have
// series from the start (running).
type Live struct {
	known  Known
	paused *prometheus.GaugeVec
	rate   *prometheus.GaugeVec
	// routePaused and routeRate are the route settings' gauges.
	routePaused *prometheus.GaugeVec
	routeRate   *prometheus.GaugeVec

	mu       sync.Mutex
	got      map[string]control.Setting // by name
	caughtUp bool
	changed  chan struct{} // closed and replaced on every change
}

// NewLive returns an empty Live for the providers and routes of known and
// registers its gauges on reg.
func NewLive(known Known, reg prometheus.Registerer) *Live {
	l := &Live{
		known: known,
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_dlq_provider_paused",
			Help: "1 while an operator has paused the provider's deliveries, every route of it (webhooks.control), else 0.",
		}, []string{"provider"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_dlq_provider_rate",
			Help: "The drain rate an operator set on the provider, destination calls per second; 0 for no cap.",
		}, []string{"provider"}),
		routePaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_dlq_route_paused",
			Help: "1 while an operator has paused the route's deliveries by its own setting (webhooks.control), else 0; a provider-wide pause shows on hookline_dlq_provider_paused.",
		}, []string{"provider", "route"}),
		routeRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_dlq_route_rate",
			Help: "The drain rate an operator set on the route, destination calls per second; 0 for no cap.",
		}, []string{"provider", "route"}),
		got:     map[string]control.Setting{},
		changed: make(chan struct{}),
	}
	reg.MustRegister(l.paused, l.rate, l.routePaused, l.routeRate)
	for _, n := range known.Names() {
		l.gauge(control.Setting{Provider: n})
	}
	for _, r := range known.Routes() {
		l.gauge(r)
	}
	return l
}

func (l *Live) gauge(s control.Setting) {
	p := 0.0
	if s.Paused {
		p = 1
	}
	if s.Route != "" {
		l.routePaused.WithLabelValues(s.Provider, s.Route).Set(p)
		l.routeRate.WithLabelValues(s.Provider, s.Route).Set(ViewOf(s).Rate)
		return
	}
	l.paused.WithLabelValues(s.Provider).Set(p)
	l.rate.WithLabelValues(s.Provider).Set(ViewOf(s).Rate)
}

// Apply takes a setting read from the control topic.
func (l *Live) Apply(s control.Setting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got[s.Name()] = s
	l.gauge(s)
	l.signal()
}

// CaughtUp marks the topic read to the end it had when following started.
func (l *Live) CaughtUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.caughtUp = true
	l.signal()
}

func (l *Live) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Views lists every provider's provider-wide setting (Known.Views) and
// whether the topic was read to its end yet.
func (l *Live) Views() ([]View, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known.Views(l.got), l.caughtUp
}

// RouteViews lists every route's setting (Known.RouteViews) and whether
// the topic was read to its end yet.
func (l *Live) RouteViews() ([]View, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known.RouteViews(l.got), l.caughtUp
}

// Settings is a copy of every setting followed so far, by name
// (control.Setting.Name), and whether the topic was read to its end yet.
func (l *Live) Settings() (map[string]control.Setting, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.got), l.caughtUp
}

// Known is the providers and routes the settings are checked against.
func (l *Live) Known() Known { return l.known }

// Await waits until s is the setting followed for its provider or route,
// or ctx ends; it reports whether s was seen.
func (l *Live) Await(ctx context.Context, s control.Setting) bool {
	for {
		l.mu.Lock()
		cur, ok := l.got[s.Name()]
		ch := l.changed
		l.mu.Unlock()
		if ok && same(cur, s) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// same compares two settings (At by instant: one went through JSON).
func same(a, b control.Setting) bool {
	return a.Provider == b.Provider && a.Route == b.Route && a.Paused == b.Paused && a.Rate == b.Rate && a.By == b.By && a.At.Equal(b.At)
}
