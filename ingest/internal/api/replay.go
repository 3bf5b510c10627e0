package api

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultReplayCacheEntries is how many accepted signatures ingest
// remembers when HOOKLINE_REPLAY_CACHE_ENTRIES is unset: about 190 bytes
// each with a GitHub key (the key accepted is kept, to answer what a
// replay repeated), so 18 MiB or so (TestReplayCacheMemory measures it).
const DefaultReplayCacheEntries = 100_000

// digest is a delivery's providers.SignedDigest.
type digest = [sha256.Size]byte

// maxTracedReplays bounds the suppressed outcomes ingest writes for the
// replays of one accepted delivery: each costs a record on
// webhooks.outcomes, and a captured delivery replayed under new keys must
// not turn into a flood of them. Past it, a replay is still answered and
// counted, not traced.
const maxTracedReplays = 16

// replayCache remembers the digests of accepted deliveries, with the key
// each was accepted under, each until its provider's replay window ran
// out, at most max of them: past that the oldest
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
	// key is the (first) idempotency key the delivery was accepted under;
	// traced counts the suppressed outcomes written for its replays.
	key    string
	traced uint8
}

// prior is what a duplicate claim learns of the delivery accepted first:
// its key, and whether this replay may be traced (at most
// maxTracedReplays per accepted delivery, and only under another key).
type prior struct {
	key   string
	trace bool
}

func newReplayCache(max int) *replayCache {
	return &replayCache{max: max, seen: map[digest]seenEntry{}, inflight: map[digest]chan struct{}{}}
}

// claim reports whether d was accepted and has not expired at now: a
// duplicate, with what is known of the first (a request under key, the
// first key of the delivery, other than the first's may be traced).
// Otherwise the caller holds d and must call settle(d, ...) once its
// produce ended, whatever the outcome; a claim of the same d meanwhile
// waits for that (or until ctx ends: ctx's error).
func (c *replayCache) claim(ctx context.Context, d digest, now time.Time, key string) (first prior, dup bool, err error) {
	for {
		c.mu.Lock()
		if done, busy := c.inflight[d]; busy {
			c.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return prior{}, false, ctx.Err()
			}
		}
		if e, ok := c.seen[d]; ok {
			if now.UnixNano() < e.expires {
				first = prior{key: e.key}
				if e.key != key && e.traced < maxTracedReplays {
					e.traced++
					c.seen[d] = e
					first.trace = true
				}
				c.mu.Unlock()
				return first, true, nil
			}
			delete(c.seen, d) // its slot in ring is reused in turn
		}
		c.inflight[d] = make(chan struct{})
		c.mu.Unlock()
		return prior{}, false, nil
	}
}

// settle ends a claim: when produced, d is remembered with key for ttl
// from now (forgetting the oldest entry if the cache is full); either way
// the claims waiting for d go on.
func (c *replayCache) settle(d digest, produced bool, now time.Time, ttl time.Duration, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if produced {
		c.insert(d, now.UnixNano(), now.Add(ttl).UnixNano(), key)
	}
	close(c.inflight[d])
	delete(c.inflight, d)
}

func (c *replayCache) insert(d digest, now, expires int64, key string) {
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
	c.seen[d] = seenEntry{expires: expires, slot: slot, key: key}
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
