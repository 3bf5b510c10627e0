// Package retry is hookline's retry policy, in one place for the processor and
// the retrier (DESIGN §6, §7): which failures are worth another attempt
// (Classify over the typed errors PermanentError and RetryAfterError), the
// tiered schedule read from HOOKLINE_RETRY_TIERS, which tier a failed attempt
// goes to (Schedule.Route), the tier topics' names, and when a parked record
// becomes due (Schedule.DueAt).
//
// Everything here is pure and cheap: no I/O, no clocks, no randomness of its
// own (callers pass the time and the random source).
package retry

import (
	"errors"
	"fmt"
	"time"
)

// PermanentError marks a failure that no retry can fix (a 4xx other than 408
// and 429, a body the handler rejects): the record goes to the DLQ at once.
// Match it with errors.As and a *PermanentError target.
type PermanentError struct{ Err error }

// Permanent marks err as permanent. Permanent(nil) is nil, so
// `return retry.Permanent(err)` is safe on the success path too.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error returns the wrapped error's message unchanged: the mark is carried by
// the type, not by the text that lands in hookline.errors.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "permanent failure"
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryAfterError is a retryable failure whose source asked for a minimum
// delay (an HTTP 429 or 503 with Retry-After). Route honours it by tier
// choice. Match it with errors.As and a *RetryAfterError target.
type RetryAfterError struct {
	Err   error
	After time.Duration
	// Until is the date the source named (its answer's time plus After),
	// when the source of the error knows it; zero otherwise.
	Until time.Time
}

// RetryAfter marks err as retryable no sooner than after d; a negative d counts
// as 0. RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Err: err, After: max(d, 0)}
}

// Error returns the wrapped message followed by the requested delay.
func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Decision is what Classify makes of a failure.
type Decision struct {
	// Retryable is true when another attempt may succeed.
	Retryable bool
	// After is the minimum delay the failure asked for (Retry-After); 0 when
	// it asked for none.
	After time.Duration
	// Until is the date it asked for, when known (RetryAfterError.Until).
	Until time.Time
}

// Classify decides retry versus dead letter for a handler's error, by
// errors.As on the typed errors anywhere in the chain:
//
//   - a *PermanentError: not retryable (it wins over a RetryAfterError in
//     the same chain: someone decided explicitly);
//   - a *RetryAfterError: retryable, After from the error;
//   - anything else (context.DeadlineExceeded, net errors, 5xx, unknown
//     errors): retryable with no minimum delay. Failing safe means retrying:
//     a wrong retry costs a few attempts, a wrong dead letter costs an
//     operator.
//
// Classify(nil) returns the zero Decision (not retryable, After 0). nil is
// success, not a failure: callers handle it before classifying, and Route
// sends a non-retryable Decision to the DLQ, so never route a nil error.
//
// context.Canceled is classified retryable like any other error; a processor
// shutting down should not record an attempt its own cancellation cut short.
func Classify(err error) Decision {
	if err == nil {
		return Decision{}
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return Decision{}
	}
	d := Decision{Retryable: true}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		d.After, d.Until = ra.After, ra.Until
	}
	return d
}
