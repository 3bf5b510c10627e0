package state

import (
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
// Two generations bound its memory: new entries go to cur; when cur holds
// half the limit it becomes old and a new cur starts; a hit in old moves to
// cur. Each entry is charged its key, its value and entryOverhead.
type recent struct {
	mu       sync.Mutex
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
	return &recent{cur: map[string]recentEntry{}, old: map[string]recentEntry{}, limit: limit}
}

// get returns the cached value of Badger key k: known reports a cache hit,
// ok that the key holds a value not expired at now (Badger's rule: expired
// when its expiry second has come).
func (c *recent) get(k []byte, now time.Time) (value []byte, ok, known bool) {
	if c.limit <= 0 {
		return nil, false, false
	}
	c.mu.Lock()
	e, hit := c.cur[string(k)]
	if !hit {
		if e, hit = c.old[string(k)]; hit {
			delete(c.old, string(k))
			c.putLocked(string(k), e)
		}
	}
	c.mu.Unlock()
	if !hit {
		return nil, false, false
	}
	if e.value == nil || e.expiry != 0 && e.expiry <= uint64(now.Unix()) {
		return nil, false, true
	}
	return e.value, true, true
}

// put records the committed value of k (nil: deleted).
func (c *recent) put(updates []recentUpdate) {
	if c.limit <= 0 || len(updates) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range updates {
		delete(c.old, u.key)
		c.putLocked(u.key, u.recentEntry)
	}
}

type recentUpdate struct {
	key string
	recentEntry
}

func (c *recent) putLocked(k string, e recentEntry) {
	if old, ok := c.cur[k]; ok {
		c.curBytes -= int64(len(k) + len(old.value) + entryOverhead)
	}
	c.cur[k] = e
	c.curBytes += int64(len(k) + len(e.value) + entryOverhead)
	if c.curBytes >= c.limit/2 {
		c.old, c.cur, c.curBytes = c.cur, map[string]recentEntry{}, 0
	}
}

// forget drops every entry whose Badger key starts with prefix.
func (c *recent) forget(prefix []byte) {
	p := string(prefix)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.cur {
		if strings.HasPrefix(k, p) {
			delete(c.cur, k)
			c.curBytes -= int64(len(k) + len(e.value) + entryOverhead)
		}
	}
	for k := range c.old {
		if strings.HasPrefix(k, p) {
			delete(c.old, k)
		}
	}
}
