package state

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// recent is a write-through cache of the state values Apply wrote, in front
// of Badger for Get: a duplicate usually arrives soon after the record it
// repeats, and reading its state here skips a Badger transaction, a search
// of the memtables and tables, and the copy.
//
// It is filled only by Apply, after its transaction committed, never by a
// read: a read that raced a write could otherwise put back the older value.
// Apply's writes of one key are ordered (one writer per partition), so the
// cache holds the key's latest value, or remembers that the key is deleted
// (value nil). Loads and wipes drop a partition's entries (forget).
//
// Two generations per shard bound its memory: new entries go to cur; when
// cur holds half the shard's limit it becomes old (the old one dropped) and
// a new cur starts. So the cache keeps the latest writes, whether read or
// not (moving a read entry to cur cost more than it saved), and a read
// takes only a read lock. Each entry is charged its key, its value and
// entryOverhead.
type recent struct {
	seed   maphash.Seed
	shards [recentShards]recentShard
	limit  int64 // of all shards
}

// recentShards splits the cache so that the chains reading states at once
// rarely wait for one another's lock (one lock cost a duplicate a fifth of
// its CPU in the processor's profile).
const recentShards = 32

type recentShard struct {
	mu       sync.RWMutex
	cur, old map[string]recentEntry
	curBytes int64
	limit    int64
}

type recentEntry struct {
	value  []byte // nil: deleted
	expiry uint64 // Badger's expiry, unix seconds; 0: never
}

// entryOverhead is what a map entry costs beside its key and value bytes:
// the string and slice headers, the expiry, the map's slot and control
// bytes.
const entryOverhead = 72

func newRecent(limit int64) *recent {
	c := &recent{seed: maphash.MakeSeed(), limit: limit}
	for i := range c.shards {
		c.shards[i] = recentShard{cur: map[string]recentEntry{}, old: map[string]recentEntry{}, limit: limit / recentShards}
	}
	return c
}

func (c *recent) shard(k string) *recentShard {
	return &c.shards[maphash.String(c.seed, k)%recentShards]
}

// shardOf is shard for a key in bytes (the same hash: maphash's String and
// Bytes agree), without converting it.
func (c *recent) shardOf(k []byte) *recentShard {
	return &c.shards[maphash.Bytes(c.seed, k)%recentShards]
}

// get returns the cached value of Badger key k: known reports a cache hit,
// ok that the key holds a value not expired at now (Badger's rule: expired
// when its expiry second has come).
func (c *recent) get(k []byte, now time.Time) (value []byte, ok, known bool) {
	if c.limit <= 0 {
		return nil, false, false
	}
	sh := c.shardOf(k)
	sh.mu.RLock()
	e, hit := sh.cur[string(k)]
	if !hit {
		e, hit = sh.old[string(k)]
	}
	sh.mu.RUnlock()
	if !hit {
		return nil, false, false
	}
	if e.value == nil || e.expiry != 0 && e.expiry <= uint64(now.Unix()) {
		return nil, false, true
	}
	return e.value, true, true
}

// put records the committed values of keys (nil: deleted).
func (c *recent) put(updates []recentUpdate) {
	if c.limit <= 0 {
		return
	}
	for _, u := range updates {
		sh := c.shard(u.key)
		sh.mu.Lock()
		delete(sh.old, u.key)
		sh.putLocked(u.key, u.recentEntry)
		sh.mu.Unlock()
	}
}

type recentUpdate struct {
	key string
	recentEntry
}

func (sh *recentShard) putLocked(k string, e recentEntry) {
	if old, ok := sh.cur[k]; ok {
		sh.curBytes -= int64(len(k) + len(old.value) + entryOverhead)
	}
	sh.cur[k] = e
	sh.curBytes += int64(len(k) + len(e.value) + entryOverhead)
	if sh.curBytes >= sh.limit/2 {
		sh.old, sh.cur, sh.curBytes = sh.cur, map[string]recentEntry{}, 0
	}
}

// forget drops every entry whose Badger key starts with prefix.
func (c *recent) forget(prefix []byte) {
	p := string(prefix)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, e := range sh.cur {
			if strings.HasPrefix(k, p) {
				delete(sh.cur, k)
				sh.curBytes -= int64(len(k) + len(e.value) + entryOverhead)
			}
		}
		for k := range sh.old {
			if strings.HasPrefix(k, p) {
				delete(sh.old, k)
			}
		}
		sh.mu.Unlock()
	}
}
