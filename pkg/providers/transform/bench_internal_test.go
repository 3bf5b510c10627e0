package transform

import (
	"runtime"
	"testing"
)

// BenchmarkNewEngine is what making one engine costs (a runtime, the
// prelude, the frozen intrinsics, the script's program loaded): a script
// makes one per CPU (Kept), at its first calls and after a failed call.
// heap-bytes/engine is the live heap one engine holds, measured over 32
// engines kept alive.
func BenchmarkNewEngine(b *testing.B) {
	s := mustCompile(b, `function transform(r) { return {body: {text: r.body.ref}} }`, Limits{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.newEngine(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	keep := make([]*engine, 32)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i], _ = s.newEngine()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(keep)), "heap-bytes/engine")
	runtime.KeepAlive(keep)
}
