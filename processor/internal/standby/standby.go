// Package standby keeps the state of the partitions the group's balancer
// named this processor a standby of warm in the local store
// (HOOKLINE_STANDBY_REPLICAS, package balance), so that a new owner
// restores seconds of changelog, not all of it. Its Set is claimed by the
// owner's restore of a partition (Claim) and released when the partition
// goes away (Release, ReleaseAll).
package standby

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/balance"
	"github.com/hookline/hookline/processor/internal/restore"
	"github.com/hookline/hookline/processor/internal/state"
)

// DefaultEvery is how often a standby partition is caught up unless
// Config.Every says otherwise.
const DefaultEvery = 5 * time.Second

// Set keeps the state of the partitions the group's balancer named
// this processor a standby of (HOOKLINE_STANDBY_REPLICAS, package balance)
// warm in the local store: every Config.Every it catches each up with the
// changelog by an incremental restore from the store's checkpoint. A
// partition this processor owns is never caught up as a standby: the
// owner's restore claims it (cancelling and waiting for a catch-up in
// progress) and releases it when the partition goes away.
type Set struct {
	raw     string       // webhooks.raw, whose partitions are named
	store   *state.Store // the local store the catch-ups write
	restore restore.Config
	every   time.Duration // Config.Every
	log     *slog.Logger
	lag     *prometheus.GaugeVec // by partition
	count   prometheus.Gauge     // standby partitions named

	mu      sync.Mutex
	want    map[int32]bool     // named standbys, per the last assignment
	claimed map[int32]bool     // owned by this processor's session
	runs    map[int32]*catchUp // catch-ups in progress
	lagged  map[int32]bool     // partitions with a lag gauge
}

// catchUp is one standby catch-up in progress.
type catchUp struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Config is what a Set needs.
type Config struct {
	// Topic is webhooks.raw, whose partitions the balancer names.
	Topic string
	// Store is the local store the catch-ups write.
	Store *state.Store
	// Restore configures each catch-up (an incremental restore from the
	// store's checkpoint).
	Restore restore.Config
	// Every is how often each standby is caught up; 0: DefaultEvery.
	Every   time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
}

// New returns a Set; Run keeps it warm.
func New(cfg Config) *Set {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	return &Set{raw: cfg.Topic, store: cfg.Store, restore: cfg.Restore, every: cfg.Every, log: cfg.Logger,
		lag: cfg.Metrics.standbyLag, count: cfg.Metrics.standbyPartitions,
		want: map[int32]bool{}, claimed: map[int32]bool{}, runs: map[int32]*catchUp{}, lagged: map[int32]bool{}}
}

// Balancer is the group balancer that names the standbys: it also tells
// the leader how far the local store is on every partition, so a partition
// that needs a new owner goes to the member that kept it warm.
func (sb *Set) Balancer(n int) kgo.GroupBalancer {
	return &balance.Balancer{
		Standbys:    n,
		Checkpoints: sb.checkpoints,
		OnStandbys: func(m map[string][]int32) {
			sb.named(m[sb.raw])
		},
	}
}

// checkpoints are the store's checkpoints of every partition it holds.
func (sb *Set) checkpoints() map[int32]int64 {
	cps, err := sb.store.Checkpoints()
	if err != nil {
		sb.log.Warn("standbys: the store's checkpoints cannot be read; joining as if it held nothing", "err", err)
		return nil
	}
	return cps
}

// named takes the standbys of the latest assignment.
func (sb *Set) named(parts []int32) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	want := map[int32]bool{}
	for _, p := range parts {
		want[p] = true
	}
	for p, run := range sb.runs {
		if !want[p] {
			run.cancel()
		}
	}
	for p := range sb.lagged {
		if !want[p] {
			sb.lag.DeleteLabelValues(strconv.Itoa(int(p)))
			delete(sb.lagged, p)
		}
	}
	sb.want = want
	sb.count.Set(float64(len(want)))
}

// Claim marks a partition as owned: a catch-up in progress is cancelled and
// waited for, and none starts until Release.
func (sb *Set) Claim(part int32) {
	sb.mu.Lock()
	sb.claimed[part] = true
	run := sb.runs[part]
	sb.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
}

// Release ends the claims of partitions that went away.
func (sb *Set) Release(parts map[int32]bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for p := range parts {
		delete(sb.claimed, p)
	}
}

// ReleaseAll ends every claim (the session ended).
func (sb *Set) ReleaseAll() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	clear(sb.claimed)
}

// Run catches the standbys up every Config.Every until ctx ends, then
// waits for the catch-ups in progress.
func (sb *Set) Run(ctx context.Context) {
	t := time.NewTicker(sb.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sb.mu.Lock()
			runs := make([]*catchUp, 0, len(sb.runs))
			for _, r := range sb.runs {
				runs = append(runs, r)
			}
			sb.mu.Unlock()
			for _, r := range runs {
				<-r.done
			}
			return
		case <-t.C:
		}
		sb.mu.Lock()
		for part := range sb.want {
			if sb.claimed[part] || sb.runs[part] != nil {
				continue
			}
			rctx, cancel := context.WithCancel(ctx)
			run := &catchUp{cancel: cancel, done: make(chan struct{})}
			sb.runs[part] = run
			go sb.catchUp(rctx, part, run)
		}
		sb.mu.Unlock()
	}
}

// catchUp restores one standby partition from its checkpoint to the
// changelog's end.
func (sb *Set) catchUp(ctx context.Context, part int32, run *catchUp) {
	defer close(run.done)
	defer run.cancel()
	stats, err := restore.Partition(ctx, sb.restore, sb.store, part)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	delete(sb.runs, part)
	switch {
	case err != nil && ctx.Err() == nil:
		sb.log.Warn("standby catch-up failed; trying again at the next one", "partition", part, "err", err)
	case err == nil && sb.want[part] && !sb.claimed[part]:
		// The offsets this catch-up read: how far behind the standby was.
		sb.lagged[part] = true
		sb.lag.WithLabelValues(strconv.Itoa(int(part))).Set(float64(stats.To - stats.From))
	}
}

// Metrics are the standby partitions' gauges. They are registered
// whether or not the processor keeps standbys (they read 0 then).
type Metrics struct {
	standbyLag        *prometheus.GaugeVec
	standbyPartitions prometheus.Gauge
}

// NewMetrics registers the gauges with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		standbyLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_processor_standby_lag",
			Help: "Changelog offsets a standby partition was behind when it was last caught up (every 5 s; HOOKLINE_STANDBY_REPLICAS).",
		}, []string{"partition"}),
		standbyPartitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_processor_standby_partitions",
			Help: "Partitions this processor keeps warm as a standby (named by the group's balancer).",
		}),
	}
	reg.MustRegister(m.standbyLag, m.standbyPartitions)
	return m
}
