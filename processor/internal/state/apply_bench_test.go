package state

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkApply measures Apply of fresh keys in batches of 5000 (what
// restore does into an empty store), ~220-byte values, on disk. It compares
// against nothing: read it as the store's ceiling for restore (changes/s).
//
//	go test -run '^$' -bench BenchmarkApply -benchtime 400000x ./processor/internal/state/
func BenchmarkApply(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir()})
	value := make([]byte, 220)
	exp := time.Now().Add(7 * 24 * time.Hour)
	batch := make([]Change, 0, 5000)
	b.ResetTimer()
	for i := range b.N {
		batch = append(batch, Change{Partition: 3, Key: fmt.Sprintf("%08x-4b1d-4c2a-9e7f-%012x", i, i*7919), Value: value, ExpiresAt: exp})
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := s.Apply(batch, map[int32]int64{3: int64(i + 1)}); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}
