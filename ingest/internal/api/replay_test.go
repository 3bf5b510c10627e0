package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

func dig(i int) digest { return sha256.Sum256([]byte(strconv.Itoa(i))) }

// accept claims d at now and settles it as produced, remembered for ttl.
func accept(tb testing.TB, c *replayCache, d digest, now time.Time, ttl time.Duration) {
	tb.Helper()
	_, dup, err := c.claim(context.Background(), d, now, "k")
	if err != nil || dup {
		tb.Fatalf("claim of a new digest: dup %t, err %v", dup, err)
	}
	c.settle(d, true, now, ttl, "k")
}

func isDup(tb testing.TB, c *replayCache, d digest, now time.Time) bool {
	tb.Helper()
	_, dup, err := c.claim(context.Background(), d, now, "k")
	if err != nil {
		tb.Fatal(err)
	}
	if !dup {
		c.settle(d, false, now, 0, "k") // give the claim back unchanged
	}
	return dup
}

func TestReplayCacheExpiry(t *testing.T) {
	c := newReplayCache(10)
	t0 := time.Unix(1_700_000_000, 0)
	accept(t, c, dig(1), t0, time.Hour)
	accept(t, c, dig(2), t0, 2*time.Hour)
	for _, tc := range []struct {
		d    digest
		at   time.Duration
		want bool
	}{
		{dig(1), 0, true},
		{dig(1), time.Hour - time.Nanosecond, true},
		{dig(1), time.Hour, false}, // its TTL ran out: a new delivery
		{dig(2), time.Hour, true},  // each entry keeps its own TTL
		{dig(2), 2 * time.Hour, false},
		{dig(3), 0, false},
	} {
		if got := isDup(t, c, tc.d, t0.Add(tc.at)); got != tc.want {
			t.Errorf("digest %x at +%s: duplicate %t, want %t", tc.d[:4], tc.at, got, tc.want)
		}
	}
	if n := c.len(); n != 0 {
		t.Errorf("%d entries after both expired and were looked up, want 0", n)
	}
	// Accepted again after expiry, it is remembered again, from then.
	accept(t, c, dig(1), t0.Add(3*time.Hour), time.Hour)
	if !isDup(t, c, dig(1), t0.Add(3*time.Hour+time.Minute)) {
		t.Error("a digest accepted again after its expiry is not remembered")
	}
}

// TestReplayCacheCap: the cache never holds more than its cap, and a full
// cache forgets the entry accepted first; only unexpired entries forgotten
// count as evictions.
func TestReplayCacheCap(t *testing.T) {
	c := newReplayCache(3)
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		accept(t, c, dig(i), t0.Add(time.Duration(i)*time.Second), time.Hour)
	}
	accept(t, c, dig(3), t0.Add(3*time.Second), time.Hour) // forgets 0
	accept(t, c, dig(4), t0.Add(4*time.Second), time.Hour) // forgets 1
	if n, ev := c.len(), c.evictions(); n != 3 || ev != 2 {
		t.Fatalf("%d entries, %d evictions; want 3 and 2", n, ev)
	}
	now := t0.Add(5 * time.Second)
	for i, want := range []bool{false, false, true, true, true} {
		if got := isDup(t, c, dig(i), now); got != want {
			t.Errorf("digest %d: duplicate %t, want %t (oldest forgotten first)", i, got, want)
		}
	}

	// An entry that expired is dropped, not evicted, when its slot is
	// reused; and a digest accepted again after expiry keeps its new slot
	// when its old one is reused.
	c = newReplayCache(2)
	accept(t, c, dig(0), t0, time.Minute)
	accept(t, c, dig(1), t0, time.Hour)
	later := t0.Add(2 * time.Minute)
	accept(t, c, dig(2), later, time.Hour) // slot of 0, expired: no eviction
	if ev := c.evictions(); ev != 0 {
		t.Fatalf("%d evictions for an expired entry, want 0", ev)
	}
	c = newReplayCache(2)
	accept(t, c, dig(0), t0, time.Minute)
	accept(t, c, dig(1), t0, time.Minute)
	accept(t, c, dig(0), later, time.Hour) // expired, accepted again: slot 0 reused for it
	accept(t, c, dig(2), later, time.Hour) // slot 1: drops 1 (expired)
	if !isDup(t, c, dig(0), later) || !isDup(t, c, dig(2), later) || c.len() != 2 || c.evictions() != 0 {
		t.Fatalf("after reuse: 0 dup %t, 2 dup %t, %d entries, %d evictions; want both, 2, 0",
			isDup(t, c, dig(0), later), isDup(t, c, dig(2), later), c.len(), c.evictions())
	}
}

