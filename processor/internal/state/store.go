// Package state is the processor's local dedup state: a Badger database that
// caches the changelog topic (DESIGN.md §6). Every write carries the
// changelog offset it reached (a per-partition checkpoint) in the same Badger
// transaction, so after a crash the checkpoint never claims more than the
// state holds, and restore (package restore) re-reads the changelog from it.
// Badger is never ahead of the changelog: deleting the data directory is
// always safe, it is rebuilt from the topic.
//
// Key layout: one kind byte, the partition as 4 big-endian bytes, then (for
// state) the idempotency key. A partition's state is one key prefix, so
// WipePartition is one DropPrefix.
//
// Values are opaque bytes here; the caller decodes them.
package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookline/hookline/pkg/badgerdb"
)

// Key kinds: the first byte of every Badger key.
const (
	kindState      byte = 's' // 's' | partition | idempotency key -> state value
	kindCheckpoint byte = 'c' // 'c' | partition -> next changelog offset, 8 bytes big-endian
)

// ErrCorrupt reports a stored value the store cannot read (today: a
// checkpoint that is not 8 bytes). The partition should be wiped and rebuilt
// from the changelog.
var ErrCorrupt = errors.New("state: corrupt stored value")

// Options configure Open.
type Options struct {
	// Dir is the data directory, created if missing. Deleting it is always
	// safe: restore rebuilds it from the changelog.
	Dir string
	// Logger receives Badger's own logs: its info and debug lines at Debug,
	// its warnings at Warn, its errors at Error. Nil discards them.
	Logger *slog.Logger
	// InMemory keeps everything in memory and ignores Dir (tests).
	InMemory bool
	// Memory is what the store may hold in memory, split by Split between
	// Badger's memtables, block cache and index cache, the cache of recent
	// states, and the budget of restores (see Reserve); default
	// DefaultMemory. HOOKLINE_STATE_MEMORY sets it.
	Memory int64
	// RestoreMemory, when above zero, replaces the restore budget that
	// Memory gives (tests use a tiny one).
	RestoreMemory int64
	// noTrim leaves mapped table pages alone (TestRSS's "before").
	noTrim bool
	// compactCheck, when above zero, replaces badgerdb.IdleCheck (tests).
	compactCheck time.Duration
}

// Change is one state update to apply.
type Change struct {
	Partition int32
	Key       string
	// Value is the state record; nil deletes the key (a changelog tombstone).
	Value []byte
	// ExpiresAt is when the state stops counting (zero: never). A change
	// that has already expired is not written, but still deletes any older
	// value of the key.
	ExpiresAt time.Time
}

// Store is the Badger state store. Its methods are safe for concurrent use;
// the processor keeps one writer per partition.
type Store struct {
	db     *badger.DB
	keys   *keyCounter
	budget *budget
	recent *recent
	stop   chan struct{}
	done   chan struct{}
	// trimmed counts trims of the mapped table pages (trim_linux.go).
	trimmed atomic.Int64
	// used counts the calls that read or write Badger (touch); asleep says
	// the trim loop waits for the next (wake, capacity 1).
	used   atomic.Int64
	asleep atomic.Bool
	wake   chan struct{}
	// idle stops Badger's compactors while nothing reads or writes
	// (see Open); touch starts them again.
	idle   *badgerdb.Idle
	closed sync.Once
	err    error
}

// Open opens (or creates) the store, tuned for a small footprint (see
// badgerOptions), and starts a value-log GC goroutine that Close stops. It
// seeds Keys from the counts the last Close saved; after a crash it counts
// the live keys instead: a key-only scan, about 1 s per million keys on 2
// cores. A directory Badger cannot open gives an error
// naming it (badgerdb.ErrHeld when another process holds it); see
// OpenOrReset.
func Open(o Options) (*Store, error) {
	if !o.InMemory && o.Dir == "" {
		return nil, errors.New("state: no data directory (Options.Dir)")
	}
	return open(o, badgerOptions(o))
}

