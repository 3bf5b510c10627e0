package state

import (
	"testing"

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
