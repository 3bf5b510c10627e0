package state

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/processor/internal/decide"
)

// TestRSS measures the memory of a store holding many keys (1M by default,
// HOOKLINE_RSS_KEYS; make bench-state runs 10M) in two variants, each in
// processes of its own, one after the other in the same run:
//
//   - "before": the store as it was before HOOKLINE_STATE_MEMORY: the
//     changelog's JSON as the value, the fixed Badger tuning of then
//     (legacyOptions), and a key-only scan of the whole store at every Open
//     to count keys;
//   - "after": the stored form (decide.EncodeStored), Badger sized from
//     Options.Memory (HOOKLINE_STATE_MEMORY, default unless set), key
//     counts saved by Close, and Badger's table pages trimmed from RSS
//     (trim_linux.go).
//
// Keys are 36 bytes over 12 partitions, states done with a 7-day TTL. The
// "build" process bulk-loads them (Loader, as a restore from scratch does)
// and closes the store; the "reopen" process opens it and serves 200,000
// Gets of random keys, each decoded. Each prints VmRSS (now), VmHWM (its
// peak), RssAnon and RssFile (Badger's memory-mapped table pages), the Go
// heap and the GOMEMLIMIT it ran under (HOOKLINE_RSS_GOMEMLIMIT sets it
// for the reopen processes; the children inherit GOMEMLIMIT otherwise).
// HOOKLINE_RSS_VARIANTS picks variants ("after" alone skips the baseline).
//
//	HOOKLINE_RSS=1 go test -run '^TestRSS$' -v ./processor/internal/state/
//	make bench-state   # 10M keys, reopened under GOMEMLIMIT=200MiB
func TestRSS(t *testing.T) {
	if os.Getenv("HOOKLINE_RSS") == "" {
		t.Skip("set HOOKLINE_RSS=1 to measure the RSS of a store of 1M keys (a few minutes; make bench-state: 10M)")
	}
	variants := strings.Fields(os.Getenv("HOOKLINE_RSS_VARIANTS"))
	if len(variants) == 0 {
		variants = []string{"before", "after"}
	}
	for _, variant := range variants {
		dir := t.TempDir()
		for _, phase := range []string{"build", "reopen"} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRSSChild$", "-test.v", "-test.timeout=0")
			cmd.Env = append(os.Environ(), "HOOKLINE_RSS_CHILD="+variant+","+phase, "HOOKLINE_RSS_DIR="+dir)
			if l := os.Getenv("HOOKLINE_RSS_GOMEMLIMIT"); l != "" && phase == "reopen" {
				cmd.Env = append(cmd.Env, "GOMEMLIMIT="+l)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", variant, phase, err, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if i := strings.Index(l, "rss:"); i >= 0 {
					t.Log(strings.TrimSpace(l[i:]))
				}
			}
		}
		t.Logf("rss: %-6s store on disk: %d MB", variant, dirSize(dir)/1e6)
		rec := report.NewRecorder("bench-state")
		rec.Add(variant+" store on disk", float64(dirSize(dir))/1e6, "MB")
		if err := rec.WriteEnv(); err != nil {
			t.Fatal(err)
		}
	}
}

// legacyOptions is the Badger tuning before Options.Memory: fixed sizes.
func legacyOptions(dir string) badger.Options {
	return badger.DefaultOptions(dir).WithLogger(nil).
		WithMemTableSize(16 << 20).WithNumMemtables(2).
		WithBlockCacheSize(16 << 20).WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(16 << 20).WithNumCompactors(2).
		WithNumLevelZeroTables(4).WithNumLevelZeroTablesStall(10).WithNumGoroutines(2).
		WithNumVersionsToKeep(1).WithDetectConflicts(false).WithMetricsEnabled(false).
		WithSyncWrites(false).WithCompression(options.Snappy).WithChecksumVerificationMode(options.OnBlockRead)
}

