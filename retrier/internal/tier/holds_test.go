package tier

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakePauser records the client's pause set, as franz-go keeps it: a pause
// outlives assignments until it is resumed.
type fakePauser struct {
	mu      sync.Mutex
	paused  map[tp]bool
	resumes []time.Time // when a timer resumed a partition
}

func newFakePauser() *fakePauser { return &fakePauser{paused: map[tp]bool{}} }

func (f *fakePauser) PauseFetchPartitions(m map[string][]int32) map[string][]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			f.paused[tp{t, p}] = true
		}
	}
	return nil
}

func (f *fakePauser) ResumeFetchPartitions(m map[string][]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(f.paused, tp{t, p})
		}
	}
}

func (f *fakePauser) isPaused(p tp) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused[p]
}

var p0 = tp{"webhooks.retry.1m", 0}

func TestParkResumesAtDueNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newFakePauser()
		h := newHolds(cl, time.Now)
		var resumedAt time.Time
		h.resumed = func(tp, time.Time) { resumedAt = time.Now() }
		h.assign(p0.set())
		due := time.Now().Add(90 * time.Second)
		h.pause(p0)
		h.park(p0, 7, due)
		time.Sleep(90*time.Second - time.Millisecond)
		synctest.Wait()
		if !cl.isPaused(p0) {
			t.Fatal("resumed before due")
		}
		if got := h.overdue(); got != 0 {
			t.Fatalf("overdue %s before due", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if cl.isPaused(p0) || !resumedAt.Equal(due) {
			t.Fatalf("paused=%t resumed at %s, want resumed at %s", cl.isPaused(p0), resumedAt, due)
		}
		// Resumed but not yet moved: the head is overdue until moved.
		time.Sleep(2 * time.Second)
		if got := h.overdue(); got != 2*time.Second {
			t.Fatalf("overdue %s, want 2s", got)
		}
		h.moved(p0)
		if got := h.overdue(); got != 0 {
			t.Fatalf("overdue %s after the move, want 0", got)
		}
	})
}

// TestRevokedWhilePaused is the classic bug: a partition revoked while
// paused must not stay paused when it is assigned again, and the old timer
// must not resume a later park early.
func TestRevokedWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newFakePauser()
		h := newHolds(cl, time.Now)
		h.assign(p0.set())
		h.pause(p0)
		h.park(p0, 1, time.Now().Add(10*time.Second))

		h.release(p0.set())
		if cl.isPaused(p0) {
			t.Fatal("a released partition stays paused in the client")
		}
		if _, n := h.paused(); n != 0 {
			t.Fatalf("%d partitions still owned", n)
		}
		h.assign(p0.set())
		if cl.isPaused(p0) {
			t.Fatal("a re-assigned partition starts paused")
		}
		// Re-parked by the new ownership at a later due time: the first
		// timer (10s) must not resume it.
		h.pause(p0)
		h.park(p0, 1, time.Now().Add(20*time.Second))
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if !cl.isPaused(p0) {
			t.Fatal("the timer of the revoked ownership resumed the partition early")
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if cl.isPaused(p0) {
			t.Fatal("not resumed at the new due time")
		}
	})
}

func TestLostStopsTimerAndParkAfterReleaseResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newFakePauser()
		h := newHolds(cl, time.Now)
		fired := 0
		h.resumed = func(tp, time.Time) { fired++ }
		h.assign(p0.set())
		h.pause(p0)
		h.park(p0, 1, time.Now().Add(time.Second))
		h.release(p0.set()) // lost
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if fired != 0 {
			t.Fatal("a lost partition's timer fired")
		}
		// A park for a partition no longer owned must not leave it paused.
		if h.pause(p0) {
			t.Fatal("paused a partition not owned")
		}
		h.park(p0, 1, time.Now().Add(time.Second))
		if cl.isPaused(p0) {
			t.Fatal("park paused a partition not owned")
		}
	})
}

func TestParkInThePastResumesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newFakePauser()
		h := newHolds(cl, time.Now)
		h.assign(p0.set())
		h.pause(p0)
		h.park(p0, 1, time.Now().Add(-time.Minute))
		synctest.Wait()
		if cl.isPaused(p0) {
			t.Fatal("a head already due stays paused")
		}
		if got := h.overdue(); got != time.Minute {
			t.Fatalf("overdue %s, want 1m", got)
		}
	})
}

func TestStopAllStopsTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newFakePauser()
		h := newHolds(cl, time.Now)
		h.assign(map[string][]int32{"a": {0, 1, 2}})
		for p := int32(0); p < 3; p++ {
			h.pause(tp{"a", p})
			h.park(tp{"a", p}, 0, time.Now().Add(time.Duration(p+1)*time.Second))
		}
		if ps, n := h.paused(); len(ps) != 3 || n != 3 {
			t.Fatalf("paused %v of %d", ps, n)
		}
		h.stopAll()
		time.Sleep(time.Minute)
		synctest.Wait()
		if ps, _ := h.paused(); len(ps) != 3 {
			t.Fatalf("timers fired after stopAll: paused %v", ps)
		}
	})
}
