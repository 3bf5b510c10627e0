package gcpace

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{64 * mib, 0, 1600},         // nothing live yet: the least goal is the floor
		{64 * mib, 1 * mib, 1600},   // 6,300 would make the runtime's least goal 252 MiB
		{64 * mib, 6 * mib, 966},    // ingest under load: a goal of 64 MiB
		{64 * mib, 31 * mib, 106},   // just under half the floor
		{64 * mib, 32 * mib, 100},   // twice the live heap is the floor: Go's default
		{64 * mib, 500 * mib, 100},  // a large live heap: as without the floor
		{4 * mib, 1 * mib, 100},     // a floor at the runtime's own least goal
		{256 * mib, 8 * mib, 3100},  // a larger floor
		{256 * mib, 0, 6400},        //
		{0, 0, 100},                 // no floor
		{1 * mib, 300 * 1024, 100},  // a floor under the runtime's least goal changes nothing
		{10 * mib, 1 * mib, 250},    // capped at 10/4 × 100
		{10 * mib, 4*mib + 1, 149},  // (10-4)/4, rounded down
		{10 * mib, 5 * mib, 100},    // exactly half
		{10 * mib, 6 * mib, 100},    // more than half
		{64 * mib, 16 * mib, 300},   // (64-16)/16
		{64 * mib, 21 * mib, 204},   // rounded down
		{64 * mib, 4 * mib, 1500},   // (64-4)/4
		{64 * mib, 3 * mib, 1600},   // 2,033 capped
		{64 * mib, 3*mib + 1, 1600}, //
	} {
		if got := Percent(c.floor, c.live); got != c.want {
			t.Errorf("Percent(%d MiB, %d B) = %d, want %d", c.floor/mib, c.live, got, c.want)
		}
	}
}

// gogc reads the collector's percentage as the runtime reports it.
func gogc(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime/metrics has no %s", s[0].Name)
	}
	return s[0].Value.Uint64()
}

// waitGOGC collects until the percentage satisfies ok (the pacer runs on
// the finalizer goroutine after a collection), or fails after 10 s saying
// what it saw.
func waitGOGC(t *testing.T, what string, ok func(uint64) bool) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var seen []uint64
	for {
		runtime.GC()
		v := gogc(t)
		if ok(v) {
			return v
		}
		if len(seen) == 0 || seen[len(seen)-1] != v {
			seen = append(seen, v)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC never became %s in 10s; saw %v", what, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartPacesAndStopPutsBack(t *testing.T) {
	before := gogc(t)
	stop := Start(64 << 20)
	// A test's live heap is a few MB: the goal is the floor, far more
	// than twice it.
	got := waitGOGC(t, "over 100 for a small live heap", func(v uint64) bool { return v > DefaultPercent })
	if got > 1600 {
		t.Errorf("GOGC %d: more than 1600 makes the runtime's least goal exceed 64 MiB", got)
	}

	// A second pacer does nothing while this one runs.
	Start(64 << 30)()
	if v := gogc(t); v != got {
		t.Errorf("a second Start and its stop changed GOGC from %d to %d", got, v)
	}

	// Once the live heap is past half the floor, Go's default again.
	live := make([]byte, 48<<20)
	for i := range live {
		live[i] = byte(i)
	}
	waitGOGC(t, "100 with 48 MiB live", func(v uint64) bool { return v == DefaultPercent })
	runtime.KeepAlive(live)
	live = nil
	waitGOGC(t, "over 100 once the 48 MiB are gone", func(v uint64) bool { return v > DefaultPercent })

	stop()
	if v := gogc(t); v != before {
		t.Errorf("after stop GOGC is %d, want %d as before Start", v, before)
	}
	// Collections after stop leave it alone.
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if v := gogc(t); v != before {
		t.Errorf("a collection after stop set GOGC to %d, want %d", v, before)
	}
	stop() // twice is harmless
}

func TestStartWithoutFloor(t *testing.T) {
	before := gogc(t)
	stop := Start(0)
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if v := gogc(t); v != before {
		t.Errorf("Start(0) changed GOGC from %d to %d", before, v)
	}
	stop()
	// And a pacer can start after it.
	stop = Start(64 << 20)
	waitGOGC(t, "over 100", func(v uint64) bool { return v > DefaultPercent })
	stop()
}
