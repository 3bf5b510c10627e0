package badgerdb

import (
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// compactors counts Badger's compactor goroutines (started or about to).
func compactors() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "created by github.com/dgraph-io/badger/v4.(*levelsController).startCompact")
}

// waitFor polls cond until it holds or 10 s pass, then fails with what it
// saw.
func waitFor(t *testing.T, what string, cond func() bool, saw func() string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s; saw %s", what, saw())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIdlePausesCompactors: a pause stops the compactor goroutines, a Use
// starts them again before it returns, what was written before the pause
// reads back after it, and Hold runs a call that stops and starts the
// compactors itself (DropPrefix) with one set running. The pauses are made
// by hand (pause), so nothing here depends on timing; TestIdleLoop runs
// the loop.
func TestIdlePausesCompactors(t *testing.T) {
	db := mustOpen(t, badger.DefaultOptions(t.TempDir()).WithNumCompactors(2), nil)
	if n := compactors(); n != 2 {
		t.Fatalf("compactor goroutines after Open: %d, want 2", n)
	}
	idle := NewIdle(db)
	defer idle.Close()
	idle.Use()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("v1")) }); err != nil {
		t.Fatal(err)
	}
	stopped := func(what string) {
		t.Helper()
		if !idle.pause(idle.used.Load()) {
			t.Fatalf("%s: no pause (levels %+v)", what, db.Levels())
		}
		// A compactor leaves its goroutine just after it says it is done.
		waitFor(t, what, func() bool { return idle.Stopped() && compactors() == 0 },
			func() string { return fmt.Sprintf("stopped=%v, %d compactor goroutines", idle.Stopped(), compactors()) })
	}
	if idle.pause(idle.used.Load()-1) || idle.Stopped() || compactors() != 2 {
		t.Fatalf("a pause with a use since the last look: stopped=%v, %d compactor goroutines", idle.Stopped(), compactors())
	}
	stopped("compactors stopped")

	idle.Use()
	if idle.Stopped() || compactors() != 2 {
		t.Fatalf("after Use: stopped=%v, %d compactor goroutines, want running and 2", idle.Stopped(), compactors())
	}
	var got []byte
	if err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte("k"))
		if err != nil {
			return err
		}
		got, err = it.ValueCopy(nil)
		return err
	}); err != nil || string(got) != "v1" {
		t.Fatalf("read after the pause: %q, %v; want v1", got, err)
	}

	stopped("compactors stopped again")
	if err := idle.Hold(func() error {
		if n := compactors(); n != 2 {
			return fmt.Errorf("%d compactor goroutines inside Hold, want 2", n)
		}
		return db.DropPrefix([]byte("k"))
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one set of compactors after Hold", func() bool { return compactors() == 2 },
		func() string { return fmt.Sprintf("%d compactor goroutines", compactors()) })
	stopped("compactors stopped after Hold")
	idle.Close()
	if err := db.Close(); err != nil {
		t.Fatalf("Close with the compactors stopped: %v", err)
	}
}

// TestIdleLoop: Start's loop stops the compactors of an unused DB, and
// again after a Use has started them.
func TestIdleLoop(t *testing.T) {
	db := mustOpen(t, badger.DefaultOptions(t.TempDir()).WithNumCompactors(2), nil)
	idle := NewIdle(db)
	defer idle.Close()
	idle.Start(5*time.Millisecond, 2, nil)
	saw := func() string { return fmt.Sprintf("stopped=%v, %d compactor goroutines", idle.Stopped(), compactors()) }
	waitFor(t, "compactors stopped", func() bool { return idle.Stopped() && compactors() == 0 }, saw)
	idle.Use()
	waitFor(t, "compactors stopped after a use", func() bool { return idle.Stopped() && compactors() == 0 }, saw)
	busy := NewIdle(mustOpen(t, badger.DefaultOptions(t.TempDir()).WithNumCompactors(2), nil))
	defer busy.Close()
	calls := make(chan struct{}, 1)
	busy.Start(time.Millisecond, 1, func() bool {
		select {
		case calls <- struct{}{}:
		default:
		}
		return true
	})
	<-calls
	<-calls // asked twice: the veto held after the first look
	if busy.Stopped() {
		t.Fatal("compactors stopped while busy said no")
	}
}

// TestIdleConcurrentUse: writers and readers racing the pauses (a pause
// every few milliseconds without use) read every value they wrote, and one
// set of compactors is left running or none.
func TestIdleConcurrentUse(t *testing.T) {
	db := mustOpen(t, badger.DefaultOptions(t.TempDir()).WithNumCompactors(2).WithMemTableSize(1<<20).WithValueThreshold(1<<10), nil)
	idle := NewIdle(db)
	idle.Start(time.Millisecond, 1, nil)
	defer idle.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k, v := fmt.Appendf(nil, "w%d-%d", w, i), fmt.Appendf(nil, "value %d %d", w, i)
				idle.Use()
				if err := db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
					errs <- err
					return
				}
				if i%7 == 0 {
					time.Sleep(3 * time.Millisecond) // let a pause in
				}
				idle.Use()
				var got []byte
				if err := db.View(func(txn *badger.Txn) error {
					it, err := txn.Get(k)
					if err != nil {
						return err
					}
					got, err = it.ValueCopy(nil)
					return err
				}); err != nil || string(got) != string(v) {
					errs <- fmt.Errorf("read %s: %q, %v; want %q", k, got, err, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := compactors(); n != 0 && n != 2 {
		t.Fatalf("%d compactor goroutines, want 0 or 2", n)
	}
}