// open opens the store with Badger options bo (tests compare tunings).
func open(o Options, bo badger.Options) (*Store, error) {
	db, err := badgerdb.Open(bo, o.Logger)
	if err != nil {
		where := "in memory"
		if !o.InMemory {
			where = "in " + o.Dir
		}
		return nil, fmt.Errorf("state: open badger %s (the directory can be deleted: restore rebuilds it from the changelog): %w", where, err)
	}
	m := Split(o.Memory)
	if o.RestoreMemory > 0 {
		m.Restore = o.RestoreMemory
	}
	s := &Store{db: db, keys: newKeyCounter(), budget: newBudget(m.Restore), recent: newRecent(m.Recent),
		stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1), idle: badgerdb.NewIdle(db)}
	if loaded, err := s.keys.loadCounts(db); err != nil || !loaded {
		if err != nil {
			logger(o.Logger).Warn("state: saved key counts unreadable, counting keys", "err", err)
		}
		if err := s.keys.seed(db); err != nil {
			return nil, errors.Join(fmt.Errorf("state: count keys: %w", err), db.Close())
		}
	}
	if o.noTrim {
		m.Mapped = math.MaxInt64
	} else if !o.InMemory {
		dropCachedTables(o.Dir)
	}
	go s.gcLoop(o.InMemory, o.Dir, m.Mapped)
	// Badger's two compactors wake every 50 ms whether or not there is
	// work: 40 of an idle processor's wake-ups a second, about half its
	// idle CPU (docs/performance.md). Once the store is unused (2-3 s) and
	// Badger has nothing left to compact, they stop until the next read or
	// write (touch), which starts them before it reaches Badger; never
	// while a restore holds the budget (its bulk load waits on them).
	every := badgerdb.IdleCheck
	if o.compactCheck > 0 {
		every = o.compactCheck
	}
	s.idle.Start(every, badgerdb.IdleQuiet, s.budget.inUse)
	return s, nil
}

// gcInterval is how often the value log is garbage-collected. Values below
// Badger's value threshold (1 MiB, far above a state record) live in the LSM
// tree, so the value log holds almost nothing and a GC round is usually a
// cheap no-op; it runs for the rare large value.
const gcInterval = 5 * time.Minute

// gcLoop garbage-collects the value log every gcInterval and trims the
// mapped table pages (looking every trimInterval, trimDue) while the store is used, until
// Close. Once trimQuiet checks in a row saw no read or write, it checks
// again at the next one (touch wakes it) or after trimIdle: an idle
// processor wakes for it every 10 s instead of 10 times a second.
func (s *Store) gcLoop(inMemory bool, dir string, mapped int64) {
	defer close(s.done)
	if inMemory {
		return // Badger refuses value-log GC in memory; nothing is mapped
	}
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	trim := time.NewTimer(trimInterval)
	defer trim.Stop()
	last, quiet := s.used.Load(), 0
	var readUsed int64
	var readAt time.Time // of the last trim look: never yet
	for {
		if n := s.used.Load(); trimDue(n-readUsed, time.Since(readAt)) {
			s.trim(dir, mapped)
			readUsed, readAt = n, time.Now()
		}
		wait := trimInterval
		if n := s.used.Load(); n != last {
			last, quiet = n, 0
		} else if quiet++; quiet >= trimQuiet {
			// Asleep before the last look at used: a touch after it
			// sees asleep and wakes the loop.
			s.asleep.Store(true)
			if s.used.Load() == last {
				wait = trimIdle
			}
		}
		trim.Reset(wait)
		select {
		case <-s.stop:
			return
		case <-s.wake:
			s.asleep.Store(false)
			continue
		case <-trim.C:
			s.asleep.Store(false)
			continue
		case <-t.C:
			s.asleep.Store(false)
		}
		// Each successful call rewrites one file; repeat until nothing is
		// worth rewriting (ErrNoRewrite) or Close asks us to stop.
		for s.db.RunValueLogGC(0.5) == nil {
			select {
			case <-s.stop:
				return
			default:
			}
		}
	}
}

