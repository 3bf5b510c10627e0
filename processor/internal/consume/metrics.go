package consume

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/processor/internal/state"
)

// The processor's own series (the Kafka client's come from kprom) are kept
// per component, each in a small struct with its constructor, which
// registers it (New calls each once): the lanes', the lag's, the budget's,
// the store's, the transactions', the outcomes', the partitions', the
// holds', the hanging transactions' and the standbys'. Provider labels
// hold configured names or "unknown"; event_type labels are bounded by
// setup.types (package typelabel).

// laneMetrics are the routes' destinations' (lanes.go): calls, slots,
// parks and operators' settings, by provider and route; and each
// destination's breaker (breakerOpen).
type laneMetrics struct {
	handlerSeconds *prometheus.HistogramVec
	laneInflight   *prometheus.GaugeVec
	laneWaiting    *prometheus.GaugeVec
	laneLimit      *prometheus.GaugeVec
	laneAdaptive   *prometheus.GaugeVec
	limitCuts      *prometheus.CounterVec
	parked         *prometheus.CounterVec
	lanePaused     *prometheus.GaugeVec
	autoPaused     *prometheus.GaugeVec
	answering      *prometheus.GaugeVec
	laneRate       *prometheus.GaugeVec
	reg            prometheus.Registerer // breakerOpen registers there
}

func newLaneMetrics(reg prometheus.Registerer) *laneMetrics {
	m := &laneMetrics{
		handlerSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_processor_handler_seconds",
			Help:    "Time each destination call took, by provider, route and event type (bounded: HOOKLINE_EVENT_TYPE_LABELS): calls made and answered (a parked record is not called; an abandoned call is not counted).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"provider", "route", "event_type"}),
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
		laneAdaptive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_concurrency_limit",
			Help: "The calls a provider's destination may have in flight now: its adaptive limit, between 1 and hookline_processor_destination_max_inflight (that bound itself for a destination with adaptive: false).",
		}, []string{"provider", "route"}),
		limitCuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_destination_limit_cuts_total",
			Help: "Cuts of a provider's destination's adaptive limit, by cause: overload (a 408, 429 or 503, a timeout or a connection error), latency (the recent latency twice the long-run one), retry_after (a Retry-After of 10 s or more: held at 1 until its date).",
		}, []string{"provider", "route", "cause"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_parked_total",
			Help: "Records parked in their destination's lane topic (webhooks.lane.<provider>) because it had no room or its breaker refused calls; counted when decided, so an aborted transaction's may count twice.",
		}, []string{"provider", "route"}),
		lanePaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_paused",
			Help: "1 while an operator has paused a provider's deliveries (dlq provider pause): its records wait in its lane topic.",
		}, []string{"provider", "route"}),
		autoPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_route_auto_paused",
			Help: "1 while a route is paused because every call of it failed for its destination.auto_pause_after (a processor's pause on the control topic, by auto-pause): its records wait in its lane topic until dlq route resume.",
		}, []string{"provider", "route"}),
		answering: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_route_answering_again",
			Help: "1 once a trial call of an auto-paused route succeeded (its receiver answers again; the record it sent is delivered), until the route is resumed or paused again: dlq route resume drains its lane.",
		}, []string{"provider", "route"}),
		laneRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_destination_rate",
			Help: "The calls per second an operator capped a provider's destination at (dlq provider rate); 0: no cap.",
		}, []string{"provider", "route"}),
		reg: reg,
	}
	reg.MustRegister(m.handlerSeconds, m.laneInflight, m.laneWaiting, m.laneLimit, m.laneAdaptive, m.limitCuts, m.parked, m.lanePaused, m.autoPaused, m.answering, m.laneRate)
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
// route's provider and route, the labels).
func (m *lagMetrics) watchLag(ctx context.Context, cl *kgo.Client, group, raw string, laneOf map[string][2]string, log *slog.Logger) {
	obs.WatchLag(ctx, cl, group, 15*time.Second, log, func(t string, p int32, lag int64) {
		part := strconv.Itoa(int(p))
		if t == raw {
			m.lag.WithLabelValues(part).Set(float64(lag))
		} else if ln, ok := laneOf[t]; ok {
			m.laneLag.WithLabelValues(ln[0], ln[1], part).Set(float64(lag))
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

// txnMetrics are the transaction loop's (package txnloop) and the
// session's replacements.
type txnMetrics struct {
	txns         *prometheus.CounterVec
	batchSeconds prometheus.Histogram
	batchRecords prometheus.Histogram
	sessions     prometheus.Counter
}

func newTxnMetrics(reg prometheus.Registerer) *txnMetrics {
	m := &txnMetrics{
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_transactions_total",
			Help: "Kafka transactions ended, by result (committed, aborted).",
		}, []string{"result"}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_processor_transaction_seconds",
			Help:    "Time to end one transaction: produce the finished results' records, commit the low-water marks, end it.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_processor_transaction_records",
			Help:    "Records whose effects one committed transaction carried.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookline_processor_session_restarts_total",
			Help: "Transactional sessions replaced after they broke (a transaction that could not be ended, e.g. the broker unreachable): the open batch is read again, like after a restart.",
		}),
	}
	reg.MustRegister(m.txns, m.batchSeconds, m.batchRecords, m.sessions)
	return m
}

// outcomeMetrics count the records' outcomes once their transaction
// committed (session.committed). Provider labels hold configured names or
// "unknown".
type outcomeMetrics struct {
	records    *prometheus.CounterVec
	succeeded  *prometheus.CounterVec
	duplicates *prometheus.CounterVec
}

func newOutcomeMetrics(reg prometheus.Registerer) *outcomeMetrics {
	m := &outcomeMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_records_total",
			Help: "Outcomes of the records processed, by provider, route, status (done, duplicate, retrying, parked, dead, unrouted; route empty for duplicate and unrouted, which are decided for the key, and for a provider delivered nowhere) and event type (bounded: HOOKLINE_EVENT_TYPE_LABELS): a record delivered to three routes counts three. Counted when their transaction committed.",
		}, []string{"provider", "route", "status", "event_type"}),
		succeeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_succeeded_total",
			Help: "Deliveries that succeeded (status done), by provider and the attempt that succeeded: 1 is the first call, n+1 the retry from tier n; attempts above HOOKLINE_RETRY_TIERS' count + 1 are counted in that last value. Counted when their transaction committed.",
		}, []string{"provider", "route", "attempt"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_duplicates_total",
			Help: "Records skipped by the dedup table, by origin (ingest, retry, replay).",
		}, []string{"origin"}),
	}
	reg.MustRegister(m.records, m.succeeded, m.duplicates)
	return m
}

