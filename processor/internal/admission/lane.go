package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/providers"
)

// Admitter is the lanes' admission, as the processor asks it for a record
// and one destination's lane: whether the record's class may have one
// more record admitted (Admit; the lane's own reasons to park a record
// at once are Lane.WhyPark), a slot of the destination for a record that
// waits (Wait, Free), and whether the records parked in the lane may be
// read back (ReadBack). *Budget is the one the processor uses.
type Admitter interface {
	// Admit admits a held record of class c if c has room for it in its
	// share (always with one class); false: ErrClassShare parks it.
	Admit(c providers.Priority) bool
	// Wait waits for a slot of ln: nil holds one (give it back with
	// Free); ErrNoRoom when the record is not patient (it was not parked
	// before) and waited ParkAfter; ctx's error when ctx ended first.
	Wait(ctx context.Context, ln *Lane, patient bool) error
	// Free gives back a slot Wait took.
	Free(ln *Lane)
	// ReadBack reports whether the records parked in ln's lane may be
	// read back now: the destination is open, fewer records wait than it
	// has slots, and the lane's class could admit one more.
	ReadBack(ln *Lane) bool
}

var _ Admitter = (*Budget)(nil)

// Parking rules. A record waits in memory for a slot of its destination
// unless the destination is closed (paused, or its breaker refuses calls),
// its queue is long (the lane's queue limit of records already wait), or
// it waited ParkAfter: then it is parked in the lane topic. A burst the
// destination clears in a moment is not parked; a destination that stays
// slow parks what it cannot take, so nothing it holds grows without bound.
const (
	ParkAfter           = time.Second
	minQueueLimit       = 256
	queueShareOfPending = 4 // a destination's queue is at most MaxPending/4
)

// The reasons a record is not called (decide.NotCalled), but for a
// breaker refusing, which is the destination's own error (LaneConfig).
var (
	// ErrNoRoom parks a record that waited ParkAfter for a slot.
	ErrNoRoom = errors.New("destination had no room")
	// ErrQueueFull parks a record whose destination has a long queue
	// already.
	ErrQueueFull = errors.New("destination queue full")
	// ErrClassShare parks a record whose priority class holds its share
	// of HOOKLINE_MAX_PENDING while another class needs the rest.
	ErrClassShare = errors.New("priority class over its share of HOOKLINE_MAX_PENDING")
	// ErrPaused parks a record of a destination an operator paused.
	ErrPaused = errors.New("destination paused by an operator")
)

// LaneConfig is one destination's admission; every field is required
// unless noted.
type LaneConfig struct {
	// Slots bounds the calls in flight (destination.max_inflight, else
	// HOOKLINE_MAX_INFLIGHT).
	Slots int
	// MaxPending is HOOKLINE_MAX_PENDING: the queue limit is
	// max(4 × Slots, 256, MaxPending/4) records waiting for a slot.
	MaxPending int
	// Class is the lane's priority class: its parked records are read
	// back only while the class could admit one more.
	Class providers.Priority
	// Refusing says the destination's breaker refuses calls now, and
	// Refused is the reason a record then parks. Optional: no breaker.
	Refusing func() bool
	Refused  error
	// Waiting counts the records waiting for a slot.
	Waiting prometheus.Gauge
}

// Lane is one destination's admission: at most Slots calls in flight, a
// queue of records waiting for a slot in their own chains' goroutines (so
// a full lane holds back only its own route's records), and whether the
// destination is closed (paused by an operator, or its breaker refusing).
// Its counters are atomics: no lock.
type Lane struct {
	class   providers.Priority
	slots   chan struct{}
	waitN   atomic.Int64 // records waiting for a slot
	waiting prometheus.Gauge
	// queueLimit is how many may wait before the next is parked at once.
	queueLimit int64
	refusing   func() bool // nil: no breaker
	refused    error
	// paused is the operator's setting: a paused destination is called
	// by no one.
	paused atomic.Bool

	// The limit below Slots (SetLimit): the lane withholds Slots - limit
	// slots itself, those it could take at once (withheld) and those it
	// takes from the next calls that end (owed). mu guards both; it is
	// taken alone, calling out of nothing.
	mu       sync.Mutex
	withheld int
	owed     int
	limit    atomic.Int64
}

