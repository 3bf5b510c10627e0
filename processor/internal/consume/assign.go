package consume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/offsets"
	"github.com/hookline/hookline/processor/internal/standby"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// The ownership of partitions is the transaction loop's txnloop.Offsets
// and its partitions' partitionHost.
var (
	_ txnloop.Offsets[*result] = (*ownership)(nil)
	_ partitionHost            = (*ownership)(nil)
)

// ownership is the raw partitions this session owns (partition, one each)
// and the group's callbacks. A newly assigned partition is paused in the
// transactional session (which never fetches: the reader does) and
// started: it restores itself and asks to resume (resume), and is then
// handed to the reader, with its lanes, at the committed offsets; a
// revoked or lost partition is ended (its restore, its calls) and the
// reader stops reading it. A partition that comes back is a new one,
// restored again from its checkpoint.
type ownership struct {
	p *setup
	// standby keeps standby partitions warm; nil without standbys.
	standby *standby.Set
	// hanging completes hanging transactions after an assignment.
	hanging hangingGate
	// user is told of partitions ready and gone.
	user partitionUser

	mu    sync.Mutex
	parts map[int32]*partition
	// doom is closed when partitions are revoked or lost, then replaced: a
	// transaction holding the channel it took at its start knows its batch
	// can no longer commit.
	doom chan struct{}
	// clean is closed once a hanging transaction check found nothing left
	// open since the last assignment; no partition resumes before it.
	clean chan struct{}
}

// hangingGate is what ownership asks before partitions resume after an
// assignment: complete the hanging transactions of this processor, then
// close clean (hangingCheck.completeHanging).
type hangingGate interface {
	completeHanging(ctx context.Context, cl *kgo.Client, clean chan struct{})
}

// partitionUser is what ownership tells its session of its partitions.
type partitionUser interface {
	// partitionReady: a restored partition is to be read from its
	// windows' committed offsets. Called with ownership.mu held.
	// empty are the lane topics whose partition part holds nothing
	// (partition.emptyLanes).
	partitionReady(part int32, wins map[string]*offsets.Window, empty []string)
	// partitionsGone: partitions went away; stop reading them and drop
	// their work. Called without ownership.mu held.
	partitionsGone(parts map[int32]bool)
}

func newOwnership(p *setup, sb *standby.Set, hanging hangingGate, user partitionUser) *ownership {
	clean := make(chan struct{})
	close(clean)
	return &ownership{p: p, standby: sb, hanging: hanging, user: user,
		parts: map[int32]*partition{}, doom: make(chan struct{}), clean: clean}
}

// assigned runs in the group goroutine before fetching starts for the new
// partitions.
func (o *ownership) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	parts := assigned[o.p.cfg.Names.Raw]
	if len(parts) == 0 {
		return
	}
	cl.PauseFetchPartitions(map[string][]int32{o.p.cfg.Names.Raw: parts})
	o.p.mParts.rebalances.WithLabelValues("assigned").Add(float64(len(parts)))
	at := time.Now()
	o.p.cfg.Logger.Info("partitions assigned: restoring before processing", "topic", o.p.cfg.Names.Raw, "partitions", parts)
	o.mu.Lock()
	defer o.mu.Unlock()
	// A broker stop that cost us these partitions may have left a hanging
	// transaction of ours; a new one writing to its partition before it is
	// completed would be merged with it by the broker. Check first.
	clean := make(chan struct{})
	o.clean = clean
	go o.hanging.completeHanging(ctx, cl, clean)
	for _, part := range parts {
		if old, ok := o.parts[part]; ok {
			old.cancel()
		}
		o.parts[part] = startPartition(ctx, o.p, o.standby, part, at, cl, o)
	}
	o.updateHealth()
}

// hangingChecked is closed once the check of the latest assignment left
// nothing open (partitionHost).
func (o *ownership) hangingChecked() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.clean
}

// resume hands a restored partition to the session, unless it is no
// longer the one owned (partitionHost).
func (o *ownership) resume(pt *partition, wins map[string]*offsets.Window, empty []string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parts[pt.num] != pt || pt.gone() {
		return false
	}
	pt.resumed(wins)
	o.user.partitionReady(pt.num, wins, empty)
	o.updateHealth()
	return true
}

func (o *ownership) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	o.release("revoked", revoked)
}

func (o *ownership) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	o.release("lost", lost)
}