// trimInterval is how often the trim loop wakes while the store is used,
// to check the file-backed RSS against Memory.Mapped (reading
// /proc/self/status, 20-130 µs) when trimDue says so. Random reads at
// 75,000/s map about 45 MB in that time.
const trimInterval = 100 * time.Millisecond

// trimTouches and trimEvery decide when a wake of the trim loop reads
// /proc/self/status (trimDue): after trimTouches reads and writes since the
// last look (about 3 MB of table pages mapped, at the 6 KB a random read
// maps), else once trimEvery passed. At 10 to 1,000 events a second that is
// one look a second instead of ten, each 20-130 µs (the read of a /proc
// file, more on a busy machine); from about 5,000 reads and writes a second
// it is every trimInterval, as before.
const (
	trimTouches = 500
	trimEvery   = time.Second
)

// trimDue reports whether the trim loop looks at the RSS now: touches
// reads and writes since its last look, since the time passed.
func trimDue(touches int64, since time.Duration) bool {
	return touches >= trimTouches || since >= trimEvery
}

// trimQuiet is how many checks in a row without a read or write put the
// trim loop to sleep (a second: compactions a burst of writes started go
// on a little after it), and trimIdle how long it then sleeps at most
// (compactions of a store nobody uses, rare).
const (
	trimQuiet = 10
	trimIdle  = 10 * time.Second
)

// touch counts a read or write of Badger, starts Badger's compactors if
// they were stopped for idleness, and wakes the trim loop if it sleeps:
// reads map table pages. Cost: two atomic adds and two loads; a compactor
// start (two goroutines) after a quiet spell.
func (s *Store) touch() {
	s.idle.Use()
	s.used.Add(1)
	if s.asleep.Load() && s.asleep.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// trim hands Badger's mapped table pages back to the kernel when the
// file-backed RSS is above mapped, except while partitions restore: their
// writes create tables that compactions read back at once, which evicted
// pages would slow down.
func (s *Store) trim(dir string, mapped int64) {
	if s.budget.inUse() {
		return
	}
	if n, ok := rssFileBytes(); ok && n > mapped && trimTables(dir) > 0 {
		s.trimmed.Add(1)
	}
}

func partitionPrefix(kind byte, partition int32) []byte {
	b := make([]byte, 5, 5+64)
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:], uint32(partition))
	return b
}

func stateKey(partition int32, key string) []byte {
	return append(partitionPrefix(kindState, partition), key...)
}

// appendStateKey appends stateKey(partition, key) to b.
func appendStateKey(b []byte, partition int32, key string) []byte {
	b = append(b, kindState)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	return append(b, key...)
}

func checkpointKey(partition int32) []byte { return partitionPrefix(kindCheckpoint, partition) }

// markerKey is the key whose tombstones Loader commits (bump): the state
// key of the empty idempotency key, never set (Apply and Loader refuse an
// empty key), inside the partition's key range so that the tables Badger
// builds from a bulk load span that partition alone.
func markerKey(partition int32) []byte { return partitionPrefix(kindState, partition) }

// badgerExpiry is Badger's expiry (unix seconds) for t, rounded up so a
// state never disappears before its ExpiresAt; 0 means no expiry.
func badgerExpiry(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return uint64(max(s, 1))
}

// Get returns the value of key in partition. A missing, deleted or expired
// key gives ok == false. The caller must not modify value. Cost: a map
// lookup when Apply wrote the key recently (the cache of recent states);
// otherwise one Badger read (memtables, then the levels, skipped by bloom
// filters) and one copy of the value.
func (s *Store) Get(partition int32, key string) (value []byte, ok bool, err error) {
	var buf [64]byte // the cache's lookup key, on the stack for most keys
	if value, ok, known := s.recent.get(appendStateKey(buf[:0], partition, key), time.Now()); known {
		return value, ok, nil
	}
	k := stateKey(partition, key)
	s.touch()
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		value, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: get %q in partition %d: %w", key, partition, err)
	}
	return value, true, nil
}

