package consume

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

// DefaultStandbyEvery is Config.StandbyEvery's default.
const DefaultStandbyEvery = 5 * time.Second

// standbys keeps the state of the partitions the group's balancer named
// this processor a standby of (HOOKLINE_STANDBY_REPLICAS, package balance)
// warm in the local store: every Config.StandbyEvery it catches each up with the
// changelog by an incremental restore from the store's checkpoint. A
// partition this processor owns is never caught up as a standby: the
// owner's restore claims it (cancelling and waiting for a catch-up in
// progress) and releases it when the partition goes away.
type standbys struct {
	raw     string       // webhooks.raw, whose partitions are named
	store   *state.Store // the local store the catch-ups write
	restore restore.Config
	every   time.Duration // Config.StandbyEvery
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

func newStandbys(p *setup, m *standbyMetrics) *standbys {
	return &standbys{raw: p.cfg.Names.Raw, store: p.cfg.Store, restore: p.restoreConfig(), every: p.cfg.StandbyEvery, log: p.cfg.Logger,
		lag: m.standbyLag, count: m.standbyPartitions,
		want: map[int32]bool{}, claimed: map[int32]bool{}, runs: map[int32]*catchUp{}, lagged: map[int32]bool{}}
}

// balancer is the group balancer that names the standbys: it also tells
// the leader how far the local store is on every partition, so a partition
// that needs a new owner goes to the member that kept it warm.
func (sb *standbys) balancer(n int) kgo.GroupBalancer {
	return &balance.Balancer{
		Standbys:    n,
		Checkpoints: sb.checkpoints,
		OnStandbys: func(m map[string][]int32) {
			sb.named(m[sb.raw])
		},
	}
}

// checkpoints are the store's checkpoints of every partition it holds.
func (sb *standbys) checkpoints() map[int32]int64 {
	cps, err := sb.store.Checkpoints()
	if err != nil {
		sb.log.Warn("standbys: the store's checkpoints cannot be read; joining as if it held nothing", "err", err)
		return nil
	}
	return cps
}

// named takes the standbys of the latest assignment.
func (sb *standbys) named(parts []int32) {
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

// claim marks a partition as owned: a catch-up in progress is cancelled and
// waited for, and none starts until release.
func (sb *standbys) claim(part int32) {
	sb.mu.Lock()
	sb.claimed[part] = true
	run := sb.runs[part]
	sb.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
}

// release ends the claims of partitions that went away.
func (sb *standbys) release(parts map[int32]bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for p := range parts {
		delete(sb.claimed, p)
	}
}

// releaseAll ends every claim (the session ended).
func (sb *standbys) releaseAll() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	clear(sb.claimed)
}

// run catches the standbys up every Config.StandbyEvery until ctx ends, then
// waits for the catch-ups in progress.
func (sb *standbys) run(ctx context.Context) {
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
func (sb *standbys) catchUp(ctx context.Context, part int32, run *catchUp) {
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