// release forgets partitions: their calls are cancelled and waited for,
// their restore too (so it cannot resume a partition we no longer own), and
// the session drops their decided states and waiting results. A
// transaction in progress is aborted by the session; what was not committed
// is read again by the next owner, which skips what was.
func (o *ownership) release(kind string, m map[string][]int32) {
	parts := m[o.p.cfg.Names.Raw]
	if len(parts) == 0 {
		return
	}
	o.p.mParts.rebalances.WithLabelValues(kind).Add(float64(len(parts)))
	o.p.cfg.Logger.Info("partitions "+kind, "topic", o.p.cfg.Names.Raw, "partitions", parts)
	var ended []*partition
	gone := map[int32]bool{}
	o.mu.Lock()
	close(o.doom)
	o.doom = make(chan struct{})
	for _, part := range parts {
		if pt, ok := o.parts[part]; ok {
			pt.cancel()
			ended = append(ended, pt)
			delete(o.parts, part)
			gone[part] = true
		}
	}
	o.updateHealth()
	o.mu.Unlock()
	o.user.partitionsGone(gone)
	for _, pt := range ended {
		pt.end()
	}
	if o.standby != nil {
		o.standby.Release(gone)
	}
}

// Doomed returns a channel closed when partitions are next revoked or lost.
func (o *ownership) Doomed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.doom
}

// owner is partition part as now owned; nil when not owned (its methods
// take a nil partition as one not ready, with no hold set).
func (o *ownership) owner(part int32) *partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.parts[part]
}

// stopAll ends every partition (shutdown, or the session replaced) and
// forgets it.
func (o *ownership) stopAll() {
	o.mu.Lock()
	var ended []*partition
	for part, pt := range o.parts {
		pt.cancel()
		ended = append(ended, pt)
		delete(o.parts, part)
	}
	o.updateHealth()
	o.mu.Unlock()
	for _, pt := range ended {
		pt.end()
	}
	if o.standby != nil {
		o.standby.ReleaseAll()
	}
}

// cancelWork cancels every partition's calls but keeps the partitions, so
// what finished can still be committed (the end of a graceful stop).
func (o *ownership) cancelWork() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, pt := range o.parts {
		pt.cancel()
	}
}

// accept takes a polled record into its window and returns the partition,
// or nil when the record is not to be run: read before, finished before
// this owner took the partition (committed metadata), or of a partition no
// longer owned (fetched before the reader stopped reading it: its next
// owner reads it from the committed offset).
func (o *ownership) accept(r *kgo.Record) *partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	pt, ok := o.parts[r.Partition]
	if !ok || !pt.accept(r.Topic, r.Offset) {
		return nil
	}
	return pt
}

// restored lists the partitions owned and restored (read by the reader),
// in no order.
func (o *ownership) restored() []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int32
	for part, pt := range o.parts {
		if pt.isReady() {
			out = append(out, part)
		}
	}
	return out
}

// span is the offsets held above the committed offsets, all partitions.
func (o *ownership) span() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int64
	for _, pt := range o.parts {
		n += pt.span()
	}
	return n
}

// Begin keeps the results whose partition is still the one they were read
// from, marks their offsets as in the transaction, and hands the others to
// drop.
func (o *ownership) Begin(batch []*result, drop func(*result)) []*result {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := batch[:0]
	for _, res := range batch {
		if o.parts[res.r.Partition] != res.ow || !res.ow.mark(res.r.Topic, res.r.Offset, offsets.InTxn) {
			drop(res)
			continue
		}
		kept = append(kept, res)
	}
	return kept
}

// Points is what to commit for each partition whose low-water mark or
// metadata moved since its last commit.
func (o *ownership) Points() map[txnloop.TopicPart]txnloop.Point {
	o.mu.Lock()
	defer o.mu.Unlock()
	pts := map[txnloop.TopicPart]txnloop.Point{}
	for _, pt := range o.parts {
		pt.points(pts)
	}
	return pts
}

// Aborted returns a transaction's offsets to running: their results wait
// for the next one.
func (o *ownership) Aborted(batch []*result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, res := range batch {
		if o.parts[res.r.Partition] == res.ow {
			res.ow.mark(res.r.Topic, res.r.Offset, offsets.Running)
		}
	}
}

// Committed moves every partition's windows past a committed transaction
// (partition.committed).
func (o *ownership) Committed(batch []*result, points map[txnloop.TopicPart]txnloop.Point) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byPart := map[int32]map[string][]int64{}
	first := map[int32]int64{}
	for _, res := range batch {
		part := res.r.Partition
		if byPart[part] == nil {
			byPart[part] = map[string][]int64{}
			first[part] = res.r.Offset
		}
		byPart[part][res.r.Topic] = append(byPart[part][res.r.Topic], res.r.Offset)
	}
	for part, pt := range o.parts {
		pt.committed(byPart[part], first[part], points)
	}
}

// updateHealth sets the "restore" readiness check; o.mu is held.
func (o *ownership) updateHealth() {
	var pending []int
	for part, pt := range o.parts {
		if !pt.isReady() {
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
