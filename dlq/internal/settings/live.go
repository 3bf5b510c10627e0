package settings

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/control"
)

// Live is the current setting of every provider, kept by Follow (dlq
// serve), with a gauge pair per provider: hookline_dlq_provider_paused (1
// or 0) and hookline_dlq_provider_rate (calls per second, 0 for no cap).
// The providers of the file have series from the start (running).
type Live struct {
	known  Known
	paused *prometheus.GaugeVec
	rate   *prometheus.GaugeVec

	mu       sync.Mutex
	got      map[string]control.Setting
	caughtUp bool
	changed  chan struct{} // closed and replaced on every change
}

// NewLive returns an empty Live for the providers of known and registers
// its gauges on reg.
func NewLive(known Known, reg prometheus.Registerer) *Live {
	l := &Live{
		known: known,
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_dlq_provider_paused",
			Help: "1 while an operator has paused the provider's deliveries (webhooks.control), else 0.",
		}, []string{"provider"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_dlq_provider_rate",
			Help: "The drain rate an operator set on the provider, destination calls per second; 0 for no cap.",
		}, []string{"provider"}),
		got:     map[string]control.Setting{},
		changed: make(chan struct{}),
	}
	reg.MustRegister(l.paused, l.rate)
	for _, n := range known.Names() {
		l.gauge(control.Setting{Provider: n})
	}
	return l
}

func (l *Live) gauge(s control.Setting) {
	p := 0.0
	if s.Paused {
		p = 1
	}
	l.paused.WithLabelValues(s.Provider).Set(p)
	l.rate.WithLabelValues(s.Provider).Set(ViewOf(s).Rate)
}

// Apply takes a setting read from the control topic.
func (l *Live) Apply(s control.Setting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got[s.Provider] = s
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

// Views lists every provider's setting (Known.Views) and whether the topic
// was read to its end yet.
func (l *Live) Views() ([]View, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known.Views(l.got), l.caughtUp
}

// Known is the providers the settings are checked against.
func (l *Live) Known() Known { return l.known }

// Await waits until s is the setting followed for its provider, or ctx
// ends; it reports whether s was seen.
func (l *Live) Await(ctx context.Context, s control.Setting) bool {
	for {
		l.mu.Lock()
		cur, ok := l.got[s.Provider]
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
	return a.Provider == b.Provider && a.Paused == b.Paused && a.Rate == b.Rate && a.By == b.By && a.At.Equal(b.At)
}
