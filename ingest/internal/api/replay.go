package api

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultReplayCacheEntries is how many accepted signatures ingest
// remembers when HOOKLINE_REPLAY_CACHE_ENTRIES is unset: about 100 bytes
// each, so 10 MB or so (TestReplayCacheMemory measures it).
const DefaultReplayCacheEntries = 100_000

// digest is a delivery's providers.SignedDigest.
type digest = [sha256.Size]byte

// replayCache remembers the digests of accepted deliveries, each until its
// provider's dedup TTL ran out, at most max of them: past that the oldest
// accepted is forgotten first (an eviction). It is one ingest process's
// memory: another instance, or this one after a restart, knows nothing of
// it.
//
// A digest is remembered only once its delivery was produced. While one
// request with a digest is producing, another with the same digest waits
// for its outcome (claim): a duplicate if it was produced, its own turn to
// produce if not. So concurrent replays cannot all pass before the first
// one is remembered, and a failed produce leaves nothing behind that would
// refuse the provider's retry.
//
// Expired entries are dropped when looked up or when their slot is reused;
// until then they count towards max. Safe for concurrent use.
type replayCache struct {
	max int

	mu   sync.Mutex
	seen map[digest]seenEntry
	// ring holds the digests in the order they were accepted; it grows to
	// max, then next is the oldest, the slot the next insertion reuses.
	ring     []digest
	next     int
	inflight map[digest]chan struct{} // closed when its produce ended
	evicted  uint64
}

type seenEntry struct {
	expires int64 // unix nanoseconds
	slot    int   // its index in ring
}

func newReplayCache(max int) *replayCache {
	return &replayCache{max: max, seen: map[digest]seenEntry{}, inflight: map[digest]chan struct{}{}}
}

// claim reports whether d was accepted and has not expired at now: a
// duplicate. Otherwise the caller holds d and must call settle(d, ...)
// once its produce ended, whatever the outcome; a claim of the same d
// meanwhile waits for that (or until ctx ends: ctx's error).
func (c *replayCache) claim(ctx context.Context, d digest, now time.Time) (dup bool, err error) {
	for {
		c.mu.Lock()
		if done, busy := c.inflight[d]; busy {
			c.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		if e, ok := c.seen[d]; ok {
			if now.UnixNano() < e.expires {
				c.mu.Unlock()
				return true, nil
			}
			delete(c.seen, d) // its slot in ring is reused in turn
		}
		c.inflight[d] = make(chan struct{})
		c.mu.Unlock()
		return false, nil
	}
}

// settle ends a claim: when produced, d is remembered for ttl from now
// (forgetting the oldest entry if the cache is full); either way the
// claims waiting for d go on.
func (c *replayCache) settle(d digest, produced bool, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if produced {
		c.insert(d, now.UnixNano(), now.Add(ttl).UnixNano())
	}
	close(c.inflight[d])
	delete(c.inflight, d)
}

func (c *replayCache) insert(d digest, now, expires int64) {
	slot := len(c.ring)
	if slot < c.max {
		c.ring = append(c.ring, d)
	} else {
		slot = c.next
		c.next = (c.next + 1) % c.max
		old := c.ring[slot]
		// The slot's digest may have expired and been accepted again since,
		// into a newer slot: that entry stays.
		if e, ok := c.seen[old]; ok && e.slot == slot {
			delete(c.seen, old)
			if now < e.expires {
				c.evicted++
			}
		}
		c.ring[slot] = d
	}
	c.seen[d] = seenEntry{expires: expires, slot: slot}
}

// len is how many digests are held (expired ones not yet dropped
// included).
func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// evictions is how many unexpired digests were forgotten to make room.
func (c *replayCache) evictions() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evicted
}