// NewLane returns the admission of one destination.
func NewLane(cfg LaneConfig) *Lane {
	ln := &Lane{
		class:      cfg.Class,
		slots:      make(chan struct{}, cfg.Slots),
		waiting:    cfg.Waiting,
		queueLimit: int64(max(4*cfg.Slots, minQueueLimit, cfg.MaxPending/queueShareOfPending)),
		refusing:   cfg.Refusing,
		refused:    cfg.Refused,
	}
	ln.limit.Store(int64(cfg.Slots))
	return ln
}

// Limit is the calls the lane lets in flight now: Slots, or less after
// SetLimit.
func (ln *Lane) Limit() int { return int(ln.limit.Load()) }

// SetLimit sets the calls the lane lets in flight, between 1 and Slots (an
// adaptive limit, Limiter). A lower limit takes effect as calls end: the
// calls in flight are not stopped. Cost: a mutex and, per slot moved, a
// channel operation that does not block.
func (ln *Lane) SetLimit(n int) {
	n = min(max(n, 1), cap(ln.slots))
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.limit.Store(int64(n))
	want := cap(ln.slots) - n // slots to withhold
	for ln.withheld+ln.owed < want {
		select {
		case ln.slots <- struct{}{}:
			ln.withheld++
		default:
			ln.owed++ // taken from the next call that ends
		}
	}
	for ln.withheld+ln.owed > want {
		if ln.owed > 0 {
			ln.owed--
			continue
		}
		<-ln.slots // one the lane holds: never blocks
		ln.withheld--
	}
}

// free gives back a slot a call held, or keeps it for the lane while its
// limit owes one.
func (ln *Lane) free() {
	ln.mu.Lock()
	if ln.owed > 0 {
		ln.owed--
		ln.withheld++
		ln.mu.Unlock()
		return
	}
	ln.mu.Unlock()
	<-ln.slots
}

// Class is the lane's priority class.
func (ln *Lane) Class() providers.Priority { return ln.class }

// SetPaused sets the operator's pause.
func (ln *Lane) SetPaused(paused bool) { ln.paused.Store(paused) }

// Paused reports whether an operator paused the destination.
func (ln *Lane) Paused() bool { return ln.paused.Load() }

// Closed reports whether the destination takes no call now: paused by an
// operator, or its breaker refusing calls.
func (ln *Lane) Closed() bool {
	return ln.paused.Load() || ln.refusing != nil && ln.refusing()
}

// Refusing reports whether the destination's breaker refuses calls now.
func (ln *Lane) Refusing() bool { return ln.refusing != nil && ln.refusing() }

// WhyPark says why a record read now is parked at once, nil when it may
// wait for a slot.
func (ln *Lane) WhyPark() error {
	switch {
	case ln.paused.Load():
		return ErrPaused
	case ln.refusing != nil && ln.refusing():
		return ln.refused
	case ln.waitN.Load() >= ln.queueLimit:
		return ErrQueueFull
	}
	return nil
}

// Room reports whether the destination has room for its parked records:
// it is open and fewer records wait than it lets in flight (Limit).
func (ln *Lane) Room() bool {
	return !ln.Closed() && ln.waitN.Load() < ln.limit.Load()
}

// wait waits for a slot (Admitter.Wait).
func (ln *Lane) wait(ctx context.Context, patient bool) error {
	ln.waiting.Inc()
	ln.waitN.Add(1)
	defer func() {
		ln.waiting.Dec()
		ln.waitN.Add(-1)
	}()
	var tooLong <-chan time.Time // a lane record waits as long as it takes: it was parked already
	if !patient {
		t := time.NewTimer(ParkAfter)
		defer t.Stop()
		tooLong = t.C
	}
	select {
	case ln.slots <- struct{}{}:
		return nil
	case <-tooLong:
		return ErrNoRoom
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait implements Admitter.
func (b *Budget) Wait(ctx context.Context, ln *Lane, patient bool) error {
	return ln.wait(ctx, patient)
}

// Free implements Admitter.
func (b *Budget) Free(ln *Lane) { ln.free() }

// ReadBack implements Admitter.
func (b *Budget) ReadBack(ln *Lane) bool { return ln.Room() && b.Room(ln.class) }
