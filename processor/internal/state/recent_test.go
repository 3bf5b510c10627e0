package state

import (
	"fmt"
	"testing"
	"time"
)

// TestRecentCache: Get answers from the cache of recent states what Apply
// wrote (values, deletes, expiries), agrees with Badger once entries are
// evicted, and forgets a partition that is wiped or bulk-loaded.
func TestRecentCache(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	s.recent = newRecent(256 << 10) // small: evictions happen below
	soon := time.Now().Add(1500 * time.Millisecond)
	mustApply(t, s, []Change{
		{Partition: 0, Key: "a", Value: []byte("a1")},
		{Partition: 0, Key: "gone", Value: []byte("g1")},
		{Partition: 0, Key: "brief", Value: []byte("b1"), ExpiresAt: soon},
		{Partition: 1, Key: "p1", Value: []byte("v")},
	}, nil)
	mustApply(t, s, []Change{{Partition: 0, Key: "gone"}, {Partition: 0, Key: "never"}}, nil)
	for k, want := range map[string]string{"a": "a1", "gone": "", "brief": "b1", "never": ""} {
		if _, _, known := s.recent.get(stateKey(0, k), time.Now()); !known {
			t.Errorf("%s not in the cache after Apply", k)
		}
		wantValue(t, s, 0, k, want)
	}
	// Badger's expiry rule holds in the cache: gone once its second came.
	due := time.Unix(int64(badgerExpiry(soon)), 0)
	if _, ok, known := s.recent.get(stateKey(0, "brief"), due.Add(-time.Millisecond)); !ok || !known {
		t.Errorf("brief before its expiry second: ok=%t known=%t, want a cached value", ok, known)
	}
	if v, ok, known := s.recent.get(stateKey(0, "brief"), due); ok || !known {
		t.Errorf("brief at its expiry second: %q ok=%t known=%t, want known to be gone", v, ok, known)
	}

	if err := s.WipePartition(0); err != nil {
		t.Fatal(err)
	}
	if _, _, known := s.recent.get(stateKey(0, "a"), time.Now()); known {
		t.Error("a wiped partition's key is still cached")
	}
	wantValue(t, s, 0, "a", "")
	wantValue(t, s, 1, "p1", "v")
	mustApply(t, s, []Change{{Partition: 1, Key: "p1", Value: []byte("v2")}}, nil)
	l := s.NewLoader(1)
	if _, _, known := s.recent.get(stateKey(1, "p1"), time.Now()); known {
		t.Error("a partition being loaded is still cached")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, 1, "p1", "v2")

	// Far more than the cache holds: the oldest are evicted and read from
	// Badger, the cache stays within its limit.
	var changes []Change
	for i := range 3000 {
		changes = append(changes, Change{Partition: 2, Key: fmt.Sprintf("k%04d", i), Value: fmt.Appendf(nil, "v%d-%0100d", i, 0)})
	}
	mustApply(t, s, changes, nil)
	if _, _, known := s.recent.get(stateKey(2, "k0000"), time.Now()); known {
		t.Error("k0000 still cached after 3000 newer writes to a 256 KiB cache")
	}
	for _, i := range []int{0, 1500, 2999} {
		wantValue(t, s, 2, fmt.Sprintf("k%04d", i), fmt.Sprintf("v%d-%0100d", i, 0))
	}
	var held int64
	for i := range s.recent.shards {
		for _, m := range []map[string]recentEntry{s.recent.shards[i].cur, s.recent.shards[i].old} {
			for k, e := range m {
				held += int64(len(k) + len(e.value) + entryOverhead)
			}
		}
	}
	if held > s.recent.limit {
		t.Errorf("cache holds %d bytes, limit %d", held, s.recent.limit)
	}
}
