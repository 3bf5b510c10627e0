package consume

import (
	"context"
	"log/slog"
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
