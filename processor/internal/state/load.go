package state

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
)

// Loader writes the changes of one partition that is being rebuilt from
// scratch (no checkpoint: a new owner, a wiped or corrupt store): Badger's
// bulk write path instead of Apply's transactions.
//
// Apply reads every key before writing it, to keep the Keys count, and
// commits transactions: Badger keeps each transaction's writes in a map,
// gives it a commit timestamp and waits for it. A Loader knows the
// partition starts empty and nobody else writes it, so it reads nothing and
// opens no transaction per write: it hands entries to a badger.KVLoader
// (the path of Badger's backup restore: entries go to the write-ahead log
// and memtable in the order given, asynchronously, at most maxPendingWrites
// requests at a time) with a version (Badger's timestamp) it chooses:
//
//   - Every change of one Add has the same version; Add keeps only the last
//     change of each key, so no key has two entries of one version.
//   - Each Add's version is above the previous one: Add takes it as the read
//     timestamp of a transaction that it commits right away (a tombstone of
//     the partition's marker key, markerKey, inside the partition's key
//     range: a key outside it made every table Badger built from the load
//     overlap the other partitions' tables, and their compactions left the
//     10M-key store of make bench-state in 1.3 to 1.8 times as many
//     tables, 235-480 MB of peak RSS when reopened), asynchronously; the next
//     Add's read timestamp is at least that commit's, so above. The first
//     is above every version the store held when the Loader started.
//   - Every version is a read timestamp Badger has issued, so every later
//     transaction (Apply once the partition is restored, the checkpoint)
//     commits above it and wins over it.
//
// A delete is written as Badger's backup format writes one (pb.KV.Meta with
// Badger's delete bit), in the same sequence.
//
// The Loader tracks the keys it has set in memory (a hash and an expiry
// bucket, about 40 bytes a key, taken from the restore memory budget) for
// the Keys count; a delete of a key it never set is not written at all.
// When the budget has no room left for the tracking, the Loader writes every
// delete and has the partition's keys recounted (a key-only scan, in the
// background: Store.WaitKeys) when it ends instead.
//
// Consistency is Apply's: Checkpoint waits until every change added so far
// is in Badger's write-ahead log and memtable and only then writes the
// checkpoint, in a transaction after them, so a checkpoint never claims a
// change that is not stored (Badger replays its write-ahead log in order
// after a crash). Changes added after the last checkpoint may or may not be
// in Badger after a crash; restore re-reads them from that checkpoint (or
// from the log start when there is none, wiping the partition first).
//
// A Loader is used by one goroutine; nothing else may write its partition
// meanwhile (the partition is paused while it restores). Close it.
type Loader struct {
	s    *Store
	p    int32
	kv   *badger.KVLoader
	seed maphash.Seed
	// version is the Badger version of the last Add's entries.
	version uint64
	// l0 is Badger's compaction trigger: tables in level 0 (see settle).
	l0 int
	// bumps are the marker commits in flight; bumpErr the first that failed.
	bumps   sync.WaitGroup
	bumpMu  sync.Mutex
	bumpErr error
	// last: key -> index of its last change in the Add being written.
	last map[string]int32
	// key and entry are Add's scratch: KVLoader.Set copies them.
	key     []byte
	entry   pb.KV
	deleted []byte // the meta of a delete: badgerDelete
	// live: hash of each key set and not deleted since the load began ->
	// its expiry bucket (0: never); nil once the budget ran out.
	live     map[uint64]uint32
	reserved int64 // bytes of the budget held for live
	// delta: changes to the Keys count by expiry bucket end (0: never)
	// since the last checkpoint, counted once it is written.
	delta   map[uint64]int64
	dirty   bool // changes added since the last checkpoint
	recount bool // the count must be rebuilt by a scan at Close
	err     error
}

// trackChunk is how many keys of tracking a Loader reserves at a time;
// trackBytes is the memory charged per tracked key (a map slot, its share
// of control bytes and of growth).
const (
	trackChunk = 1 << 16
	trackBytes = 40
)

// maxPendingWrites bounds the KVLoader requests written at once; each
// holds up to 15% of a memtable (2.4 MiB of the default 16).
const maxPendingWrites = 4

