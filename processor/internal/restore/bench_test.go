package restore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/state"
)

// BenchmarkRestore restores one changelog partition of N records (200k by
// default, HOOKLINE_BENCH_RECORDS to change; ~200-byte state JSON from
// decide.Encode, distinct keys, written in committed transactions of 1000)
// into a fresh on-disk store, and compares it with the baseline: a plain
// read of the same partition by a franz-go consumer with the same fetch
// options that does nothing per record. Both run in every iteration, in the
// same process; it reports records/s of each and restore/plain, and the
// records/s of the same restore with a Decode that costs nothing (what the
// store alone allows).
//
//	KAFKA_BROKERS=127.0.0.1:9092 go test -run '^$' -bench BenchmarkRestore -benchtime 3x ./processor/internal/restore/
func BenchmarkRestore(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("HOOKLINE_BENCH_RECORDS")); err == nil && v > 0 {
		n = v
	}
	e := mustEnv(b, 1)
	cl := e.producer(b)
	now := time.Now().UTC().Truncate(time.Millisecond)
	value, err := decide.Encode(decide.State{
		Status: decide.StatusDone, Provider: "stripe",
		FirstSeenAt: now, UpdatedAt: now, ExpiresAt: now.Add(decide.DefaultTTL),
		ReplayIDs: []string{"replay-0123456789abcdef0123", "replay-fedcba9876543210fedc"},
	})
	if err != nil {
		b.Fatal(err)
	}
	const perTxn = 1000
	for i := 0; i < n; i += perTxn {
		rs := make([]*kgo.Record, 0, perTxn)
		for j := i; j < min(i+perTxn, n); j++ {
			rs = append(rs, rec(0, fmt.Sprintf("evt_%08x-4b1d-4c2a-9e7f-%012x", j, j*7919), value))
		}
		txn(b, cl, true, rs...)
	}
	hwm := e.stableEnd(b, 0)
	cfg := e.config(nil)
	cfg.Decode = decide.StoredFromChangelog // what the processor restores with
	b.Logf("%d records of %d bytes, end offset %d", n, len(value), hwm)

	// The store-bound variant: the same restore with a Decode that costs
	// nothing, to split the cost between decoding and writing.
	free := cfg
	free.Decode = func(v []byte) ([]byte, time.Time, error) { return v, now.Add(decide.DefaultTTL), nil }

	var plain, restore, restoreFree time.Duration
	var bytes int64
	iters := 0
	for b.Loop() {
		iters++
		plain += plainRead(b, e, hwm)
		d, s := timeRestore(b, cfg, n, hwm)
		restore, bytes = restore+d, bytes+s.Bytes
		d, _ = timeRestore(b, free, n, hwm)
		restoreFree += d
	}
	total := float64(n * iters)
	b.ReportMetric(total/plain.Seconds(), "plain_rec/s")
	b.ReportMetric(total/restore.Seconds(), "restore_rec/s")
	b.ReportMetric(float64(bytes)/1e6/restore.Seconds(), "restore_MB/s")
	b.ReportMetric(plain.Seconds()/restore.Seconds(), "restore/plain")
	b.ReportMetric(total/restoreFree.Seconds(), "restore_nodecode_rec/s")
}

// timeRestore restores partition 0 into a fresh on-disk store and returns
// how long Partition took, and its stats.
func timeRestore(b *testing.B, cfg Config, n int, hwm int64) (time.Duration, Stats) {
	b.Helper()
	st, err := state.Open(state.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	start, cpu0 := time.Now(), cpuTime()
	s, err := Partition(context.Background(), cfg, st, 0)
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if s.Records != n || s.Applied != n || s.To != hwm || !s.Bulk {
		b.Fatalf("restore: %+v, want %d records to %d in bulk", s, n, hwm)
	}
	b.Logf("restore: %s wall, %s cpu (process), %.0f records/s, %.1f MB/s", d.Round(time.Millisecond),
		(cpuTime() - cpu0).Round(time.Millisecond), s.RecordsPerSecond(), s.MBPerSecond())
	return d, s
}

// plainRead reads the partition from the start to end with the restore's
// consumer options, doing nothing per record, and returns how long it took
// (client creation included, as for the restore).
func plainRead(tb testing.TB, e *env, end int64) time.Duration {
	tb.Helper()
	start := time.Now()
	cl, err := e.config(nil).NewClient(append(consumerOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.topic: {0: kgo.NewOffset().At(0)}}))...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var pos int64
	for pos < end {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			tb.Fatal(err)
		}
		for it := fs.RecordIter(); !it.Done(); {
			pos = it.Next().Offset + 1
		}
	}
	return time.Since(start)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
