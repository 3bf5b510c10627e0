package admission

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/providers"
)

var errRefused = errors.New("circuit open")

func testLane(slots int, refusing func() bool) *Lane {
	return NewLane(LaneConfig{Slots: slots, MaxPending: 0, Class: providers.PriorityNormal,
		Refusing: refusing, Refused: errRefused, Waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "w"})})
}

// TestParkReasons: the reasons a record is parked before any call, in
// their order (paused, the breaker, the queue: Lane.WhyPark, the plan's
// view of the destination), then the class's share (Admitter.Admit, the
// admission chain's first stage).
func TestParkReasons(t *testing.T) {
	refusing := false
	ln := testLane(1, func() bool { return refusing })
	b := testBudget(100, false)
	var adm Admitter = b

	ln.SetPaused(true)
	refusing = true
	if why := ln.WhyPark(); !errors.Is(why, ErrPaused) {
		t.Fatalf("paused and refusing: WhyPark = %v, want ErrPaused first", why)
	}
	ln.SetPaused(false)
	if why := ln.WhyPark(); !errors.Is(why, errRefused) {
		t.Fatalf("refusing: WhyPark = %v, want the breaker's error", why)
	}
	if !ln.Closed() || ln.Room() || adm.ReadBack(ln) {
		t.Fatal("a refusing destination is open or has room")
	}
	refusing = false
	ln.waitN.Store(ln.queueLimit) // as many wait as the queue takes
	if why := ln.WhyPark(); !errors.Is(why, ErrQueueFull) {
		t.Fatalf("queue at its limit (%d): WhyPark = %v, want ErrQueueFull", ln.queueLimit, why)
	}
	ln.waitN.Store(0)
	if why := ln.WhyPark(); why != nil || !adm.Admit(providers.PriorityNormal) {
		t.Fatalf("open lane: WhyPark = %v, want nil and the record admitted", why)
	}

	// Several classes: low over its share while critical holds the rest.
	bc := testBudget(100, true)
	admitN(t, bc, providers.PriorityCritical, 80)
	for range 30 {
		bc.Hold(providers.PriorityLow, 10)
		if !bc.Admit(providers.PriorityLow) {
			return
		}
	}
	t.Fatal("low was never refused its class's share beside 80 critical records")
}

// TestQueueLimit: max(4 × slots, 256, MaxPending/4).
func TestQueueLimit(t *testing.T) {
	for _, c := range []struct {
		slots, maxPending int
		want              int64
	}{{1, 0, 256}, {100, 0, 400}, {1, 10_000, 2_500}} {
		ln := NewLane(LaneConfig{Slots: c.slots, MaxPending: c.maxPending, Waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "w"})})
		if ln.queueLimit != c.want {
			t.Errorf("slots %d, max pending %d: queue limit %d, want %d", c.slots, c.maxPending, ln.queueLimit, c.want)
		}
	}
}

// TestWaitForASlot: a record takes a free slot at once; with none free an
// impatient one gives up after ParkAfter (ErrNoRoom), a patient one waits
// until a slot is freed, and ctx ends either wait.
func TestWaitForASlot(t *testing.T) { synctest.Test(t, testWaitForASlot) }

func testWaitForASlot(t *testing.T) {
	ln := testLane(1, nil)
	b := testBudget(100, false)
	ctx := context.Background()
	if err := b.Wait(ctx, ln, false); err != nil {
		t.Fatalf("free slot: Wait = %v", err)
	}
	if ln.Room() != true {
		t.Fatal("no room with nothing waiting")
	}
	start := time.Now()
	if err := b.Wait(ctx, ln, false); !errors.Is(err, ErrNoRoom) || time.Since(start) != ParkAfter {
		t.Fatalf("no slot: Wait = %v after %s, want ErrNoRoom after %s", err, time.Since(start), ParkAfter)
	}
	if ln.waitN.Load() != 0 {
		t.Fatalf("%d counted waiting after the wait ended", ln.waitN.Load())
	}
	got := make(chan error, 1)
	go func() { got <- b.Wait(ctx, ln, true) }()
	time.Sleep(2 * ParkAfter)
	synctest.Wait()
	select {
	case err := <-got:
		t.Fatalf("a patient record gave up: %v", err)
	default:
	}
	b.Free(ln)
	if err := <-got; err != nil {
		t.Fatalf("patient Wait = %v after a Free", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Wait(cctx, ln, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended ctx: Wait = %v, want context.Canceled", err)
	}
}