// badgerDelete is Badger's delete bit in an entry's meta byte, as its
// backup format (pb.KV.Meta) carries it and KVLoader writes it back
// (TestLoader checks that a delete written so hides the key).
const badgerDelete byte = 1 << 0

// NewLoader starts a bulk load of partition. The partition should hold
// nothing (restore wipes it first): keys already there are not counted in
// Keys until the partition is recounted.
func (s *Store) NewLoader(partition int32) *Loader {
	s.recent.forget(partitionPrefix(kindState, partition))
	s.touch()
	l := &Loader{
		s: s, p: partition, kv: s.db.NewKVLoader(maxPendingWrites), seed: maphash.MakeSeed(),
		last: map[string]int32{}, live: map[uint64]uint32{}, delta: map[uint64]int64{},
		deleted: []byte{badgerDelete}, l0: s.db.Opts().NumLevelZeroTables,
	}
	l.version = l.bump() // every version before it is below the first Add's
	return l
}

// bump commits a tombstone of the partition's marker key asynchronously and
// returns the read timestamp of its transaction: a version Badger has
// issued, below the bump's commit.
func (l *Loader) bump() uint64 {
	txn := l.s.db.NewTransaction(true)
	v := txn.ReadTs()
	if err := txn.Delete(markerKey(l.p)); err != nil {
		txn.Discard()
		l.setBumpErr(err)
		return v
	}
	l.bumps.Add(1)
	txn.CommitWith(func(err error) {
		l.setBumpErr(err)
		l.bumps.Done()
	})
	return v
}

func (l *Loader) setBumpErr(err error) {
	if err == nil {
		return
	}
	l.bumpMu.Lock()
	defer l.bumpMu.Unlock()
	if l.bumpErr == nil {
		l.bumpErr = err
	}
}

func (l *Loader) fail(err error) error {
	l.err = fmt.Errorf("state: load partition %d: %w", l.p, err)
	return l.err
}

// Add writes changes, all of the Loader's partition (a change of another
// partition is an error); of several changes of one key, only the last is
// written. As with Apply, an expired change or a nil Value deletes the key.
// The Value slices are written as they are, later: do not modify them.
// Cost per change: a map update or two and a hash, one entry (two small
// allocations) handed to Badger; no read, no transaction. Per call: one
// small transaction, committed in the background. The writes are done in
// the background; errors come back from a later Add or from Checkpoint.
func (l *Loader) Add(changes []Change) error {
	l.s.touch() // its settle waits on Badger's compactors: never stopped
	if l.err != nil {
		return l.err
	}
	for i := range changes {
		switch c := &changes[i]; {
		case c.Key == "":
			return fmt.Errorf("state: load: change %d in partition %d has an empty key", i, c.Partition)
		case c.Partition != l.p:
			return fmt.Errorf("state: load of partition %d: change %d is of partition %d", l.p, i, c.Partition)
		}
	}
	if len(changes) == 0 {
		return nil
	}
	l.bumpMu.Lock()
	err := l.bumpErr
	l.bumpMu.Unlock()
	if err != nil {
		return l.fail(err)
	}
	l.settle()
	// The previous bump was given its commit timestamp before it
	// returned, so this read timestamp is at least that: above l.version.
	v := l.bump()
	if v <= l.version {
		return l.fail(fmt.Errorf("version %d not above the previous %d", v, l.version))
	}
	l.version = v

	clear(l.last)
	for i := range changes {
		l.last[changes[i].Key] = int32(i)
	}
	now := time.Now()
	kv := &l.entry // KVLoader.Set copies all but the value
	for i := range changes {
		c := &changes[i]
		if l.last[c.Key] != int32(i) {
			// A later change of the key follows: only the last one is
			// written, and counted (with what the store held before this
			// Add: earlier changes of this Add are not stored).
			continue
		}
		l.key = appendStateKey(l.key[:0], l.p, c.Key)
		kv.Key, kv.Value, kv.ExpiresAt, kv.Meta, kv.Version = l.key, nil, 0, nil, v
		if c.Value != nil && (c.ExpiresAt.IsZero() || c.ExpiresAt.After(now)) {
			kv.Value, kv.ExpiresAt = c.Value, badgerExpiry(c.ExpiresAt)
			l.track(l.key, kv.ExpiresAt, true)
		} else if !l.track(l.key, 0, false) {
			continue // not stored: nothing to delete
		} else {
			kv.Meta = l.deleted
		}
		if err := l.kv.Set(kv); err != nil {
			return l.fail(fmt.Errorf("write %q: %w", c.Key, err))
		}
		l.dirty = true
	}
	return nil
}

