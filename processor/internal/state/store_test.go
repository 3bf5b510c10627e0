package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func mustOpen(tb testing.TB, o Options) *Store {
	tb.Helper()
	s, err := Open(o)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func mustApply(tb testing.TB, s *Store, changes []Change, cps map[int32]int64) {
	tb.Helper()
	if err := s.Apply(changes, cps); err != nil {
		tb.Fatalf("apply: %v", err)
	}
}

func wantValue(tb testing.TB, s *Store, p int32, key, want string) {
	tb.Helper()
	v, ok, err := s.Get(p, key)
	if err != nil {
		tb.Fatalf("get %d/%s: %v", p, key, err)
	}
	switch {
	case want == "" && ok:
		tb.Errorf("get %d/%s = %q, want absent", p, key, v)
	case want != "" && (!ok || string(v) != want):
		tb.Errorf("get %d/%s = %q (ok=%t), want %q", p, key, v, ok, want)
	}
}

func wantCheckpoint(tb testing.TB, s *Store, p int32, want int64, wantOK bool) {
	tb.Helper()
	got, ok, err := s.Checkpoint(p)
	if err != nil {
		tb.Fatalf("checkpoint %d: %v", p, err)
	}
	if ok != wantOK || got != want {
		tb.Errorf("checkpoint %d = %d (ok=%t), want %d (ok=%t)", p, got, ok, want, wantOK)
	}
}

func wantKeys(tb testing.TB, s *Store, want int64) {
	tb.Helper()
	if got := s.Keys(); got != want {
		tb.Errorf("Keys() = %d, want %d", got, want)
	}
}

func TestApplyGetCheckpoint(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	wantCheckpoint(t, s, 0, 0, false)
	wantValue(t, s, 0, "a", "")

	later := time.Now().Add(time.Hour)
	mustApply(t, s, []Change{
		{Partition: 0, Key: "a", Value: []byte("a1"), ExpiresAt: later},
		{Partition: 1, Key: "a", Value: []byte("a-p1")}, // same key, other partition: another entry
		{Partition: 0, Key: "b", Value: []byte("b1"), ExpiresAt: later},
		{Partition: 0, Key: "b", Value: []byte("b2"), ExpiresAt: later}, // later change of one batch wins
	}, map[int32]int64{0: 4, 1: 1})
	wantValue(t, s, 0, "a", "a1")
	wantValue(t, s, 1, "a", "a-p1")
	wantValue(t, s, 0, "b", "b2")
	wantCheckpoint(t, s, 0, 4, true)
	wantCheckpoint(t, s, 1, 1, true)
	wantCheckpoint(t, s, 2, 0, false)
	wantKeys(t, s, 3)

	// A tombstone deletes; a checkpoint moves without changes.
	mustApply(t, s, []Change{{Partition: 0, Key: "a"}}, map[int32]int64{0: 5})
	wantValue(t, s, 0, "a", "")
	wantCheckpoint(t, s, 0, 5, true)
	mustApply(t, s, nil, map[int32]int64{0: 9})
	wantCheckpoint(t, s, 0, 9, true)
	wantKeys(t, s, 2)

	// Changes without a checkpoint leave it alone.
	mustApply(t, s, []Change{{Partition: 0, Key: "c", Value: []byte("c1")}}, nil)
	wantValue(t, s, 0, "c", "c1")
	wantCheckpoint(t, s, 0, 9, true)
}

// TestApplyAtomic: a failing Apply writes nothing, neither its changes nor
// its checkpoint; an Apply too big for one Badger transaction lands whole,
// and if it fails part-way, the checkpoint (written last) is still the old one.
func TestApplyAtomic(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	mustApply(t, s, []Change{{Partition: 0, Key: "old", Value: []byte("v")}}, map[int32]int64{0: 1})

	err := s.Apply([]Change{
		{Partition: 0, Key: "x", Value: []byte("x")},
		{Partition: 0, Key: "", Value: []byte("no key")},
	}, map[int32]int64{0: 3})
	if err == nil {
		t.Fatal("apply with an empty key: no error")
	}
	wantValue(t, s, 0, "x", "")
	wantCheckpoint(t, s, 0, 1, true)
	wantKeys(t, s, 1)

	value := bytes.Repeat([]byte("v"), 200)
	big := func(n int, prefix string) []Change {
		cs := make([]Change, n)
		for i := range cs {
			cs[i] = Change{Partition: 0, Key: fmt.Sprintf("%s-%06d", prefix, i), Value: value}
		}
		return cs
	}
	// 30000 changes of ~220 bytes: several Badger transactions.
	mustApply(t, s, big(30000, "big"), map[int32]int64{0: 30001})
	wantCheckpoint(t, s, 0, 30001, true)
	wantValue(t, s, 0, "big-000000", string(value))
	wantValue(t, s, 0, "big-029999", string(value))
	wantKeys(t, s, 30001)

	// Fails in its last chunk: earlier chunks committed, checkpoint unchanged.
	cs := append(big(30000, "half"), Change{Partition: 0, Key: ""})
	if err := s.Apply(cs, map[int32]int64{0: 60002}); err == nil {
		t.Fatal("apply with an empty key: no error")
	}
	wantCheckpoint(t, s, 0, 30001, true)
	wantValue(t, s, 0, "half-000000", string(value)) // a committed chunk: restore re-applies it idempotently
	if n := s.Keys(); n <= 30001 || n > 60001 {
		t.Errorf("Keys() = %d, want the committed chunks counted (30001 < n <= 60001)", n)
	}
}

// TestExpiry: a change already expired is not stored and deletes the older
// value of its key; a change expiring soon disappears by Badger's TTL.
func TestExpiry(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	now := time.Now()
	mustApply(t, s, []Change{
		{Partition: 0, Key: "k", Value: []byte("v1"), ExpiresAt: now.Add(time.Hour)},
		{Partition: 0, Key: "other", Value: []byte("o"), ExpiresAt: now.Add(time.Hour)},
	}, nil)
	mustApply(t, s, []Change{
		{Partition: 0, Key: "k", Value: []byte("v2"), ExpiresAt: now.Add(-time.Second)},
		{Partition: 0, Key: "never", Value: []byte("n"), ExpiresAt: now.Add(-time.Minute)},
	}, map[int32]int64{0: 4})
	wantValue(t, s, 0, "k", "")
	wantValue(t, s, 0, "never", "")
	wantValue(t, s, 0, "other", "o")
	wantCheckpoint(t, s, 0, 4, true)
	wantKeys(t, s, 1)

	// Badger's TTL: expiry is rounded up to the second, so the value lives
	// at least until ExpiresAt and is gone at most a second after it.
	exp := time.Now().Add(1200 * time.Millisecond)
	mustApply(t, s, []Change{{Partition: 0, Key: "soon", Value: []byte("s"), ExpiresAt: exp}}, nil)
	wantValue(t, s, 0, "soon", "s")
	deadline := exp.Add(3 * time.Second)
	for {
		_, ok, err := s.Get(0, "soon")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if time.Now().Before(exp) {
				t.Fatalf("gone before its ExpiresAt")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still there 3s after its ExpiresAt")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWipePartition(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir()})
	var cs []Change
	for p := int32(0); p < 3; p++ {
		for i := range 100 {
			cs = append(cs, Change{Partition: p, Key: fmt.Sprintf("k%d", i), Value: []byte(fmt.Sprint(p))})
		}
	}
	mustApply(t, s, cs, map[int32]int64{0: 10, 1: 11, 2: 12})
	// Partition 256 shares no prefix byte pattern with 1 beyond the kind.
	mustApply(t, s, []Change{{Partition: 256, Key: "k0", Value: []byte("256")}}, map[int32]int64{256: 1})
	wantKeys(t, s, 301)

	if err := s.WipePartition(1); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		p     int32
		key   string
		value string // "": absent
	}{{1, "k0", ""}, {1, "k99", ""}, {0, "k0", "0"}, {2, "k99", "2"}, {256, "k0", "256"}} {
		wantValue(t, s, w.p, w.key, w.value)
	}
	for p, cp := range map[int32]int64{0: 10, 2: 12, 256: 1} {
		wantCheckpoint(t, s, p, cp, true)
	}
	wantCheckpoint(t, s, 1, 0, false)
	wantKeys(t, s, 201)

	// Wiping an empty partition is a no-op; the partition is usable after.
	if err := s.WipePartition(7); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, []Change{{Partition: 1, Key: "k0", Value: []byte("again")}}, map[int32]int64{1: 1})
	wantValue(t, s, 1, "k0", "again")
	wantKeys(t, s, 202)
}

// TestReopen: state, checkpoints and the Keys count survive Close and Open.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, []Change{
		{Partition: 0, Key: "a", Value: []byte("1"), ExpiresAt: time.Now().Add(time.Hour)},
		{Partition: 3, Key: "b", Value: []byte("2")},
	}, map[int32]int64{0: 7, 3: 8})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	s = mustOpen(t, Options{Dir: dir})
	wantValue(t, s, 0, "a", "1")
	wantValue(t, s, 3, "b", "2")
	wantCheckpoint(t, s, 0, 7, true)
	wantCheckpoint(t, s, 3, 8, true)
	wantKeys(t, s, 2)
}

