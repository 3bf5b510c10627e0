package trace

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
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
	n := benchKeys(b)
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

// benchKeys is HOOKLINE_TRACE_BENCH_KEYS, 100,000 when unset.
func benchKeys(b *testing.B) int {
	v := os.Getenv("HOOKLINE_TRACE_BENCH_KEYS")
	if v == "" {
		return 100_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("HOOKLINE_TRACE_BENCH_KEYS=%q: want a positive number", v)
	}
	return n
}

func benchKey(i int) string { return fmt.Sprintf("stripe:evt_%09d", i) }

// openBench opens the index in dir and returns the path of the marker
// file to write once it is filled, "" when that file says it is already.
func openBench(b *testing.B, names topics.Names, dir, name string) (*Index, string) {
	b.Helper()
	ix, err := Open(Options{Dir: dir, Names: names})
	if err != nil {
		b.Fatal(err)
	}
	marker := filepath.Join(dir, name)
	if _, err := os.Stat(marker); err == nil {
		return ix, ""
	}
	return ix, marker
}

// benchIndex opens the index in dir and, unless it already holds n keys
// (a marker file says so), writes n keys through Apply.
func benchIndex(b *testing.B, names topics.Names, dir string, n int) *Index {
	b.Helper()
	ix, marker := openBench(b, names, dir, fmt.Sprintf("bench-keys-%d", n))
	if marker == "" {
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

// BenchmarkEventsList times Index.List (GET /events, dlq events) in
// indexes of the sizes HOOKLINE_TRACE_BENCH_KEYS lists (comma-separated;
// default 100,000), one after the other in the same run, each holding that
// many deliveries: an accepted record on raw and one outcome each, spread
// over five days: four providers (60/25/10/5 %), three routes, 20 event
// types (the last one 1 % of them), statuses done 90 %, retrying 6 %,
// duplicate 3 %, dead 1 %. Each query kind is a sub-benchmark of its size
// reporting p50-µs and p99-µs (one page of 50 per iteration, from a random
// point in time for the deep ones) and seeks (positions read per page,
// mean); each size logs the index's size on disk (Badger LSM and value log)
// and the process's resident memory and Go heap after its queries.
//
// HOOKLINE_TRACE_BENCH_BUILD says how an index is filled: "bulk" (the
// default) writes the entries Apply makes with Badger's StreamWriter
// (bulkLoad: about 5 min of CPU and up to 13 GB of memory for ten million
// deliveries, the tables written once at the bottom level, as a compacted
// index is), "apply" through Apply in batches of 10,000, as the feeder
// writes them (the LSM tree as it grows, compactions on the way: ten
// million did not finish in a session). HOOKLINE_TRACE_BENCH_DIR
// keeps each index (in BUILD-N under it) for the next run, which then only
// reopens it; make bench-events runs it at 1M and 10M:
//
//	HOOKLINE_TRACE_BENCH_KEYS=1000000,10000000 HOOKLINE_TRACE_BENCH_DIR=/tmp/events \
//	  go test -run '^$' -bench BenchmarkEventsList -benchtime 500x -count 3 -timeout 3h ./dlq/internal/trace/
func BenchmarkEventsList(b *testing.B) {
	names := topics.NewNames("bench.", []string{"1m"})
	build := os.Getenv("HOOKLINE_TRACE_BENCH_BUILD")
	switch build {
	case "":
		build = "bulk"
	case "bulk", "apply":
	default:
		b.Fatalf("HOOKLINE_TRACE_BENCH_BUILD=%q: want bulk or apply", build)
	}
	span := 5 * 24 * time.Hour
	for _, n := range benchSizes(b) {
		dir := b.TempDir()
		if d := os.Getenv("HOOKLINE_TRACE_BENCH_DIR"); d != "" {
			dir = filepath.Join(d, fmt.Sprintf("%s-%d", build, n))
		}
		ix, base := listBenchIndex(b, names, dir, build, n, span)
		listBench(b, ix, fmt.Sprintf("keys=%d", n), base, span)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.Logf("index of %d deliveries (%s): %d MiB on disk; after its queries process RSS %d MiB (%d MiB anonymous, %d MiB of mapped files; peak so far %d MiB), Go heap in use %d MiB",
			n, build, dirSize(dir)>>20, procKB("VmRSS")>>10, procKB("RssAnon")>>10, procKB("RssFile")>>10, procKB("VmHWM")>>10, ms.HeapInuse>>20)
		if err := ix.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// listBench runs each query kind of BenchmarkEventsList on ix, as
// sub-benchmarks named name/kind.
func listBench(b *testing.B, ix *Index, name string, base time.Time, span time.Duration) {
	rareType := benchEventType(19)
	kinds := []struct {
		name string
		f    func(rng *rand.Rand) ListFilter
	}{
		{"newest", func(*rand.Rand) ListFilter { return ListFilter{} }},
		{"deep", func(rng *rand.Rand) ListFilter {
			return ListFilter{Until: base.Add(time.Duration(rng.Int64N(int64(span))))}
		}},
		{"provider", func(rng *rand.Rand) ListFilter {
			return ListFilter{Provider: "stripe", Until: base.Add(time.Duration(rng.Int64N(int64(span))))}
		}},
		{"route", func(rng *rand.Rand) ListFilter {
			return ListFilter{Route: "billing", Until: base.Add(time.Duration(rng.Int64N(int64(span))))}
		}},
		{"event-type", func(rng *rand.Rand) ListFilter {
			return ListFilter{EventType: benchEventType(3), Until: base.Add(time.Duration(rng.Int64N(int64(span))))}
		}},
		{"status-dead", func(rng *rand.Rand) ListFilter {
			return ListFilter{Status: "dead", Until: base.Add(time.Duration(rng.Int64N(int64(span))))}
		}},
		{"provider+route+status", func(rng *rand.Rand) ListFilter {
			return ListFilter{Provider: "github", Route: "crm", Status: "retrying", Until: base.Add(time.Duration(rng.Int64N(int64(span))))}
		}},
		{"rare-type+dead", func(*rand.Rand) ListFilter { return ListFilter{EventType: rareType, Status: "dead"} }},
		{"hour-window", func(rng *rand.Rand) ListFilter {
			s := base.Add(time.Duration(rng.Int64N(int64(span - time.Hour))))
			return ListFilter{Since: s, Until: s.Add(time.Hour), Provider: "shopify"}
		}},
	}
	ctx := context.Background()
	for _, k := range kinds {
		b.Run(name+"/"+k.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			var took []time.Duration
			seeks := 0
			for b.Loop() {
				f := k.f(rng)
				start := time.Now()
				p, err := ix.List(ctx, f, "", 50)
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				seeks += p.Seeks
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(seeks)/float64(len(took)), "seeks")
		})
	}
}

// benchSizes is HOOKLINE_TRACE_BENCH_KEYS as a list of sizes, [100,000]
// when unset.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("HOOKLINE_TRACE_BENCH_KEYS")
	if v == "" {
		return []int{100_000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("HOOKLINE_TRACE_BENCH_KEYS=%q: want positive numbers, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}

func benchEventType(i int) string { return fmt.Sprintf("type.%02d", i) }

// prefixSize counts the entries under prefix and their keys' and values'
// bytes.
func prefixSize(b *testing.B, ix *Index, prefix byte) (n, size int64) {
	err := ix.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
			size += int64(len(it.Item().Key())) + it.Item().ValueSize()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n, size
}

// dirSize is the bytes the files in dir take on disk (blocks allocated:
// Badger's value log files are preallocated, sparse).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// procKB reads a VmRSS-like line of /proc/self/status, in KiB (0 where
// there is none).
func procKB(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// listBenchIndex opens the index in dir and, unless a marker says it holds
// n deliveries already, fills it (build: bulk or apply) with the
// deliveries of listDelivery over span from a base time now minus six
// days; the marker keeps that base for the runs that reopen it.
func listBenchIndex(b *testing.B, names topics.Names, dir, build string, n int, span time.Duration) (*Index, time.Time) {
	b.Helper()
	ix, marker := openBench(b, names, dir, fmt.Sprintf("list-bench-%d", n))
	if marker == "" {
		v, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("list-bench-%d", n)))
		base, perr := time.Parse(time.RFC3339, strings.TrimSpace(string(v)))
		if err != nil || perr != nil {
			b.Fatalf("marker of %s: %v %v", dir, err, perr)
		}
		return ix, base
	}
	base := time.Now().Add(-6 * 24 * time.Hour).Truncate(time.Second)
	gen := func(j int) (raw, out *kgo.Record) { return listDelivery(names, j, n, base, span) }
	start := time.Now()
	var err error
	if build == "bulk" {
		err = bulkLoad(ix, n, gen)
	} else {
		err = applyLoad(ix, names, n, gen)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("built an index of %d deliveries (%d outcomes) by %s in %s", n, n, build, time.Since(start).Round(time.Second))
	if err := os.WriteFile(marker, []byte(base.Format(time.RFC3339)), 0o600); err != nil {
		b.Fatal(err)
	}
	return ix, base
}

// listDelivery is delivery j of n over span from base: its accepted record
// on raw and its outcome (BenchmarkEventsList says the mix).
func listDelivery(names topics.Names, j, n int, base time.Time, span time.Duration) (raw, out *kgo.Record) {
	providers := [20]string{"stripe", "stripe", "stripe", "stripe", "stripe", "stripe", "stripe", "stripe", "stripe", "stripe", "stripe", "stripe",
		"github", "github", "github", "github", "github", "shopify", "shopify", "calcom"}
	routes := [3]string{"default", "billing", "crm"}
	h := uint64(j) * 0x9E3779B97F4A7C15 // a spread of j, the same every run
	key := benchKey(j)
	provider, route := providers[h%20], routes[(h>>8)%3]
	event := benchEventType(int((h >> 16) % 19))
	if (h>>24)%100 == 0 {
		event = benchEventType(19)
	}
	status := "done"
	switch s := (h >> 32) % 100; {
	case s == 0:
		status = "dead"
	case s < 4:
		status = "duplicate"
		route = ""
	case s < 10:
		status = "retrying"
	}
	at := base.Add(time.Duration(j) * (span / time.Duration(n)))
	raw = headers.IngestRecord(names.Raw, key, event, nil, headers.IngestMeta{Provider: provider, ReceivedAt: at, RequestID: fmt.Sprintf("%032x", j), ContentType: "application/json"})
	raw.Partition, raw.Offset, raw.Timestamp = int32(j%12), int64(j/12), at
	out = &kgo.Record{Topic: names.Outcomes, Key: []byte(key), Partition: int32(j % 12), Offset: int64(j / 12), Timestamp: at.Add(3 * time.Millisecond),
		Value: fmt.Appendf(nil, `{"key":%q,"provider":%q,"event_type":%q,"status":%q,"attempt":1,"origin":"ingest","duration_ms":3,"time":%q,"route":%q,"trace_id":"%032x","partition":%d,"offset":%d}`,
			key, provider, event, status, headers.FormatTime(at.Add(3*time.Millisecond)), route, h, j%12, j/12)}
	return raw, out
}

// applyLoad writes deliveries 0..n-1 of gen through Apply, 10,000 a batch,
// as the feeder writes a poll.
func applyLoad(ix *Index, names topics.Names, n int, gen func(j int) (raw, out *kgo.Record)) error {
	start := time.Now()
	const batch = 10_000
	recs := make([]*kgo.Record, 0, 2*batch)
	for i := 0; i < n; i += batch {
		recs = deliveries(recs[:0], i, min(n, i+batch), gen)
		if err := ix.Apply(recs, []Position{{Topic: names.Raw, Partition: 0, Next: int64(i + batch)}}); err != nil {
			return err
		}
		if done := i + batch; done%1_000_000 == 0 {
			fmt.Fprintf(os.Stderr, "list bench: %d of %d deliveries written, %s\n", done, n, time.Since(start).Round(time.Second))
		}
	}
	return nil
}

// deliveries appends the records of deliveries lo..hi-1 of gen, each
// delivery's accepted record then its outcome.
func deliveries(recs []*kgo.Record, lo, hi int, gen func(j int) (raw, out *kgo.Record)) []*kgo.Record {
	for j := lo; j < hi; j++ {
		raw, out := gen(j)
		recs = append(recs, raw, out)
	}
	return recs
}
