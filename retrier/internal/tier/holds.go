package tier

import (
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pauser is the part of the Kafka client the holds drive.
type pauser interface {
	PauseFetchPartitions(map[string][]int32) map[string][]int32
	ResumeFetchPartitions(map[string][]int32)
}

var _ pauser = (*kgo.Client)(nil)

// tp names one partition of one tier topic.
type tp struct {
	topic     string
	partition int32
}

func (p tp) set() map[string][]int32 { return map[string][]int32{p.topic: {p.partition}} }

// holds tracks the partitions this instance owns and which of them are
// paused until their head record is due.
//
// Every change of ownership goes through assign and release, which clear
// the partition's pause and stop its timer: a partition is never left
// paused by an earlier ownership (the classic bug of delay lines on Kafka).
// A timer carries the generation of the park that armed it; a timer that
// fires after its partition was released, re-assigned or parked again finds
// a different generation and does nothing. Safe for concurrent use: timers
// fire on their own goroutines.
type holds struct {
	mu    sync.Mutex
	cl    pauser
	now   func() time.Time
	owned map[tp]*hold
	gen   uint64
	// resumed, when set, is called (without the lock) after a timer resumed
	// a partition.
	resumed func(p tp, due time.Time)
}

type hold struct {
	paused bool
	// due and offset are the head record's while it is held, and stay set
	// after the timer resumed the partition until the head is moved: the
	// head is then due and not yet moved (overdue).
	due    time.Time
	offset int64
	timer  *time.Timer
	gen    uint64
}

func newHolds(cl pauser, now func() time.Time) *holds {
	return &holds{cl: cl, now: now, owned: map[tp]*hold{}}
}

// attach gives holds the client to pause and resume with, unless it has one.
// The rebalance callbacks call it with the client they are handed: the first
// assignment can arrive before Run has stored the client it just created.
func (h *holds) attach(cl pauser) {
	h.mu.Lock()
	if h.cl == nil {
		h.cl = cl
	}
	h.mu.Unlock()
}

// assign takes ownership of parts: each starts unpaused, with no timer, so
// that its head is fetched and judged again.
func (h *holds) assign(parts map[string][]int32) { h.reset(parts, true) }

// release gives up parts (revoked or lost): their timers stop and their
// pauses are cleared, so a later assignment starts clean.
func (h *holds) release(parts map[string][]int32) { h.reset(parts, false) }

// reset forgets what was known of parts (stopping their timers), owns them
// afresh or not at all, and clears their pauses in the client.
func (h *holds) reset(parts map[string][]int32, own bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t, ps := range parts {
		for _, p := range ps {
			if old, ok := h.owned[tp{t, p}]; ok {
				old.stop()
				delete(h.owned, tp{t, p})
			}
			if own {
				h.owned[tp{t, p}] = &hold{}
			}
		}
	}
	h.cl.ResumeFetchPartitions(parts)
}

// pause stops fetching p at once, before its timer is armed by park. It
// returns false, and pauses nothing, when p is not owned.
func (h *holds) pause(p tp) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.owned[p]
	if !ok {
		return false
	}
	hd.stop()
	h.gen++ // a timer firing now belongs to an older park
	hd.gen, hd.paused = h.gen, true
	h.cl.PauseFetchPartitions(p.set())
	return true
}

// park keeps p paused until due, when a timer resumes it; offset is the
// head record's. A p no longer owned is resumed instead (its pause must not
// outlive its ownership).
func (h *holds) park(p tp, offset int64, due time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.owned[p]
	if !ok {
		h.cl.ResumeFetchPartitions(p.set())
		return
	}
	hd.stop()
	h.gen++
	hd.gen, hd.paused, hd.due, hd.offset = h.gen, true, due, offset
	h.cl.PauseFetchPartitions(p.set())
	gen := h.gen
	hd.timer = time.AfterFunc(max(due.Sub(h.now()), 0), func() { h.fire(p, gen) })
}

// fire resumes p if the park that armed this timer is still the current one.
func (h *holds) fire(p tp, gen uint64) {
	h.mu.Lock()
	hd, ok := h.owned[p]
	if !ok || hd.gen != gen || !hd.paused {
		h.mu.Unlock()
		return
	}
	hd.paused, hd.timer = false, nil
	due := hd.due
	h.cl.ResumeFetchPartitions(p.set())
	h.mu.Unlock()
	if h.resumed != nil {
		h.resumed(p, due)
	}
}

// moved says p's head was moved: unless p was parked again, nothing of p
// is known to be waiting.
func (h *holds) moved(p tp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hd, ok := h.owned[p]; ok && !hd.paused {
		hd.due = time.Time{}
	}
}

// stopAll stops every timer (shutdown). Pauses stay: the client is closing.
func (h *holds) stopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.owned {
		hd.stop()
	}
}

// overdue is now minus the earliest due time of a held head not yet moved,
// or 0 when every held head is in the future (or nothing is held).
func (h *holds) overdue() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var earliest time.Time
	for _, hd := range h.owned {
		if !hd.due.IsZero() && (earliest.IsZero() || hd.due.Before(earliest)) {
			earliest = hd.due
		}
	}
	if earliest.IsZero() {
		return 0
	}
	return max(h.now().Sub(earliest), 0)
}

// paused returns the paused partitions, sorted, and how many are owned.
func (h *holds) paused() (paused []tp, owned int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, hd := range h.owned {
		if hd.paused {
			paused = append(paused, p)
		}
	}
	sort.Slice(paused, func(i, j int) bool {
		if paused[i].topic != paused[j].topic {
			return paused[i].topic < paused[j].topic
		}
		return paused[i].partition < paused[j].partition
	})
	return paused, len(h.owned)
}

func (hd *hold) stop() {
	if hd.timer != nil {
		hd.timer.Stop()
		hd.timer = nil
	}
}