func TestCheckpointCorrupt(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(checkpointKey(2), []byte("bad"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Checkpoint(2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("checkpoint of a 3-byte value: err = %v, want ErrCorrupt", err)
	}
}

// TestKeysCounter follows the count through overwrites, deletes, expiries
// (folded by bucket) and a wipe.
func TestKeysCounter(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	now := time.Now()
	set := func(p int32, key string, ttl time.Duration) Change {
		c := Change{Partition: p, Key: key, Value: []byte(key)}
		if ttl != 0 {
			c.ExpiresAt = now.Add(ttl)
		}
		return c
	}
	mustApply(t, s, []Change{
		set(0, "a", time.Hour),
		set(0, "a", 2*time.Hour), // overwrite in one batch
		set(0, "b", 0),
		set(1, "c", 3*time.Hour),
		set(1, "gone", -time.Hour),
		{Partition: 1, Key: "never-there"}, // delete of a missing key
	}, nil)
	wantKeys(t, s, 3)
	mustApply(t, s, []Change{{Partition: 0, Key: "b"}, {Partition: 0, Key: "b"}}, nil)
	wantKeys(t, s, 2)

	// "a" now expires in 2h, "c" in 3h: the fold at +2h10m drops "a" only.
	later := now.Add(2*time.Hour + 10*time.Minute)
	for _, step := range []struct {
		what string
		do   func() error
		want int64
	}{
		{"a expired", func() error { return nil }, 1},
		{"a folded and written again", func() error { return s.Apply([]Change{set(0, "a", 0)}, nil) }, 2},
		{"partition 1 wiped", func() error { return s.WipePartition(1) }, 1},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if n := s.keys.total(later); n != step.want {
			t.Errorf("%s: count = %d, want %d", step.what, n, step.want)
		}
	}
}

// TestOpenMinMemory: the smallest Memory opens an on-disk store (Badger
// checks its value threshold against the memtable size).
func TestOpenMinMemory(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), Memory: MinMemory})
	mustApply(t, s, []Change{{Partition: 0, Key: "a", Value: []byte("v")}}, nil)
	wantValue(t, s, 0, "a", "v")
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Error("open without a directory: no error")
	}
}