// Scan calls fn for every live state key of partition that starts with
// prefix (the idempotency key without the partition), in key order, with
// its value, until fn returns an error, which Scan returns. key and value
// are valid only during the call. It reads what Apply committed, from one
// Badger snapshot, and never the cache of recent states. Cost: one seek,
// then one step per matching key (keys outside prefix are not read);
// values below Badger's value threshold (every state record) are read from
// the LSM tree with the key, no extra read.
func (s *Store) Scan(partition int32, prefix string, fn func(key string, value []byte) error) error {
	p := stateKey(partition, prefix)
	s.touch()
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()[len(p)-len(prefix):]
			if len(k) == 0 {
				continue // the partition's marker key (markerKey)
			}
			if err := item.Value(func(v []byte) error { return fn(string(k), v) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: scan %q in partition %d: %w", prefix, partition, err)
	}
	return nil
}

// Apply writes changes and checkpoints (partition -> next changelog offset
// to read) in one Badger transaction, and the changes to the cache of recent
// states once it committed (it keeps the Value slices: do not modify them
// afterwards), so the checkpoints never get ahead of
// the state. When Badger says the transaction is too big (more than 15% of
// a memtable: about 8000 changes of 300 bytes), Apply commits it in
// chunks, the checkpoints last: a crash in between leaves the old
// checkpoints, and restore re-applies the changes, which is idempotent.
//
// A change whose ExpiresAt has passed (by the wall clock) is written as a
// delete, as is a nil Value. Cost: per change one Badger read (to keep the
// Keys count) and one write; one commit per chunk (no fsync: the changelog
// is the durable copy).
func (s *Store) Apply(changes []Change, checkpoints map[int32]int64) error {
	if len(changes) == 0 && len(checkpoints) == 0 {
		return nil
	}
	now := time.Now()
	s.touch()
	ap := applier{s: s, txn: s.db.NewTransaction(true)}
	defer func() { ap.txn.Discard() }()
	for i := range changes {
		c := &changes[i]
		if c.Key == "" {
			return fmt.Errorf("state: apply: change %d in partition %d has an empty key", i, c.Partition)
		}
		k := stateKey(c.Partition, c.Key)
		d, err := s.keys.effect(ap.txn, c.Partition, k)
		if err != nil {
			return fmt.Errorf("state: apply: read %q: %w", c.Key, err)
		}
		var e *badger.Entry
		u := recentUpdate{key: string(k)}
		if c.Value != nil && (c.ExpiresAt.IsZero() || c.ExpiresAt.After(now)) {
			e = badger.NewEntry(k, c.Value)
			e.ExpiresAt = badgerExpiry(c.ExpiresAt)
			d.newExpiry, d.set = e.ExpiresAt, true
			u.value, u.expiry = c.Value, e.ExpiresAt
		} else if !d.had {
			ap.updates = append(ap.updates, u) // known to be absent
			continue                           // nothing to delete: spare the write
		}
		if err := ap.write(k, e); err != nil {
			return fmt.Errorf("state: apply %q in partition %d: %w", c.Key, c.Partition, err)
		}
		ap.deltas = append(ap.deltas, d)
		ap.updates = append(ap.updates, u)
	}
	var v [8]byte
	for p, next := range checkpoints {
		binary.BigEndian.PutUint64(v[:], uint64(next))
		if err := ap.write(checkpointKey(p), badger.NewEntry(checkpointKey(p), append([]byte(nil), v[:]...))); err != nil {
			return fmt.Errorf("state: apply checkpoint of partition %d: %w", p, err)
		}
	}
	return ap.commit()
}

// applier holds the open transaction of Apply and the Keys deltas of its
// current chunk, counted once the chunk commits.
type applier struct {
	s       *Store
	txn     *badger.Txn
	deltas  []keyDelta
	updates []recentUpdate
}

// write sets e (or deletes k when e is nil), committing the current chunk
// and retrying in a new transaction when Badger says it is too big.
func (a *applier) write(k []byte, e *badger.Entry) error {
	do := func() error {
		if e == nil {
			return a.txn.Delete(k)
		}
		return a.txn.SetEntry(e)
	}
	err := do()
	if !errors.Is(err, badger.ErrTxnTooBig) {
		return err
	}
	if err := a.commit(); err != nil {
		return err
	}
	a.txn = a.s.db.NewTransaction(true)
	return do()
}

func (a *applier) commit() error {
	if err := a.txn.Commit(); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	a.s.keys.apply(a.deltas)
	a.s.recent.put(a.updates)
	a.deltas, a.updates = a.deltas[:0], a.updates[:0]
	return nil
}

// Checkpoint returns the next changelog offset to read for partition, as
// last written by Apply; ok is false when there is none. A stored value of
// the wrong size gives an error wrapping ErrCorrupt.
func (s *Store) Checkpoint(partition int32) (next int64, ok bool, err error) {
	s.touch()
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(checkpointKey(partition))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: checkpoint of partition %d has %d bytes, want 8", ErrCorrupt, partition, len(v))
			}
			next = int64(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("state: checkpoint of partition %d: %w", partition, err)
	}
	return next, true, nil
}

