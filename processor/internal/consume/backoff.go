package consume

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// backoff is how long retrying waits after each failure: from first,
// doubling, up to most.
type backoff struct{ first, most time.Duration }

var (
	// slowBackoff is for work whose failure says something is wrong
	// (a restore, the control topic).
	slowBackoff = backoff{time.Second, 30 * time.Second}
	// offsetsBackoff is for the committed-offset read after an
	// assignment, which fails for as long as a transaction of the
	// previous owner still holds an offset commit for the partition
	// (UNSTABLE_OFFSET_COMMIT): usually milliseconds (its markers being
	// written), and every moment waited past its end is a moment the
	// partition stands still.
	offsetsBackoff = backoff{50 * time.Millisecond, time.Second}
)

// retrying runs fn until it succeeds (true) or ctx ends (false), logging
// each failure and backing off as b says.
func retrying(ctx context.Context, log *slog.Logger, what string, b backoff, fn func() error) bool {
	for backoff := b.first; ; backoff = min(2*backoff, b.most) {
		err := fn()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Error(what+"; retrying", "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

// clientBackoff is the transactional session's kgo.RetryBackoffFn: how long
// its client waits after its fails-th failure in a row, before retrying a
// produce, a fetch, a metadata load or a request: 10 ms, then ×4 up to
// franz-go's own cap of 5 s (jittered ×0.8–1.2, as franz-go's is).
//
// franz-go's default starts at 250 ms. With transaction version 2 (Kafka
// 4.x) a produce that opens the next transaction before the broker has
// written the previous one's markers is refused with
// CONCURRENT_TRANSACTIONS, a wait of milliseconds; the client retries it
// after this backoff, and meanwhile holds back every partition it
// produces to on that broker. At 250 ms that pause was a transaction's
// records' p99. A broker that is down gets no more attempts than with the
// default past the first fraction of a second: the same number of steps to
// the cap (10, 40, 160, 640, 2560 ms against 250, 500 ms … 4 s), only
// earlier. A broker answering every produce with a retriable error (a
// response resets the count) is asked again every 10 ms instead of 250.
func clientBackoff(fails int) time.Duration {
	const first, most = 10 * time.Millisecond, 5 * time.Second
	d := most
	if fails < 6 {
		d = first << (2 * max(fails-1, 0))
	}
	return min(time.Duration(float64(d)*(0.8+0.4*rand.Float64())), most)
}