// TestLoader: a bulk load gives the store and the Keys count that Apply
// gives for the same changes (overwrites, deletes, expired changes, a
// delete of a key never set), with the tracking in budget and without it
// (a budget too small: the count comes from a scan at Close).
func TestLoader(t *testing.T) {
	now := time.Now()
	const p = 3
	var changes []Change
	for i := range 300 {
		k := fmt.Sprintf("k%03d", i%120) // keys written up to 3 times
		switch {
		case i%7 == 0:
			changes = append(changes, Change{Partition: p, Key: k}) // tombstone
		case i%11 == 0:
			changes = append(changes, Change{Partition: p, Key: k, Value: []byte("old"), ExpiresAt: now.Add(-time.Minute)})
		case i%5 == 0:
			changes = append(changes, Change{Partition: p, Key: k, Value: fmt.Appendf(nil, "v%d", i), ExpiresAt: now.Add(time.Duration(i) * time.Hour)})
		default:
			changes = append(changes, Change{Partition: p, Key: k, Value: fmt.Appendf(nil, "v%d", i)})
		}
	}
	// Keys the first half set, deleted twice in the second: the last
	// change alone is written, and it must be.
	changes = append(changes,
		Change{Partition: p, Key: "k001", Value: []byte("old"), ExpiresAt: now.Add(-time.Minute)}, Change{Partition: p, Key: "k001"},
		Change{Partition: p, Key: "k002"}, Change{Partition: p, Key: "k002"},
		Change{Partition: p, Key: "k003", Value: []byte("old"), ExpiresAt: now.Add(-time.Minute)},
		Change{Partition: p, Key: "k003", Value: []byte("old"), ExpiresAt: now.Add(-time.Minute)},
		Change{Partition: p, Key: "never-set"})

	want := mustOpen(t, Options{InMemory: true})
	mustApply(t, want, changes, map[int32]int64{p: 301})
	for _, k := range []string{"k001", "k002", "k003"} {
		if _, ok, _ := want.Get(p, k); ok {
			t.Fatalf("%s is live after Apply: the test's changes do not delete it", k)
		}
	}

	for _, tc := range []struct {
		name   string
		memory int64
	}{{"tracked", 0}, {"untracked", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, Options{InMemory: true, RestoreMemory: tc.memory})
			l := s.NewLoader(p)
			if err := l.Add(changes[:150]); err != nil {
				t.Fatal(err)
			}
			if err := l.Checkpoint(150); err != nil {
				t.Fatal(err)
			}
			wantCheckpoint(t, s, p, 150, true)
			if err := l.Add(changes[150:]); err != nil {
				t.Fatal(err)
			}
			if err := l.Checkpoint(301); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			s.WaitKeys()
			wantCheckpoint(t, s, p, 301, true)
			for i := range 120 {
				k := fmt.Sprintf("k%03d", i)
				w, wok, _ := want.Get(p, k)
				got, ok, err := s.Get(p, k)
				if err != nil || ok != wok || string(got) != string(w) {
					t.Errorf("%s = %q (ok=%t, err=%v), want %q (ok=%t)", k, got, ok, err, w, wok)
				}
			}
			wantKeys(t, s, want.Keys())
			if err := l.Add([]Change{{Partition: p + 1, Key: "x", Value: []byte("v")}}); err == nil {
				t.Error("a change of another partition was accepted")
			}
		})
	}
}

