package state

import (
	"fmt"
	"testing"
	"time"
)

// The store's ceilings for a restore into an empty store, on disk, with no
// Kafka and no decoding: read them beside BenchmarkRestore's figures (a
// restore also fetches and decodes every record).
//
//	go test -run '^$' -bench . -benchtime 200000x ./processor/internal/state/

// BenchmarkApply measures Apply of fresh keys in batches of 5000 (the
// incremental path: a read and a transaction per batch), ~220-byte values.
func BenchmarkApply(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	changes := freshChanges(b.N, 220)
	b.ResetTimer()
	for i := 0; i < b.N; i += 5000 {
		end := min(i+5000, b.N)
		if err := s.Apply(changes[i:end], map[int32]int64{3: int64(end)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkLoad measures the bulk path (Loader.Add in batches of 5000, a
// checkpoint at the end) with ~60-byte values, the stored form of a state:
// what a restore from scratch can reach at best.
func BenchmarkLoad(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	changes := freshChanges(b.N, 60)
	b.ResetTimer()
	l := s.NewLoader(3)
	for i := 0; i < b.N; i += 5000 {
		if err := l.Add(changes[i:min(i+5000, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Checkpoint(int64(b.N)); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}

// freshChanges are n changes of distinct keys of partition 3 with values of
// size bytes, expiring in a week.
func freshChanges(n, size int) []Change {
	value := make([]byte, size)
	exp := time.Now().Add(7 * 24 * time.Hour)
	changes := make([]Change, n)
	for i := range changes {
		changes[i] = Change{Partition: 3, Key: fmt.Sprintf("evt_%08x-4b1d-4c2a-9e7f-%012x", i, i*7919), Value: value, ExpiresAt: exp}
	}
	return changes
}

// BenchmarkGetMissing measures Get of a key the store does not have (an
// ordered record's entity with no holds: the read heldKeys spares), among
// 300,000 keys of the same partition.
func BenchmarkGetMissing(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	changes := freshChanges(300000, 60)
	for i := 0; i < len(changes); i += 5000 {
		if err := s.Apply(changes[i:i+5000], map[int32]int64{3: int64(i + 5000)}); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([]string, 100000)
	for i := range keys {
		keys[i] = fmt.Sprintf("\x00e\x00ord\x00ent-%d", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := s.Get(3, keys[i%len(keys)]); ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