// WipePartition deletes every key of partition and its checkpoint. When the
// partition holds nothing it is one prefix seek; otherwise it is Badger's
// DropPrefix, which blocks all writes while it flushes the memtables and
// rewrites the tables holding the prefix (tens of milliseconds to seconds):
// meant for the rare rebuild, not the hot path.
func (s *Store) WipePartition(partition int32) error {
	prefixes := [][]byte{partitionPrefix(kindState, partition), checkpointKey(partition)}
	empty := true
	s.touch()
	err := s.db.View(func(txn *badger.Txn) error {
		for _, p := range prefixes {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
			it.Rewind()
			if it.Valid() {
				empty = false
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: wipe partition %d: %w", partition, err)
	}
	if !empty {
		// DropPrefix stops and restarts the compactors itself: not while
		// idle has them stopped.
		if err := s.idle.Hold(func() error { return s.db.DropPrefix(prefixes...) }); err != nil {
			return fmt.Errorf("state: wipe partition %d: %w", partition, err)
		}
	}
	s.keys.wipe(partition)
	s.recent.forget(partitionPrefix(kindState, partition))
	return nil
}

// Keys returns the number of live state keys, for a metric. It is a counter
// kept by Apply (each change reads the key's previous version inside its
// transaction) and seeded by a scan at Open; keys leave it when they expire,
// counted in 10-minute buckets, so it can lag an expiry by up to 10 minutes.
// Cost: a mutex and a walk over the due buckets.
func (s *Store) Keys() int64 { return s.keys.total(time.Now()) }

// WaitKeys waits until Keys is exact again: a bulk load whose key tracking
// ran out of the restore budget (Loader) has its partition's keys counted
// by a scan in the background after it, during which Keys leaves the
// partition out. Close waits for these scans too.
func (s *Store) WaitKeys() { s.keys.recounts.Wait() }

// Close stops the GC goroutine, saves the key counts (so the next Open
// need not count) and closes Badger (flushing the memtable). Further calls
// return the first result.
func (s *Store) Close() error {
	s.closed.Do(func() {
		close(s.stop)
		<-s.done
		s.idle.Close()
		var errs []error
		if err := s.keys.saveCounts(s.db); err != nil {
			errs = append(errs, fmt.Errorf("state: save key counts: %w", err))
		}
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("state: close badger: %w", err))
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}