func TestRSSChild(t *testing.T) {
	mode := os.Getenv("HOOKLINE_RSS_CHILD")
	if mode == "" {
		t.Skip("helper process of TestRSS")
	}
	variant, phase, _ := strings.Cut(mode, ",")
	dir := os.Getenv("HOOKLINE_RSS_DIR")
	n, parts := 1_000_000, 12
	if v, err := strconv.Atoi(os.Getenv("HOOKLINE_RSS_KEYS")); err == nil && v > 0 {
		n = v
	}
	o := Options{Dir: dir}
	bo := badgerOptions(o)
	if variant == "before" {
		o.noTrim, bo = true, legacyOptions(dir)
	}
	key := func(i int) string { return fmt.Sprintf("%08x-4b1d-4c2a-9e7f-%012x", i, i*7919) }
	start := time.Now()
	s, err := open(o, bo)
	if err != nil {
		t.Fatal(err)
	}
	if variant == "before" && phase == "reopen" {
		if err := newKeyCounter().seed(s.db); err != nil { // what Open spent counting keys
			t.Fatal(err)
		}
	}
	opened := time.Since(start)
	var did string
	rec := report.NewRecorder("bench-state") // bench report figures, named by variant and phase
	name := func(figure string) string { return variant + " " + phase + " " + figure }
	switch phase {
	case "build":
		now := time.Now().UTC().Truncate(time.Millisecond)
		for p := range parts {
			l := s.NewLoader(int32(p))
			batch := make([]Change, 0, 5000)
			for i := p; i < n; i += parts {
				// Times a few ms apart, as keys arrive.
				at := now.Add(time.Duration(i) * 3 * time.Millisecond)
				st := decide.State{Status: decide.StatusDone, Provider: "stripe", FirstSeenAt: at, UpdatedAt: at, ExpiresAt: at.Add(decide.DefaultTTL)}
				value, err := decide.EncodeStored(st)
				if variant == "before" {
					value, err = decide.Encode(st)
				}
				if err != nil {
					t.Fatal(err)
				}
				batch = append(batch, Change{Partition: int32(p), Key: key(i), Value: value, ExpiresAt: st.ExpiresAt})
				if len(batch) == cap(batch) {
					if err := l.Add(batch); err != nil {
						t.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := l.Add(batch); err != nil {
				t.Fatal(err)
			}
			if err := l.Checkpoint(int64(n)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		did = fmt.Sprintf("bulk-loaded %d keys in %s", n, time.Since(start).Round(time.Second))
		rec.Add(name("bulk load"), time.Since(start).Seconds(), "s")
	case "reopen":
		readStart := time.Now()
		for range 200_000 {
			i := rand.IntN(n)
			v, ok, err := s.Get(int32(i%parts), key(i))
			if err != nil || !ok {
				t.Fatalf("get %d: ok=%t err=%v", i, ok, err)
			}
			if _, err := decide.DecodeStored(v); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(readStart)
		rec.Add(name("open"), opened.Seconds(), "s")
		rec.Add(name("200k random reads"), took.Seconds(), "s")
		// What the index cache would have to hold for a read to find its
		// table without the disk: every table's index and Bloom filter.
		var index, bloom, keys int64
		for _, ti := range s.db.Tables() {
			index, bloom, keys = index+int64(ti.IndexSz), bloom+int64(ti.BloomFilterSize), keys+int64(ti.KeyCount)
		}
		did = fmt.Sprintf("opened in %s, 200k random reads in %s; tables: %d keys, index %.1f B/key, Bloom filters %.1f B/key",
			opened.Round(time.Millisecond), took.Round(time.Millisecond), keys, float64(index)/float64(max(keys, 1)), float64(bloom)/float64(max(keys, 1)))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	limit := "none"
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		limit = fmt.Sprintf("%dMiB", l>>20)
	}
	t.Logf("rss: %-6s %-6s keys=%d VmRSS=%s VmHWM=%s RssAnon=%s RssFile=%s GoHeapInuse=%dMiB GOMEMLIMIT=%s trims=%d | %s",
		variant, phase, s.Keys(), procStatus("VmRSS"), procStatus("VmHWM"), procStatus("RssAnon"), procStatus("RssFile"),
		ms.HeapInuse>>20, limit, s.trimmed.Load(), did)
	rec.Add(name("keys"), float64(s.Keys()), "keys")
	for _, f := range []string{"VmRSS", "VmHWM", "RssAnon", "RssFile"} {
		if kb, err := strconv.ParseFloat(strings.TrimSuffix(procStatus(f), "kB"), 64); err == nil {
			rec.Add(name(f), kb/1024, "MiB")
		}
	}
	rec.Add(name("Go heap in use"), float64(ms.HeapInuse)/(1<<20), "MiB")
	if err := rec.WriteEnv(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func procStatus(field string) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.Join(strings.Fields(v), "")
		}
	}
	return "?"
}
