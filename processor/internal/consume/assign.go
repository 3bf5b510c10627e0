package consume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/restore"
)

// ownership tracks the raw partitions this instance owns and whether each
// has been restored. A newly assigned partition is paused, restored from the
// changelog in its own goroutine, and resumed only then; a revoked or lost
// partition's restore is cancelled. Pauses are set on every assignment, so a
// partition that comes back is restored again from its checkpoint.
type ownership struct {
	p     *Processor
	mu    sync.Mutex
	parts map[int32]*owned
	// fresh holds partitions restored but not yet seen in a committed batch,
	// for the "restored before its first record" log line.
	fresh map[int32]bool
	// doom is closed when partitions are revoked or lost, then replaced: a
	// transaction holding the channel it took at its start knows its batch
	// can no longer commit.
	doom chan struct{}
	// clean is closed once a hanging transaction check found nothing left
	// open since the last assignment; no partition resumes before it.
	clean chan struct{}
}

type owned struct {
	ready  bool
	cancel context.CancelFunc
	done   chan struct{}
}

func newOwnership(p *Processor) *ownership {
	clean := make(chan struct{})
	close(clean)
	return &ownership{p: p, parts: map[int32]*owned{}, fresh: map[int32]bool{}, doom: make(chan struct{}), clean: clean}
}

// assigned runs in the group goroutine before fetching starts for the new
// partitions.
func (o *ownership) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	parts := assigned[o.p.cfg.Names.Raw]
	if len(parts) == 0 {
		return
	}
	cl.PauseFetchPartitions(map[string][]int32{o.p.cfg.Names.Raw: parts})
	o.p.m.rebalances.WithLabelValues("assigned").Add(float64(len(parts)))
	o.p.cfg.Logger.Info("partitions assigned: restoring before processing", "topic", o.p.cfg.Names.Raw, "partitions", parts)
	o.mu.Lock()
	defer o.mu.Unlock()
	// A broker stop that cost us these partitions may have left a hanging
	// transaction of ours; a new one writing to its partition before it is
	// completed would be merged with it by the broker. Check first.
	clean := make(chan struct{})
	o.clean = clean
	go o.p.completeHanging(ctx, cl, clean)
	for _, part := range parts {
		if old, ok := o.parts[part]; ok {
			old.cancel()
		}
		rctx, cancel := context.WithCancel(ctx)
		ow := &owned{cancel: cancel, done: make(chan struct{})}
		o.parts[part] = ow
		go o.restore(rctx, cl, part, ow)
	}
	o.updateHealth()
}

// restore rebuilds one partition's state and resumes it, retrying with
// backoff until it succeeds or the partition is taken away.
func (o *ownership) restore(ctx context.Context, cl *kgo.Client, part int32, ow *owned) {
	defer close(ow.done)
	log := o.p.cfg.Logger.With("partition", part)
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		stats, err := restore.Partition(ctx, o.p.restoreConfig(), o.p.cfg.Store, part)
		if err == nil {
			o.p.m.restoreSeconds.Observe(stats.Duration.Seconds())
			o.p.m.restoreRecords.Add(float64(stats.Records))
			log.Info("partition restored", "from", stats.From, "to", stats.To, "records", stats.Records,
				"applied", stats.Applied, "expired", stats.Expired, "skipped", stats.Skipped, "rebuilt", stats.Rebuilt,
				"took", stats.Duration.String())
			break
		}
		if ctx.Err() != nil {
			log.Info("restore cancelled: partition no longer ours")
			return
		}
		log.Error("restore failed; retrying", "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	o.mu.Lock()
	clean := o.clean
	o.mu.Unlock()
	select {
	case <-ctx.Done():
		return
	case <-clean:
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parts[part] != ow || ctx.Err() != nil {
		return // revoked meanwhile
	}
	ow.ready = true
	o.fresh[part] = true
	cl.ResumeFetchPartitions(map[string][]int32{o.p.cfg.Names.Raw: {part}})
	o.updateHealth()
}

func (o *ownership) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	o.release("revoked", revoked)
}

func (o *ownership) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	o.release("lost", lost)
}

// release forgets partitions. The transact session aborts a transaction in
// progress, so in-flight work of these partitions is abandoned (its records
// are read again by the next owner); a running restore is cancelled and
// waited for, so it cannot resume a partition we no longer own.
func (o *ownership) release(kind string, m map[string][]int32) {
	parts := m[o.p.cfg.Names.Raw]
	if len(parts) == 0 {
		return
	}
	o.p.m.rebalances.WithLabelValues(kind).Add(float64(len(parts)))
	o.p.cfg.Logger.Info("partitions "+kind, "topic", o.p.cfg.Names.Raw, "partitions", parts)
	var wait []chan struct{}
	o.mu.Lock()
	close(o.doom)
	o.doom = make(chan struct{})
	for _, part := range parts {
		if ow, ok := o.parts[part]; ok {
			ow.cancel()
			wait = append(wait, ow.done)
			delete(o.parts, part)
			delete(o.fresh, part)
		}
	}
	o.updateHealth()
	o.mu.Unlock()
	for _, d := range wait {
		<-d
	}
}

// doomed returns a channel closed when partitions are next revoked or lost.
func (o *ownership) doomed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.doom
}

// stopAll cancels every restore (shutdown, or the session replaced).
func (o *ownership) stopAll() {
	o.mu.Lock()
	var wait []chan struct{}
	for part, ow := range o.parts {
		ow.cancel()
		wait = append(wait, ow.done)
		delete(o.parts, part)
	}
	o.updateHealth()
	o.mu.Unlock()
	for _, d := range wait {
		<-d
	}
}

// allReady reports whether every record's partition is owned and restored.
func (o *ownership) allReady(recs []*kgo.Record) (int32, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range recs {
		if ow, ok := o.parts[r.Partition]; !ok || !ow.ready {
			return r.Partition, false
		}
	}
	return 0, true
}

// firstRecords logs, once per assignment, the first committed record of a
// restored partition: with "partition restored", this is how an operator (and
// a test) sees that restore came first.
func (o *ownership) firstRecords(recs []*kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range recs {
		if o.fresh[r.Partition] {
			delete(o.fresh, r.Partition)
			o.p.cfg.Logger.Info("first record processed since restore", "partition", r.Partition, "offset", r.Offset)
		}
	}
}

// updateHealth sets the "restore" readiness check; o.mu is held.
func (o *ownership) updateHealth() {
	var pending []int
	for part, ow := range o.parts {
		if !ow.ready {
			pending = append(pending, int(part))
		}
	}
	if len(pending) == 0 {
		o.p.cfg.Health.Set("restore", nil)
		return
	}
	sort.Ints(pending)
	o.p.cfg.Health.Set("restore", errors.New(fmt.Sprint("restoring partitions ", pending)))
}
