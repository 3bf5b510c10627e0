package badgerdb

import (
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname to Badger's compaction switch

	"github.com/dgraph-io/badger/v4"
)

// Badger v4 runs NumCompactors goroutines (at least 2) that each wake every
// 50 ms, whether or not there is anything to compact: about 40 wake-ups a
// second, most of what an idle service with a DB spends (docs/performance.md,
// Idle services). No option slows them, and NumCompactors 0 turns
// compaction off for good. Badger stops and restarts them itself around
// DropPrefix, DropAll, Flatten and a StreamWriter (the unexported methods
// below, which take only the DB's compactor closer); Idle uses the same two
// to stop them while the DB is unused. The linker fails the build if a Badger
// release renames them, and TestIdlePausesCompactors checks that they stop
// and start the compactor goroutines.

//go:linkname stopCompactions github.com/dgraph-io/badger/v4.(*DB).stopCompactions
func stopCompactions(db *badger.DB)

//go:linkname startCompactions github.com/dgraph-io/badger/v4.(*DB).startCompactions
func startCompactions(db *badger.DB)

// Idle stops a DB's compactors once it has been unused for a while and
// nothing is left to compact, and starts them again at the next use, before
// that use reaches Badger. Reads and writes are correct either way (a
// compaction only merges tables); what stopped compactors would cost is a
// write stall once level 0 fills, which the next use's Use prevents by
// starting them first. Badger's own compactor-stopping calls (DropPrefix,
// DropAll, Flatten, StreamWriter) must run inside Hold.
//
// Its methods are safe for concurrent use. Cost of Use: an atomic add and
// an atomic load; a mutex and Badger's start (two goroutines) when the
// compactors were stopped.
type Idle struct {
	db   *badger.DB
	used atomic.Int64
	// pausing is set before the last look at used that decides a pause,
	// so a Use after that look sees it and takes mu.
	pausing atomic.Bool
	mu      sync.Mutex
	stopped bool // under mu
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool
	once    sync.Once
}

// IdleCheck and IdleQuiet are the checks Start makes by default: every
// second, and the compactors stop once two checks in a row (2-3 s) saw no
// use and nothing is left to compact.
const (
	IdleCheck = time.Second
	IdleQuiet = 2
)

// NewIdle returns an Idle for db (opened with compactors, not read-only).
// Nothing is paused until Start.
func NewIdle(db *badger.DB) *Idle {
	return &Idle{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Use records a read or write about to reach the DB and starts the
// compactors first if they were stopped.
func (i *Idle) Use() {
	i.used.Add(1)
	if !i.pausing.Load() {
		return
	}
	i.mu.Lock()
	i.resumeLocked()
	i.mu.Unlock()
}

// resumeLocked starts the compactors if they are stopped and wakes the goroutine Start started.
func (i *Idle) resumeLocked() {
	if i.stopped {
		startCompactions(i.db)
		i.stopped = false
	}
	i.pausing.Store(false)
	select {
	case i.wake <- struct{}{}:
	default:
	}
}

// Hold runs fn with the compactors started and no pause until it returns:
// for Badger calls that stop and restart the compactors themselves.
func (i *Idle) Hold(fn func() error) error {
	i.used.Add(1)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.resumeLocked()
	return fn()
}

// Stopped reports whether the compactors are stopped now.
func (i *Idle) Stopped() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stopped
}

// settled reports whether Badger has nothing to compact: level 0 empty
// (compactor 0 drains it whatever its score) and every level under its
// target.
func settled(db *badger.DB) bool {
	for _, l := range db.Levels() {
		if (l.Level == 0 && l.NumTables > 0) || l.Score >= 1 || l.Adjusted >= 1 {
			return false
		}
	}
	return true
}

// Start starts a goroutine that checks every `every` whether the DB was
// used since the last check; after quiet checks in a row without a use,
// with nothing left to compact, it stops the compactors and waits for the
// next Use (no timer while they are stopped). busy, when not nil, vetoes a
// pause while it returns true (a restore in progress). Close stops it.
// Start at most once.
func (i *Idle) Start(every time.Duration, quiet int, busy func() bool) {
	i.started.Store(true)
	go i.run(every, quiet, busy)
}

func (i *Idle) run(every time.Duration, quiet int, busy func() bool) {
	defer close(i.done)
	t := time.NewTimer(every)
	defer t.Stop()
	last, n := i.used.Load(), 0
	for {
		select {
		case <-i.stop:
			return
		case <-t.C:
		}
		if u := i.used.Load(); u != last {
			last, n = u, 0
		} else if n++; n >= quiet && (busy == nil || !busy()) && i.pause(last) {
			select {
			case <-i.stop:
				return
			case <-i.wake:
			}
			last, n = i.used.Load(), 0
		}
		t.Reset(every)
	}
}

// pause stops the compactors if used is still last and Badger has nothing
// to compact.
func (i *Idle) pause(last int64) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return true // pausing stays set: the next Use starts them
	}
	i.pausing.Store(true)
	if i.used.Load() != last || !settled(i.db) {
		i.pausing.Store(false)
		return false
	}
	stopCompactions(i.db)
	i.stopped = true
	// Drain a wake left by a Use before this pause: the next one counts.
	select {
	case <-i.wake:
	default:
	}
	return true
}

// Close stops the goroutine Start started and waits for it, leaving the
// compactors as they are: badger.DB.Close stops them whether or not they
// run. Call it before closing the DB; later calls do nothing.
func (i *Idle) Close() {
	i.once.Do(func() {
		close(i.stop)
		if i.started.Load() {
			<-i.done
		}
	})
}
