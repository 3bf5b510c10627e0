package state

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// bucketSeconds is the width of the expiry buckets of keyCounter: a key
// leaves the count at most this long after it expired. 10 minutes keeps a
// 7-day TTL to about 1000 buckets per partition.
const bucketSeconds = 600

// keyCounter counts live state keys per partition. Badger expires keys
// silently, so the counter also keeps, per partition, how many keys expire
// in each bucket, and drops a bucket's keys from the count once it is due
// (fold). A key whose bucket was folded is no longer counted, whatever
// Badger still shows.
type keyCounter struct {
	mu     sync.Mutex
	parts  map[int32]*partKeys
	folded uint64 // buckets <= folded have been dropped from the counts
	// gen is bumped when a partition is wiped or recounted: a recount
	// begun before it is dropped.
	gen map[int32]uint64
	// recounts are the background recounts running (recountLater).
	recounts sync.WaitGroup
}

type partKeys struct {
	n        int64
	expiring map[uint64]int64 // bucket end (unix seconds) -> keys
}

// keyDelta is what one applied change does to the count: the key's version
// before it (had, oldExpiry) and after it (set, newExpiry).
type keyDelta struct {
	partition int32
	had       bool
	oldExpiry uint64
	set       bool
	newExpiry uint64
}

func newKeyCounter() *keyCounter {
	return &keyCounter{parts: map[int32]*partKeys{}, gen: map[int32]uint64{}}
}

func bucketOf(expiry uint64) uint64 {
	return (expiry + bucketSeconds - 1) / bucketSeconds * bucketSeconds
}

func (c *keyCounter) part(p int32) *partKeys {
	pk := c.parts[p]
	if pk == nil {
		pk = &partKeys{expiring: map[uint64]int64{}}
		c.parts[p] = pk
	}
	return pk
}

// seed counts the live state keys of db with a key-only scan.
func (c *keyCounter) seed(db *badger.DB) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.folded = uint64(time.Now().Unix())
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindState}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if len(k) < 5 {
				continue
			}
			c.add(c.part(int32(binary.BigEndian.Uint32(k[1:5]))), item.ExpiresAt(), 1)
		}
		return nil
	})
}

// add counts n keys expiring at expiry (0: never) in pk, unless their
// bucket is already folded (they have expired).
func (c *keyCounter) add(pk *partKeys, expiry uint64, n int64) {
	if expiry == 0 {
		pk.n += n
		return
	}
	b := bucketOf(expiry)
	if b <= c.folded {
		return
	}
	pk.n += n
	if pk.expiring[b] += n; pk.expiring[b] == 0 {
		delete(pk.expiring, b)
	}
}

// effect reads the current version of key k within txn (which sees the
// transaction's own pending writes) for the delta of a change to it.
func (c *keyCounter) effect(txn *badger.Txn, p int32, k []byte) (keyDelta, error) {
	d := keyDelta{partition: p}
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.had, d.oldExpiry = true, item.ExpiresAt()
	return d, nil
}

// apply counts the deltas of a committed chunk.
func (c *keyCounter) apply(ds []keyDelta) {
	if len(ds) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range ds {
		pk := c.part(d.partition)
		if d.had {
			c.add(pk, d.oldExpiry, -1)
		}
		if d.set {
			c.add(pk, d.newExpiry, 1)
		}
	}
}

// wipe forgets partition p (and any recount of it in progress).
func (c *keyCounter) wipe(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parts, p)
	c.gen[p]++
}

// total folds the buckets due at now and returns the sum of the counts.
func (c *keyCounter) total(now time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := uint64(max(now.Unix(), 0))
	if t > c.folded {
		for _, pk := range c.parts {
			for b, n := range pk.expiring {
				if b <= t {
					pk.n -= n
					delete(pk.expiring, b)
				}
			}
		}
		c.folded = t
	}
	var sum int64
	for _, pk := range c.parts {
		sum += pk.n
	}
	return sum
}

// addBuckets adds counts by expiry bucket end (0: never) to partition p.
func (c *keyCounter) addBuckets(p int32, delta map[uint64]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pk := c.part(p)
	for b, n := range delta {
		if n != 0 {
			c.add(pk, b, n)
		}
	}
}

// recountLater replaces partition p's count with a key-only scan of its
// keys, in the background: the scan reads a snapshot taken now, before any
// later write of p, and the count starts again from zero, so the deltas of
// the writes after now (Apply, once the partition is restored) add up with
// the scan's result. Keys leaves p out until the scan ends (about 1 s per
// million keys on 2 cores); Close and WaitKeys wait for it. Call it while
// nothing else writes p.
func (c *keyCounter) recountLater(db *badger.DB, p int32) {
	txn := db.NewTransaction(false)
	c.mu.Lock()
	delete(c.parts, p)
	c.gen[p]++
	gen := c.gen[p]
	c.mu.Unlock()
	c.recounts.Add(1)
	go func() {
		defer c.recounts.Done()
		defer txn.Discard()
		byBucket := map[uint64]int64{}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: partitionPrefix(kindState, p)})
		for it.Rewind(); it.Valid(); it.Next() {
			e := it.Item().ExpiresAt()
			if e != 0 {
				e = bucketOf(e)
			}
			byBucket[e]++
		}
		it.Close()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen[p] != gen {
			return // wiped or recounted again meanwhile
		}
		pk := c.part(p)
		for b, n := range byBucket {
			c.add(pk, b, n)
		}
	}()
}
