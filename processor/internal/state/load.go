package state

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Loader writes the changes of one partition that is being rebuilt from
// scratch (no checkpoint: a new owner, a wiped or corrupt store): Badger's
// bulk write path instead of Apply's transactions.
//
// Apply reads every key before writing it, to keep the Keys count; that read
// was most of a restore's cost. A Loader knows the partition starts empty,
// so it reads nothing: it tracks the keys it has set in memory (a hash and
// an expiry bucket, about 40 bytes a key, taken from the restore memory
// budget) and writes through a badger.WriteBatch, which commits in the
// background while the caller decodes the next changes, without conflict
// tracking and without waiting for each commit. A delete of a key it never
// set is not written at all. When the budget has no room left for the
// tracking, the Loader writes every delete and recounts the partition's keys
// (a key-only scan) when it ends instead.
//
// Consistency is Apply's: Checkpoint waits until every change added so far
// is committed and only then writes the checkpoint, in a transaction after
// them, so a checkpoint never claims a change that is not stored (Badger
// replays its write-ahead log in order after a crash). Changes added after
// the last checkpoint may or may not be in Badger after a crash; restore
// re-reads them from that checkpoint (or from the log start when there is
// none), which is idempotent.
//
// A Loader is used by one goroutine; nothing else may write its partition
// meanwhile (the partition is paused while it restores). Close it.
type Loader struct {
	s    *Store
	p    int32
	wb   *badger.WriteBatch
	seed maphash.Seed
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

// NewLoader starts a bulk load of partition. The partition should hold
// nothing (restore wipes it first): keys already there are not counted in
// Keys until the partition is recounted.
func (s *Store) NewLoader(partition int32) *Loader {
	s.recent.forget(partitionPrefix(kindState, partition))
	return &Loader{
		s: s, p: partition, wb: s.newWriteBatch(), seed: maphash.MakeSeed(),
		live: map[uint64]uint32{}, delta: map[uint64]int64{},
	}
}

// maxPendingTxns bounds the WriteBatch transactions committing at once
// (Badger's default is 16); each holds up to 15% of a memtable (2.4 MiB).
const maxPendingTxns = 4

func (s *Store) newWriteBatch() *badger.WriteBatch {
	wb := s.db.NewWriteBatch()
	wb.SetMaxPendingTxns(maxPendingTxns)
	return wb
}

// Add writes changes, all of the Loader's partition (a change of another
// partition is an error). As with Apply, an expired change or a nil Value
// deletes the key. Cost per change: a hash and a map update, one entry
// added to the batch; no read. The writes are committed in the background;
// errors come back from a later Add or from Checkpoint.
func (l *Loader) Add(changes []Change) error {
	if l.err != nil {
		return l.err
	}
	now := time.Now()
	for i := range changes {
		c := &changes[i]
		switch {
		case c.Key == "":
			return fmt.Errorf("state: load: change %d in partition %d has an empty key", i, c.Partition)
		case c.Partition != l.p:
			return fmt.Errorf("state: load of partition %d: change %d is of partition %d", l.p, i, c.Partition)
		}
		k := stateKey(l.p, c.Key)
		set := c.Value != nil && (c.ExpiresAt.IsZero() || c.ExpiresAt.After(now))
		var err error
		if set {
			e := badger.NewEntry(k, c.Value)
			e.ExpiresAt = badgerExpiry(c.ExpiresAt)
			l.track(k, e.ExpiresAt, true)
			err = l.wb.SetEntry(e)
		} else if l.track(k, 0, false) {
			err = l.wb.Delete(k)
		}
		if err != nil {
			l.err = fmt.Errorf("state: load %q in partition %d: %w", c.Key, l.p, err)
			return l.err
		}
		l.dirty = true
	}
	return nil
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

// Checkpoint waits until every change added so far is committed, then
// writes next as the partition's checkpoint (the next changelog offset to
// read) and counts the changes in Keys. Cost: the wait for Badger's write
// pipeline to drain, so call it rarely (restore does every few tens of MiB
// and at the end).
func (l *Loader) Checkpoint(next int64) error {
	if l.err != nil {
		return l.err
	}
	if err := l.wb.Flush(); err != nil {
		l.err = fmt.Errorf("state: load partition %d: %w", l.p, err)
		return l.err
	}
	l.wb = l.s.newWriteBatch()
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(next))
	if err := l.s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(checkpointKey(l.p), v[:])
	}); err != nil {
		l.err = fmt.Errorf("state: load partition %d: checkpoint: %w", l.p, err)
		return l.err
	}
	l.dirty = false
	if l.delta != nil {
		l.s.keys.addBuckets(l.p, l.delta)
		clear(l.delta)
	}
	return nil
}

// Close ends the load: changes added after the last checkpoint are
// committed or dropped (either is consistent: the checkpoint does not cover
// them), the tracking memory goes back to the budget, and the partition's
// Keys count is rebuilt by a scan if it cannot be trusted (tracking ran out
// of budget, or uncounted changes may be stored).
func (l *Loader) Close() error {
	l.wb.Cancel()
	l.s.budget.release(l.reserved)
	l.reserved, l.live = 0, nil
	if !l.recount && !l.dirty {
		return nil
	}
	l.recount, l.dirty = false, false
	if err := l.s.keys.recount(l.s.db, l.p); err != nil {
		return fmt.Errorf("state: load partition %d: count keys: %w", l.p, err)
	}
	return nil
}