// TestLoaderVersions: the Loader writes with versions of its own (one per
// Add); on disk, with another partition committing transactions in
// between, the last change of each key wins, across Adds and within one,
// after a reopen and after Badger compacted everything into one level; a
// delete of a key set by an earlier Add hides it; a tombstone the partition
// held before (WipePartition leaves it: nothing live to drop) does not hide
// a loaded key; and a transaction after the load (Apply, once the partition
// is restored) wins over the loaded value.
func TestLoaderVersions(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	const p = 2
	mustApply(t, s, []Change{{Partition: p, Key: "k0", Value: []byte("stale")}}, nil)
	mustApply(t, s, []Change{{Partition: p, Key: "k0"}}, nil)
	if err := s.WipePartition(p); err != nil { // what restore does first
		t.Fatal(err)
	}
	want := map[string]string{}
	l := s.NewLoader(p)
	for round := range 20 {
		var batch []Change
		for i := range 50 {
			k := fmt.Sprintf("k%d", (round*7+i)%40)
			c := Change{Partition: p, Key: k, Value: fmt.Appendf(nil, "r%d-i%d", round, i)}
			if (round+i)%9 == 0 {
				c.Value = nil
			}
			batch = append(batch, c)
			want[k] = string(c.Value)
		}
		if err := l.Add(batch); err != nil {
			t.Fatal(err)
		}
		// Another partition commits between the Adds.
		mustApply(t, s, []Change{{Partition: p + 1, Key: fmt.Sprintf("o%d", round), Value: []byte("other")}}, nil)
	}
	if err := l.Checkpoint(1000); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		live := int64(0)
		for k, w := range want {
			if w != "" {
				live++
			}
			v, ok, err := s.Get(p, k)
			if err != nil || ok != (w != "") || string(v) != w {
				t.Errorf("%s: %s = %q (ok=%t, err=%v), want %q", when, k, v, ok, err, w)
			}
		}
		wantKeys(t, s, live+20) // and partition p+1's 20 keys
	}
	check("loaded")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	check("reopened")
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	check("compacted")
	mustApply(t, s, []Change{{Partition: p, Key: "k1", Value: []byte("applied")}, {Partition: p, Key: "k2"}}, map[int32]int64{p: 1001})
	want["k1"], want["k2"] = "applied", ""
	check("applied after the load")
	wantCheckpoint(t, s, p, 1001, true)
}

