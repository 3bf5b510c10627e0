package trace

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// BenchmarkTraceLookup times Index.Trace (one key's whole path, as GET
// /events/{key} and dlq trace read it) in an index of
// HOOKLINE_TRACE_BENCH_KEYS keys (default 100,000), each with the two
// entries of a delivery done at once (accepted on raw, done on outcomes),
// against the same lookup in an index of 1,000 keys built the same way in
// the same run (the baseline). The big index is built through Apply, as the
// feeder writes it, in HOOKLINE_TRACE_BENCH_DIR when set (and kept there,
// so a second run reuses it), else in a temporary directory.
//
//	HOOKLINE_TRACE_BENCH_KEYS=10000000 HOOKLINE_TRACE_BENCH_DIR=/tmp/trace10m \
//	  go test -run '^$' -bench BenchmarkTraceLookup -benchtime 20000x -timeout 2h ./dlq/internal/trace/
func BenchmarkTraceLookup(b *testing.B) {
	n := 100_000
	if v := os.Getenv("HOOKLINE_TRACE_BENCH_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("HOOKLINE_TRACE_BENCH_KEYS=%q: want a positive number", v)
		}
	}
	names := topics.NewNames("bench.", []string{"1m"})
	small := benchIndex(b, names, b.TempDir(), 1000)
	defer small.Close()
	dir := os.Getenv("HOOKLINE_TRACE_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	big := benchIndex(b, names, dir, n)
	defer big.Close()
	for _, c := range []struct {
		name string
		ix   *Index
		keys int
	}{{"keys=1000", small, 1000}, {fmt.Sprintf("keys=%d", n), big, n}} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var worst time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				t, err := c.ix.Trace(benchKey(rng.IntN(c.keys)))
				if err != nil || len(t.Steps) != 2 || t.Now.State != StateDone {
					b.Fatalf("trace: %v %+v", err, t)
				}
				worst = max(worst, time.Since(start))
			}
			b.ReportMetric(float64(worst.Microseconds()), "max-µs")
		})
	}
}

func benchKey(i int) string { return fmt.Sprintf("stripe:evt_%09d", i) }

// benchIndex opens the index in dir and, unless it already holds n keys
// (a marker file says so), writes n keys through Apply.
func benchIndex(b *testing.B, names topics.Names, dir string, n int) *Index {
	b.Helper()
	ix, err := Open(Options{Dir: dir, Names: names})
	if err != nil {
		b.Fatal(err)
	}
	marker := fmt.Sprintf("%s/bench-keys-%d", dir, n)
	if _, err := os.Stat(marker); err == nil {
		return ix
	}
	start := time.Now()
	base := time.Now().Add(-6 * 24 * time.Hour)
	const batch = 10_000
	recs := make([]*kgo.Record, 0, 2*batch)
	for i := 0; i < n; i += batch {
		recs = recs[:0]
		for j := i; j < min(n, i+batch); j++ {
			key := benchKey(j)
			at := base.Add(time.Duration(j) * (5 * 24 * time.Hour / time.Duration(n)))
			raw := headers.IngestRecord(names.Raw, key, "invoice.paid", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: at, RequestID: fmt.Sprintf("%032x", j), ContentType: "application/json"})
			raw.Partition, raw.Offset, raw.Timestamp = int32(j%12), int64(j/12), at
			out := &kgo.Record{Topic: names.Outcomes, Key: []byte(key), Partition: int32(j % 12), Offset: int64(j / 12), Timestamp: at.Add(3 * time.Millisecond),
				Value: fmt.Appendf(nil, `{"key":%q,"provider":"stripe","event_type":"invoice.paid","status":"done","attempt":1,"origin":"ingest","duration_ms":3,"time":%q,"partition":%d,"offset":%d}`,
					key, headers.FormatTime(at.Add(3*time.Millisecond)), j%12, j/12)}
			recs = append(recs, raw, out)
		}
		if err := ix.Apply(recs, []Position{{Topic: names.Raw, Partition: 0, Next: int64(i + batch)}}); err != nil {
			b.Fatal(err)
		}
	}
	if n >= 100_000 {
		b.Logf("built an index of %d keys (%d entries) in %s", n, 2*n, time.Since(start).Round(time.Second))
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	return ix
}
