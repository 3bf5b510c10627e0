package tier

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/obs"
)

// metrics are the retrier's own series (the Kafka client's come from kprom).
// Tier labels are tier names ("1m", "5m", ...), bounded by the schedule.
type metrics struct {
	moved       *prometheus.CounterVec
	lateness    *prometheus.HistogramVec
	parked      *prometheus.GaugeVec
	badDue      prometheus.Counter
	produceErrs prometheus.Counter
	commitErrs  prometheus.Counter
	rebalances  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, h *holds) *metrics {
	m := &metrics{
		moved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_retrier_moved_records_total",
			Help: "Records moved from a retry tier back to webhooks.raw (acknowledged by Kafka), by tier.",
		}, []string{"tier"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_retrier_lateness_seconds",
			Help:    "Move time (Kafka's acknowledgement) minus the record's hookline.due-at, by tier. Never negative.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"tier"}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_retrier_parked_records",
			Help: "Offsets of each tier topic not yet committed by the retrier group (kadm lag, every 15s). Transaction markers take offsets too, so this is an upper bound: about two per parked record, and up to one per partition when nothing is parked.",
		}, []string{"tier"}),
		badDue: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookline_retrier_bad_due_at_total",
			Help: "Records read without a readable hookline.due-at; each is held until its timestamp plus its tier's delay.",
		}),
		produceErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookline_retrier_produce_errors_total",
			Help: "Moves that Kafka did not acknowledge; the partition is rewound and tried again after a backoff.",
		}),
		commitErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookline_retrier_commit_errors_total",
			Help: "Offset commits that failed after their records were moved; those records are moved again (the processor skips the copy).",
		}),
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_retrier_partitions_rebalanced_total",
			Help: "Tier partitions assigned, revoked or lost.",
		}, []string{"kind"}),
	}
	overdue := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_retrier_overdue_seconds",
		Help: "Now minus the earliest due time of a record this instance holds and has not moved yet; 0 when nothing held is due.",
	}, func() float64 { return h.overdue().Seconds() })
	paused := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_retrier_paused_partitions",
		Help: "Tier partitions paused until their head record is due.",
	}, func() float64 { p, _ := h.paused(); return float64(len(p)) })
	owned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_retrier_assigned_partitions",
		Help: "Tier partitions assigned to this instance.",
	}, func() float64 { _, n := h.paused(); return float64(n) })
	reg.MustRegister(m.moved, m.lateness, m.parked, m.badDue, m.produceErrs, m.commitErrs, m.rebalances, overdue, paused, owned)
	return m
}

// watchLag refreshes the parked gauge of each tier from the group's lag
// every interval until ctx is done.
func (m *metrics) watchLag(ctx context.Context, cl *kgo.Client, group string, tierOf map[string]string, interval time.Duration, log *slog.Logger) {
	lag := map[tp]int64{} // only touched by WatchLag's goroutine
	obs.WatchLag(ctx, cl, group, interval, log, func(topic string, partition int32, n int64) {
		tier, ok := tierOf[topic]
		if !ok {
			return
		}
		lag[tp{topic, partition}] = max(n, 0)
		var sum int64
		for p, l := range lag {
			if p.topic == topic {
				sum += l
			}
		}
		m.parked.WithLabelValues(tier).Set(float64(sum))
	})
}
