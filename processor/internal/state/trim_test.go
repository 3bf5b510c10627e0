package state

import (
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/badgerdb"
)

// A read or write wakes the trim loop once while it sleeps, and only then.
func TestTouchWakesASleepingTrim(t *testing.T) {
	s := &Store{wake: make(chan struct{}, 1), idle: badgerdb.NewIdle(nil)} // never paused: no DB
	s.touch()
	if len(s.wake) != 0 {
		t.Fatal("touch woke a trim loop that was not asleep")
	}
	s.asleep.Store(true)
	s.touch()
	s.touch()
	if len(s.wake) != 1 || s.asleep.Load() {
		t.Fatalf("after two touches of a sleeping loop: %d wakes queued, asleep %v; want 1, false", len(s.wake), s.asleep.Load())
	}
	if n := s.used.Load(); n != 3 {
		t.Fatalf("used %d after 3 touches", n)
	}
}

// The trim loop reads /proc after trimTouches reads and writes, or once
// trimEvery passed, whichever comes first.
func TestTrimDue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		touches int64
		since   time.Duration
		want    bool
	}{
		{"light use, a tenth of a second", 10, 100 * time.Millisecond, false},
		{"light use, a second", 10, time.Second, true},
		{"many reads and writes", trimTouches, 100 * time.Millisecond, true},
		{"one short of them", trimTouches - 1, trimEvery - time.Millisecond, false},
		{"never looked", 0, time.Since(time.Time{}), true},
	} {
		if got := trimDue(tc.touches, tc.since); got != tc.want {
			t.Errorf("%s: trimDue(%d, %s) = %v, want %v", tc.name, tc.touches, tc.since, got, tc.want)
		}
	}
}