// partitionMetrics are the owned partitions': assignments, restores and
// how long each took to resume.
type partitionMetrics struct {
	rebalances     *prometheus.CounterVec
	restoreSeconds prometheus.Histogram
	restoreRecords prometheus.Counter
	resumeSeconds  prometheus.Histogram
}

func newPartitionMetrics(reg prometheus.Registerer) *partitionMetrics {
	m := &partitionMetrics{
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_partitions_rebalanced_total",
			Help: "Partitions of webhooks.raw assigned, revoked or lost.",
		}, []string{"kind"}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_processor_restore_seconds",
			Help:    "Time to restore one partition's state from the changelog.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
		restoreRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookline_processor_restore_records_total",
			Help: "Changelog records read while restoring.",
		}),
		resumeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_processor_resume_seconds",
			Help:    "Time from a partition's assignment to its records being read again: the hanging-transaction check, the restore and the committed offsets. A takeover by a warm standby should take well under a second.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
	}
	reg.MustRegister(m.rebalances, m.restoreSeconds, m.restoreRecords, m.resumeSeconds)
	return m
}

// holdMetrics show the entities held in the partitions owned (watchHolds).
type holdMetrics struct {
	entitiesHeld      *prometheus.GaugeVec
	entityHeldSeconds *prometheus.GaugeVec
	// shown are the provider/route label pairs the gauges show (setHeld,
	// under mu: a session's watcher may outlive it briefly).
	mu    sync.Mutex
	shown map[[2]string]bool
}

func newHoldMetrics(reg prometheus.Registerer) *holdMetrics {
	m := &holdMetrics{
		entitiesHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_entities_held",
			Help: "Entities of ordered providers held on a route in the partitions this processor owns: their head waits (retrying, parked, or dead with on_dead: hold) and later records wait behind it. Counted every 10s from the state store.",
		}, []string{"provider", "route"}),
		entityHeldSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_entity_held_seconds",
			Help: "How long the entity held longest on a route (of those hookline_processor_entities_held counts) has been held; 0 when none.",
		}, []string{"provider", "route"}),
		shown: map[[2]string]bool{},
	}
	reg.MustRegister(m.entitiesHeld, m.entityHeldSeconds)
	return m
}

// hangingMetrics count the hanging transactions found, by what was done.
type hangingMetrics struct {
	hanging *prometheus.CounterVec
}

func newHangingMetrics(reg prometheus.Registerer) *hangingMetrics {
	m := &hangingMetrics{
		hanging: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_processor_hanging_transactions_total",
			Help: "Partitions found holding a transaction of this processor that its coordinator had finished (markers lost in a broker shutdown), by what was done: commit or abort (the coordinator's logged decision, written as the marker), undecided (left for an operator), failed (the marker write failed). An undecided or failed one is counted again at every check (every 10s and after each assignment) until it is ended.",
		}, []string{"action"}),
	}
	reg.MustRegister(m.hanging)
	return m
}

// setHeld shows routes (control.HeldReports.Routes of this processor's
// partitions) in the held gauges at now, and 0 for each route of always
// (the ordered providers' routes) not among them; it drops the series of
// any other route no longer held (a route gone from the providers file).
// A partition that went to another processor is simply not in routes.
func (m *holdMetrics) setHeld(routes []control.HeldRoute, always [][2]string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	shown := map[[2]string]bool{}
	for _, k := range always {
		m.entitiesHeld.WithLabelValues(k[0], k[1]).Set(0)
		m.entityHeldSeconds.WithLabelValues(k[0], k[1]).Set(0)
		shown[k] = true
	}
	for _, r := range routes {
		age := 0.0
		if len(r.Oldest) > 0 {
			age = max(0, now.Sub(r.Oldest[0].Since).Seconds())
		}
		m.entitiesHeld.WithLabelValues(r.Provider, r.Route).Set(float64(r.Entities))
		m.entityHeldSeconds.WithLabelValues(r.Provider, r.Route).Set(age)
		shown[[2]string{r.Provider, r.Route}] = true
	}
	for k := range m.shown {
		if !shown[k] {
			m.entitiesHeld.DeleteLabelValues(k[0], k[1])
			m.entityHeldSeconds.DeleteLabelValues(k[0], k[1])
		}
	}
	m.shown = shown
}