// settleWait bounds how long one Add waits for Badger's compactions.
const settleWait = time.Second

// settle waits, settleWait at most, while Badger's level 0 holds as many
// tables as its compaction trigger (NumLevelZeroTables), so the load goes
// at the pace of the compactions that merge what it wrote. Unchecked, a
// bulk load outruns them: a load of 10 million keys (make bench-state) left
// level 0 full (10 tables, where Badger stalls every write) for whoever
// writes or reopens the store next to pay for; with the wait it ends with
// 3. Cost: a look at Badger's levels (a few microseconds) per Add, and the
// wait.
func (l *Loader) settle() {
	deadline := time.Now().Add(settleWait)
	for l.s.db.Levels()[0].NumTables >= l.l0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// track records a set (with its Badger expiry) or a delete of k in the
// Keys deltas and reports whether the store may hold k (a delete must then
// be written).
func (l *Loader) track(k []byte, expiry uint64, set bool) bool {
	if l.live == nil {
		return true
	}
	h := maphash.Bytes(l.seed, k)
	old, had := l.live[h]
	if had {
		l.delta[uint64(old)*bucketSeconds]--
	}
	if !set {
		delete(l.live, h)
		return had
	}
	b := uint32(bucketOf(expiry) / bucketSeconds)
	if !had && int64(len(l.live)) >= l.reserved/trackBytes {
		if !l.s.budget.tryAcquire(trackChunk * trackBytes) {
			// No room to track more keys: count by a scan at the end.
			l.live, l.delta, l.recount = nil, nil, true
			l.s.budget.release(l.reserved)
			l.reserved = 0
			return true
		}
		l.reserved += trackChunk * trackBytes
	}
	l.live[h] = b
	l.delta[uint64(b)*bucketSeconds]++
	return had
}

// Checkpoint waits until every change added so far is in Badger's
// write-ahead log and memtable, then writes next as the partition's
// checkpoint (the next changelog offset to read) and counts the changes in
// Keys. Cost: the wait for the writes in flight (up to maxPendingWrites
// requests), so call it rarely (restore does every few tens of MiB and at
// the end).
func (l *Loader) Checkpoint(next int64) error {
	l.s.touch()
	if l.err != nil {
		return l.err
	}
	if err := l.kv.Finish(); err != nil {
		return l.fail(err)
	}
	l.kv = l.s.db.NewKVLoader(maxPendingWrites)
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(next))
	if err := l.s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(checkpointKey(l.p), v[:])
	}); err != nil {
		return l.fail(fmt.Errorf("checkpoint: %w", err))
	}
	l.dirty = false
	if l.delta != nil {
		l.s.keys.addBuckets(l.p, l.delta)
		clear(l.delta)
	}
	return nil
}

// Close ends the load: it waits for the writes in flight (changes added
// after the last checkpoint are stored, or lost if writing failed: either
// is consistent, the checkpoint does not cover them), gives the tracking
// memory back to the budget, and, if the partition's Keys count cannot be
// trusted (tracking ran out of budget, or uncounted changes may be
// stored), starts rebuilding it by a scan in the background (see
// Store.WaitKeys).
func (l *Loader) Close() error {
	ferr := l.kv.Finish()
	l.bumps.Wait()
	l.s.budget.release(l.reserved)
	l.reserved, l.live, l.last = 0, nil, nil
	if !l.recount && !l.dirty && ferr == nil {
		return nil
	}
	l.recount, l.dirty = false, false
	l.s.keys.recountLater(l.s.db, l.p)
	if ferr != nil {
		return fmt.Errorf("state: load partition %d: %w", l.p, ferr)
	}
	return nil
}
