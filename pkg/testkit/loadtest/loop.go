package loadtest

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// PostClient is the HTTP client benchmarks and tests post to ingest with:
// up to maxIdle idle connections to a host kept, and at most maxConns
// connections to a host (0: no bound); an idle connection is let go after
// PostIdleTimeout.
func PostClient(maxIdle, maxConns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: maxIdle, MaxConnsPerHost: maxConns, IdleConnTimeout: PostIdleTimeout}}
}

// PostIdleTimeout is how long PostClient keeps an idle connection: less
// than ingest keeps one. Ingest closes a connection that has not sent its
// first request within HOOKLINE_INGEST_READ_HEADER_TIMEOUT (5 s by
// default; net/http's server starts that clock at the accept) and one idle
// between requests for HOOKLINE_INGEST_IDLE_TIMEOUT (2 minutes). net/http's
// transport dials connections it may not use at once: when another one
// frees first, the new one waits in the idle pool without a request. A
// POST sent on a connection as ingest closes it fails with EOF (net/http
// sends a POST only once). Full make bench runs stopped on such an EOF
// twice: once after 2 minutes idle, once at 2,678 events/s less than 2
// minutes after ingest started, which only the first-request close
// explains (read from net/http's source, not reproduced).
const PostIdleTimeout = 2 * time.Second

// Result is what one load phase measured: the latency of every call that
// succeeded, the calls that failed, and the phase's wall time.
type Result struct {
	Lat    []time.Duration
	Errors int
	// First is a failed call's error (nil when none failed): what a report
	// of Errors names. OpenLoops keeps the first to fail; ClosedLoop the
	// first of the poster that finished first among those with a failure.
	First   error
	Elapsed time.Duration
}

// Rate is the successful calls per second of wall time.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Lat)) / r.Elapsed.Seconds()
}

// Pct is the p-th percentile (0-100) of the latencies, 0 when there are
// none. It sorts a copy: O(n log n) per call.
func (r Result) Pct(p float64) time.Duration { return Percentile(r.Lat, p) }

// Percentile is the p-th percentile (0-100) of ds (nearest rank, the
// maximum for p=100), 0 when ds is empty. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

// ClosedLoop keeps conns calls of do in flight, each worker starting its
// next call as soon as the previous one returned, until dur has passed (or
// ctx ends). Calls running at the deadline finish and count, so no request
// is cut off half-sent; Elapsed runs until the last of them returned. i
// numbers the calls from 0, distinct across workers. The latency of a call
// is its own duration.
func ClosedLoop(ctx context.Context, conns int, dur time.Duration, do func(ctx context.Context, i int) error) Result {
	var (
		mu   sync.Mutex
		res  Result
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(dur)
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs := 0
			var first error
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				t0 := time.Now()
				if err := do(ctx, i); err != nil {
					if ctx.Err() == nil {
						if errs++; first == nil {
							first = err
						}
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.Lat = append(res.Lat, lat...)
			res.Errors += errs
			if res.First == nil {
				res.First = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// OpenLoop starts calls of do at a fixed rate (per second) for dur, whether
// or not earlier calls returned (at most 1,024 in flight), so a stalled
// server shows in the percentiles: latency counts from each call's scheduled
// start, not from when it got going (no coordinated omission).
func OpenLoop(ctx context.Context, rate float64, dur time.Duration, do func(ctx context.Context, i int) error) Result {
	return OpenLoops(ctx, rate, dur, 1, func(ctx context.Context, _, i int) error { return do(ctx, i) })[0]
}

// OpenLoops is OpenLoop for k loads interleaved on one schedule at rate in
// all: call i is load i%k's call i/k, so each load runs at rate/k, and a
// stall of the caller's (its scheduling, a collection) delays every load
// alike, their calls after it still in turn. Each load's Result is its
// own calls'; Elapsed is the schedule's.
func OpenLoops(ctx context.Context, rate float64, dur time.Duration, k int, do func(ctx context.Context, load, i int) error) []Result {
	var (
		mu  sync.Mutex
		res = make([]Result, k)
		wg  sync.WaitGroup
	)
	n := int(rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, 1024)
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			load := i % k
			err := do(ctx, load, i/k)
			lat := time.Since(at)
			mu.Lock()
			if err != nil {
				if res[load].Errors++; res[load].First == nil {
					res[load].First = err
				}
			} else {
				res[load].Lat = append(res[load].Lat, lat)
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i := range res {
		res[i].Elapsed = elapsed
	}
	return res
}