// TestLoaderCloseWithoutCheckpoint: changes added after the last checkpoint
// may be stored, uncovered by it; Close then recounts Keys from the store,
// in the background: writes right after Close count on top of the scan,
// and a wipe during the scan drops it.
func TestLoaderCloseWithoutCheckpoint(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir()})
	l := s.NewLoader(0)
	if err := l.Add([]Change{{Partition: 0, Key: "a", Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Checkpoint(1); err != nil {
		t.Fatal(err)
	}
	var more []Change
	for i := range 20_000 {
		more = append(more, Change{Partition: 0, Key: fmt.Sprintf("b%05d", i), Value: []byte("2")})
	}
	if err := l.Add(more); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The partition resumes at once: its writes count on top of the scan.
	mustApply(t, s, []Change{{Partition: 0, Key: "a"}, {Partition: 0, Key: "c", Value: []byte("3")}}, map[int32]int64{0: 2})
	s.WaitKeys()
	wantCheckpoint(t, s, 0, 2, true)
	n := int64(1) // c
	for _, c := range more {
		if _, ok, _ := s.Get(0, c.Key); ok {
			n++
		}
	}
	wantKeys(t, s, n)

	// A wipe while the scan runs: the scan's count is dropped.
	l = s.NewLoader(1)
	other := make([]Change, 5000)
	for i := range other {
		other[i] = Change{Partition: 1, Key: more[i].Key, Value: []byte("4")}
	}
	if err := l.Add(other); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.WipePartition(1); err != nil {
		t.Fatal(err)
	}
	s.WaitKeys()
	wantKeys(t, s, n)
}

// TestReserve: reservations past the budget wait until memory is released
// or their context ends; one larger than the budget takes all of it.
func TestReserve(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true, RestoreMemory: 100})
	ctx := context.Background()
	r1, err := s.Reserve(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.Reserve(short, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reserve past the budget: err = %v, want a wait cut by the deadline", err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := s.Reserve(ctx, 1000) // more than the budget: all of it
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("reserved while 60 of 100 were held")
	default:
	}
	r1()
	r1() // a second release gives nothing back
	r2 := <-got
	if s.budget.tryAcquire(1) {
		t.Fatal("room left while the whole budget is reserved")
	}
	r2()
	if !s.budget.tryAcquire(100) {
		t.Fatal("budget not whole after the releases")
	}
}

// TestScan: Scan gives the live keys of one partition that start with the
// prefix, in key order, with their values: not another partition's, not a
// deleted or expired key, not a key outside the prefix; fn's error stops
// it.
func TestScan(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	mustApply(t, s, []Change{
		{Partition: 1, Key: "\x00e\x00p\x00a", Value: []byte("A")},
		{Partition: 1, Key: "\x00e\x00p\x00b", Value: []byte("B")},
		{Partition: 1, Key: "\x00e\x00p\x00c", Value: []byte("C")},
		{Partition: 1, Key: "\x00e\x00p\x00x", Value: []byte("X"), ExpiresAt: time.Now().Add(-time.Second)},
		{Partition: 1, Key: "stripe:evt_1", Value: []byte("S")},
		{Partition: 2, Key: "\x00e\x00p\x00z", Value: []byte("Z")},
	}, nil)
	mustApply(t, s, []Change{{Partition: 1, Key: "\x00e\x00p\x00c"}}, nil) // deleted
	scan := func(p int32, prefix string) []string {
		var got []string
		if err := s.Scan(p, prefix, func(k string, v []byte) error {
			got = append(got, fmt.Sprintf("%q=%s", k, v))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := fmt.Sprint(scan(1, "\x00e\x00")), fmt.Sprint([]string{`"\x00e\x00p\x00a"=A`, `"\x00e\x00p\x00b"=B`}); got != want {
		t.Errorf("scan of partition 1: %s, want %s", got, want)
	}
	if got := scan(3, "\x00e\x00"); len(got) != 0 {
		t.Errorf("scan of an empty partition: %v", got)
	}
	if got := len(scan(1, "")); got != 3 {
		t.Errorf("scan of partition 1 without a prefix: %d keys, want 3", got)
	}
	stop := errors.New("stop")
	n := 0
	err := s.Scan(1, "\x00e\x00", func(string, []byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("scan stopped by fn: %v after %d keys, want stop after 1", err, n)
	}
}

// TestIdleCompactors: a store nobody uses has Badger's compactors stopped;
// writers and readers of several partitions at once after each quiet spell
// (the first use starting them again, the others racing it) read back what
// they wrote, and the key count and checkpoints stay exact.
func TestIdleCompactors(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), compactCheck: 5 * time.Millisecond})
	const parts, perRound = 4, 50
	for round := range 3 {
		for deadline := time.Now().Add(10 * time.Second); !s.idle.Stopped(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: compactors not stopped within 10 s of the last use", round)
			}
		}
		errs := make(chan error, parts)
		for p := range int32(parts) {
			go func() {
				var cs []Change
				for i := range perRound {
					cs = append(cs, Change{Partition: p, Key: fmt.Sprintf("r%d-k%d", round, i), Value: fmt.Appendf(nil, "v%d-%d", round, i)})
				}
				if err := s.Apply(cs, map[int32]int64{p: int64((round + 1) * perRound)}); err != nil {
					errs <- err
					return
				}
				n := 0
				err := s.Scan(p, fmt.Sprintf("r%d-", round), func(key string, value []byte) error {
					if want := "v" + strings.Replace(key[1:], "-k", "-", 1); string(value) != want { // r0-k7 -> v0-7
						return fmt.Errorf("partition %d: %s = %q, want %q", p, key, value, want)
					}
					n++
					return nil
				})
				if err == nil && n != perRound {
					err = fmt.Errorf("partition %d round %d: scanned %d keys, want %d", p, round, n, perRound)
				}
				errs <- err
			}()
		}
		for range parts {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		wantKeys(t, s, int64(parts*perRound*(round+1)))
		for p := range int32(parts) {
			wantCheckpoint(t, s, p, int64((round+1)*perRound), true)
		}
	}
}
