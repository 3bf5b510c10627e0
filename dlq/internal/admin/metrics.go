package admin

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/dlq/internal/store"
)

// Metrics are the DLQ's series, served on GET /metrics: the last Tally of
// store.Track. They hold counts and times, never a key or a body, so the
// route needs no token. Until the first tally (the tracker has not read the
// topics to their ends yet) every value is 0 and
// hookline_dlq_tally_timestamp_seconds says so.
type Metrics struct {
	entries    prometheus.Gauge
	unresolved prometheus.Gauge
	at         prometheus.Gauge

	mu     sync.Mutex
	oldest time.Time // of the last tally; zero when nothing is unresolved
	now    func() time.Time
}

// NewMetrics registers the DLQ series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_dlq_entries",
			Help: "Committed records in webhooks.dlq (from each partition's log start), resolved or not, at the last tally.",
		}),
		unresolved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_dlq_unresolved_entries",
			Help: "Entries of webhooks.dlq without a resolution on webhooks.dlq-status (what `dlq list --unresolved` lists), at the last tally.",
		}),
		at: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_dlq_tally_timestamp_seconds",
			Help: "Unix time of the last tally of the DLQ; 0 until the first one (the topics not read to their ends yet).",
		}),
		now: time.Now,
	}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_dlq_oldest_unresolved_age_seconds",
		Help: "Now minus the dead-letter time of the oldest unresolved entry at the last tally; 0 when none is unresolved.",
	}, m.oldestAge)
	reg.MustRegister(m.entries, m.unresolved, m.at, age)
	return m
}

// Set publishes a tally; store.Track calls it every interval.
func (m *Metrics) Set(t store.Tally) {
	m.entries.Set(float64(t.Entries))
	m.unresolved.Set(float64(t.Unresolved))
	m.mu.Lock()
	m.oldest = t.OldestUnresolved
	m.mu.Unlock()
	m.at.Set(float64(t.At.UnixMilli()) / 1000)
}

func (m *Metrics) oldestAge() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.oldest.IsZero() {
		return 0
	}
	return max(m.now().Sub(m.oldest).Seconds(), 0)
}