// TestReplayCacheFailedProduce: a digest whose produce failed is not
// remembered, so the provider's retry is accepted.
func TestReplayCacheFailedProduce(t *testing.T) {
	c := newReplayCache(10)
	now := time.Unix(1_700_000_000, 0)
	if _, dup, err := c.claim(context.Background(), dig(1), now, "k"); dup || err != nil {
		t.Fatal(dup, err)
	}
	c.settle(dig(1), false, now, time.Hour, "k")
	if isDup(t, c, dig(1), now) || c.len() != 0 {
		t.Fatal("a delivery that failed to produce is remembered")
	}
}

// TestReplayCacheConcurrentClaim: a claim of a digest being produced waits
// for the outcome: a duplicate when it was produced, its own claim when
// not; a waiter whose context ends gets its error.
func TestReplayCacheConcurrentClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReplayCache(10)
		now := time.Now()
		for _, produced := range []bool{true, false} {
			d := dig(map[bool]int{true: 1, false: 2}[produced])
			if _, dup, err := c.claim(t.Context(), d, now, "k"); dup || err != nil {
				t.Fatal(dup, err)
			}
			type result struct {
				dup bool
				err error
			}
			got := make(chan result, 1)
			go func() {
				_, dup, err := c.claim(t.Context(), d, now, "k")
				got <- result{dup, err}
			}()
			synctest.Wait()
			select {
			case r := <-got:
				t.Fatalf("second claim returned %+v while the first was producing", r)
			default:
			}
			c.settle(d, produced, now, time.Hour, "k")
			r := <-got
			if r.err != nil || r.dup != produced {
				t.Fatalf("first produced=%t: second claim dup %t err %v, want dup %t", produced, r.dup, r.err, produced)
			}
			if !produced {
				c.settle(d, false, now, time.Hour, "k") // the second held it
			}
		}

		d := dig(3)
		if _, dup, err := c.claim(t.Context(), d, now, "k"); dup || err != nil {
			t.Fatal(dup, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, _, err := c.claim(ctx, d, now, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter whose context ended: %v, want its deadline", err)
		}
		c.settle(d, true, now, time.Hour, "k")
	})
}

// TestReplayCacheMemory measures the heap the default cap takes when full,
// for docs/security.md's and DefaultReplayCacheEntries' figure.
func TestReplayCacheMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100,000 entries")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newReplayCache(DefaultReplayCacheEntries)
	now := time.Now()
	for i := range DefaultReplayCacheEntries + 1000 {
		d := dig(i)
		// A GitHub key: the provider's name and a delivery id (a GUID).
		key := fmt.Sprintf("github:%08x-5a3c-11ef-9b0e-2f5c1a9d7e61", i)
		if _, dup, _ := c.claim(context.Background(), d, now, key); !dup {
			c.settle(d, true, now, time.Hour, key)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	per := float64(heap) / DefaultReplayCacheEntries
	t.Logf("%d entries: heap +%.1f MiB, %.0f bytes each; %d evictions", c.len(), float64(heap)/(1<<20), per, c.evictions())
	if c.len() != DefaultReplayCacheEntries || c.evictions() != 1000 {
		t.Errorf("%d entries, %d evictions; want %d and 1000", c.len(), c.evictions(), DefaultReplayCacheEntries)
	}
	if per > 256 {
		t.Errorf("%.0f bytes per entry, over the 256 the documentation allows", per)
	}
	runtime.KeepAlive(c)
}

// TestReplayCacheFirstKey: a duplicate learns the key the digest was
// accepted under; a claim under another key may be traced, at most
// maxTracedReplays times per accepted delivery, and one under the same
// key never is (it is the delivery sent again).
func TestReplayCacheFirstKey(t *testing.T) {
	c := newReplayCache(10)
	now := time.Unix(1_700_000_000, 0)
	if _, dup, err := c.claim(context.Background(), dig(1), now, "github:a"); dup || err != nil {
		t.Fatal(dup, err)
	}
	c.settle(dig(1), true, now, time.Hour, "github:a")
	first, dup, err := c.claim(context.Background(), dig(1), now, "github:a")
	if err != nil || !dup || first != (prior{key: "github:a"}) {
		t.Fatalf("same key again: %+v dup %t err %v; want the first key, not traced", first, dup, err)
	}
	for i := range maxTracedReplays + 2 {
		first, dup, err := c.claim(context.Background(), dig(1), now, fmt.Sprintf("github:r%d", i))
		if want := (prior{key: "github:a", trace: i < maxTracedReplays}); err != nil || !dup || first != want {
			t.Fatalf("replay %d under a new key: %+v dup %t err %v; want %+v", i, first, dup, err, want)
		}
	}
}
