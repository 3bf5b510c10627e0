package consume

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/processor/internal/state"
)

// The processor's own series (the Kafka client's come from kprom) are kept
// per component, each in a small struct registered once, by New: here the
// lanes', the lag's, the budget's and the store's; the outcomes' in
// commit.go, the transactions' in consume.go, the partitions' in
// assign.go, the holds' in held.go, the hanging transactions' in
// hanging.go, the standbys' in standby.go. Provider labels hold configured
// names or "unknown".

// laneMetrics are the routes' destinations' (lanes.go): calls, slots,
// parks and operators' settings, by provider and route; and each
// destination's breaker (breakerOpen).
type laneMetrics struct {
	handlerSeconds *prometheus.HistogramVec
	laneInflight   *prometheus.GaugeVec
	laneWaiting    *prometheus.GaugeVec
	laneLimit      *prometheus.GaugeVec
	parked         *prometheus.CounterVec
	lanePaused     *prometheus.GaugeVec
	laneRate       *prometheus.GaugeVec
	reg            prometheus.Registerer // breakerOpen registers there
}

func newLaneMetrics(reg prometheus.Registerer) *laneMetrics {
	m := &laneMetrics{
		handlerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_processor_handler_seconds",
			Help:    "Time each destination call took, by provider and route: calls made and answered (a parked record is not called; an abandoned call is not counted).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"provider", "route"}),
		laneInflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_inflight",
			Help: "Calls in flight to a provider's destination.",
		}, []string{"provider", "route"}),
		laneWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_waiting",
			Help: "Records waiting for a slot of their provider's destination (its in-flight bound is reached).",
		}, []string{"provider", "route"}),
		laneLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_max_inflight",
			Help: "A provider's destination's in-flight bound (destination.max_inflight, or HOOKLINE_MAX_INFLIGHT).",
		}, []string{"provider", "route"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_parked_total",
			Help: "Records parked in their destination's lane topic (webhooks.lane.<provider>) because it had no room or its breaker refused calls; counted when decided, so an aborted transaction's may count twice.",
		}, []string{"provider", "route"}),
		lanePaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_paused",
			Help: "1 while an operator has paused a provider's deliveries (dlq provider pause): its records wait in its lane topic.",
		}, []string{"provider", "route"}),
		laneRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_rate",
			Help: "The calls per second an operator capped a provider's destination at (dlq provider rate); 0: no cap.",
		}, []string{"provider", "route"}),
		reg: reg,
	}
	reg.MustRegister(m.handlerSeconds, m.laneInflight, m.laneWaiting, m.laneLimit, m.parked, m.lanePaused, m.laneRate)
	return m
}

// breakerOpen exports a route's destination's circuit breaker: 1 while
// open.
func (m *laneMetrics) breakerOpen(provider, route string, open func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "hookline_processor_breaker_open",
		Help:        "1 while the circuit breaker of a route's destination is open (calls refused without being made), else 0.",
		ConstLabels: prometheus.Labels{"provider": provider, "route": route},
	}, func() float64 {
		if open() {
			return 1
		}
		return 0
	}))
}

// lagMetrics are the group's lag on webhooks.raw and the lane topics
// (watchLag).
type lagMetrics struct {
	lag     *prometheus.GaugeVec
	laneLag *prometheus.GaugeVec
}

func newLagMetrics(reg prometheus.Registerer) *lagMetrics {
	m := &lagMetrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_consumer_lag",
			Help: "Records of webhooks.raw not yet committed by the processor group, by partition (from kadm, every 15s).",
		}, []string{"partition"}),
		laneLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_lane_lag",
			Help: "Records waiting in a destination's lane topic, by provider and partition (from kadm, every 15s).",
		}, []string{"provider", "route", "partition"}),
	}
	reg.MustRegister(m.lag, m.laneLag)
	return m
}

// watchLag refreshes the lag gauges from the group's committed offsets:
// webhooks.raw's, and each lane topic's (laneOf maps a lane topic to its
// lane).
func (m *lagMetrics) watchLag(ctx context.Context, cl *kgo.Client, group, raw string, laneOf map[string]*lane, log *slog.Logger) {
	obs.WatchLag(ctx, cl, group, 15*time.Second, log, func(t string, p int32, lag int64) {
		part := strconv.Itoa(int(p))
		if t == raw {
			m.lag.WithLabelValues(part).Set(float64(lag))
		} else if ln, ok := laneOf[t]; ok {
			m.laneLag.WithLabelValues(ln.provider, ln.route, part).Set(float64(lag))
		}
	})
}

// budgetMetrics show what the process-wide budget holds: the offsets
// spanned above the committed ones, the records by priority class
// (package admission).
type budgetMetrics struct {
	pending      prometheus.Gauge
	classPending *prometheus.GaugeVec
}

func newBudgetMetrics(reg prometheus.Registerer) *budgetMetrics {
	m := &budgetMetrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_processor_pending_offsets",
			Help: "Offsets of webhooks.raw and the lane topics held above their partitions' committed offsets (records in flight or finished above a slower one); polling stops at 16 x HOOKLINE_MAX_PENDING.",
		}),
		classPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_pending_records",
			Help: "Records read and not yet committed, by priority class of their provider (waiting in a chain, for a slot or in a call, or finished and waiting for the transaction); HOOKLINE_MAX_PENDING bounds their sum.",
		}, []string{"class"}),
	}
	reg.MustRegister(m.pending, m.classPending)
	return m
}

// registerStoreKeys exports the local store's key count.
func registerStoreKeys(reg prometheus.Registerer, st *state.Store) {
	keys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_processor_store_keys",
		Help: "Keys in the local Badger state store (approximate).",
	}, func() float64 { return float64(st.Keys()) })
	reg.MustRegister(keys)
}
