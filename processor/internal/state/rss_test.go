package state

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestRSS compares the memory of the tuned Badger options (badgerOptions)
// with Badger's defaults on 1M keys of 12 partitions (~220-byte values,
// 36-byte keys, 7-day TTL). Each configuration runs in its own process,
// twice: "write" applies the keys in batches of 5000 then reads 200k random
// keys; "reopen" opens the written directory (seeding Keys with a scan) and
// reads 200k random keys. VmHWM is the peak RSS of that process. Run it
// also with GOMEMLIMIT set (the children inherit it): the bulk load's peak is
// mostly garbage the Go collector has not returned yet.
//
//	HOOKLINE_RSS=1 go test -run '^TestRSS$' -v ./processor/internal/state/
//	GOMEMLIMIT=200MiB HOOKLINE_RSS=1 go test -run '^TestRSS$' -v ./processor/internal/state/
//	HOOKLINE_RSS_KEYS=10000000 HOOKLINE_RSS=1 go test -run '^TestRSS$' -v -timeout 30m ./processor/internal/state/
func TestRSS(t *testing.T) {
	if os.Getenv("HOOKLINE_RSS") == "" {
		t.Skip("set HOOKLINE_RSS=1 to measure the RSS of 1M keys (about a minute)")
	}
	for _, tuning := range []string{"tuned", "default"} {
		dir := t.TempDir()
		for _, phase := range []string{"write", "reopen"} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRSSChild$", "-test.v")
			cmd.Env = append(os.Environ(), "HOOKLINE_RSS_CHILD="+tuning+","+phase, "HOOKLINE_RSS_DIR="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", tuning, phase, err, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "rss:") {
					t.Log(strings.TrimSpace(l[strings.Index(l, "rss:"):]))
				}
			}
		}
	}
}

func TestRSSChild(t *testing.T) {
	mode := os.Getenv("HOOKLINE_RSS_CHILD")
	if mode == "" {
		t.Skip("helper process of TestRSS")
	}
	tuning, phase, _ := strings.Cut(mode, ",")
	dir := os.Getenv("HOOKLINE_RSS_DIR")
	o := Options{Dir: dir}
	bo := badgerOptions(o)
	if tuning == "default" {
		bo = badger.DefaultOptions(dir).WithLogger(nil)
	}
	n, parts := 1_000_000, 12
	if v, err := strconv.Atoi(os.Getenv("HOOKLINE_RSS_KEYS")); err == nil && v > 0 {
		n = v
	}
	key := func(i int) string { return fmt.Sprintf("%08x-4b1d-4c2a-9e7f-%012x", i, i*7919) }
	start := time.Now()
	s, err := open(o, bo)
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Since(start)
	if phase == "write" {
		value := []byte(`{"v":1,"status":"done","provider":"stripe","first_seen_at":"2026-01-02T03:04:05.678Z","updated_at":"2026-01-02T03:04:05.678Z","expires_at":"2026-01-09T03:04:05.678Z","replay_ids":["r-0123456789abcdef","r-fedcba9876543210"]}`)
		exp := time.Now().Add(7 * 24 * time.Hour)
		batch := make([]Change, 0, 5000)
		for i := range n {
			batch = append(batch, Change{Partition: int32(i % parts), Key: key(i), Value: value, ExpiresAt: exp})
			if len(batch) == cap(batch) {
				if err := s.Apply(batch, map[int32]int64{int32(i % parts): int64(i)}); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	wrote := time.Since(start)
	seedStart := time.Now()
	if err := newKeyCounter().seed(s.db); err != nil { // what Open spends counting keys
		t.Fatal(err)
	}
	seed := time.Since(seedStart)
	start = start.Add(seed)
	for range 200_000 {
		i := rand.IntN(n)
		if _, ok, err := s.Get(int32(i%parts), key(i)); err != nil || !ok {
			t.Fatalf("get %d: ok=%t err=%v", i, ok, err)
		}
	}
	read := time.Since(start) - wrote
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, hwm := procStatus("VmRSS"), procStatus("VmHWM")
	t.Logf("rss: %-7s %-6s keys=%d open=%s seed=%s write=%s read200k=%s VmRSS=%s VmHWM=%s GoHeapInuse=%dMiB GoSys=%dMiB",
		tuning, phase, s.Keys(), opened.Round(time.Millisecond), seed.Round(time.Millisecond), (wrote - opened).Round(time.Millisecond), read.Round(time.Millisecond),
		rss, hwm, ms.HeapInuse>>20, ms.Sys>>20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
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
