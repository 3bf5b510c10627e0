package runners

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestReusesARunner: functions run one after another take one goroutine.
func TestReusesARunner(t *testing.T) {
	p := New(4)
	defer p.Close()
	for i := range 100 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		waitIdle(t, p, 1, i)
	}
	if got := p.started.Load(); got != 1 {
		t.Fatalf("100 functions one after another started %d goroutines, want 1", got)
	}
}

// TestBoundsIdleRunners: after a burst of concurrent functions at most
// maxIdle runners wait, and the next burst reuses them.
func TestBoundsIdleRunners(t *testing.T) {
	p := New(3)
	defer p.Close()
	burst := func(n int) {
		var wg sync.WaitGroup
		release := make(chan struct{})
		wg.Add(n)
		for range n {
			p.Go(func() { defer wg.Done(); <-release })
		}
		close(release)
		wg.Wait()
	}
	before := runtime.NumGoroutine()
	burst(10)
	if got := p.started.Load(); got != 10 {
		t.Fatalf("10 concurrent functions started %d goroutines, want 10 (none was idle)", got)
	}
	waitIdle(t, p, 3, 0)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+3 { // the 7 over the bound exit
		if time.Now().After(deadline) {
			t.Fatalf("after the burst %d goroutines, %d before it: want at most 3 more (the idle runners)", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
	burst(3)
	if got := p.started.Load(); got != 10 {
		t.Fatalf("a burst of 3 with 3 idle runners started %d goroutines in all, want still 10", got)
	}
}

// TestCloseEndsIdleRunners: Close makes the waiting runners exit; Go after
// Close still runs its function.
func TestCloseEndsIdleRunners(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(8)
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(8)
	for range 8 {
		p.Go(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	waitIdle(t, p, 8, 0)
	p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("after Close %d goroutines, %d before the Pool: idle runners did not exit", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Go after Close did not run its function")
	}
}

// waitIdle waits until n runners are idle (a runner counts itself idle just
// after its function returned).
func waitIdle(t *testing.T, p *Pool, n, round int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for int(p.idle.Load()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("round %d: %d idle runners, want %d", round, int(p.idle.Load()), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestRunsOnAGrownStack: a new runner starts its function on a stack of
// stackBytes at least. n runners blocked in their functions hold n such
// stacks, which the runtime's stack memory in use shows: without grow, a
// new goroutine starts on 2-8 KiB, and a function that only waits grows
// nothing (500 took 1.5 MB).
func TestRunsOnAGrownStack(t *testing.T) {
	const n = 500
	p := New(n)
	defer p.Close()
	runtime.GC() // free the stacks of goroutines that ended before
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var running sync.WaitGroup
	release := make(chan struct{})
	running.Add(n)
	for range n {
		p.Go(func() { running.Done(); <-release })
	}
	running.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	close(release)
	grew := int64(after.StackInuse) - int64(before.StackInuse)
	if want := int64(n * stackBytes * 3 / 4); grew < want {
		t.Fatalf("%d runners in their functions took %d bytes of stack, want at least %d (%d KiB each)", n, grew, want, stackBytes>>10)
	}
}
