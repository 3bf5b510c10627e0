package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want Decision
	}{
		{"nil is the zero decision", nil, Decision{}},
		{"plain error", boom, Decision{Retryable: true}},
		{"deadline", context.DeadlineExceeded, Decision{Retryable: true}},
		{"canceled", context.Canceled, Decision{Retryable: true}},
		{"net error", &net.OpError{Op: "dial", Net: "tcp", Err: io.EOF}, Decision{Retryable: true}},
		{"permanent", Permanent(boom), Decision{}},
		{"wrapped permanent", fmt.Errorf("deliver: %w", Permanent(boom)), Decision{}},
		{"retry after", RetryAfter(boom, 30*time.Second), Decision{Retryable: true, After: 30 * time.Second}},
		{"wrapped retry after", fmt.Errorf("deliver: %w", RetryAfter(boom, time.Minute)), Decision{Retryable: true, After: time.Minute}},
		{"negative retry after", RetryAfter(boom, -time.Second), Decision{Retryable: true}},
		{"permanent wins over retry after", Permanent(RetryAfter(boom, time.Minute)), Decision{}},
		{"permanent inside retry after still wins", RetryAfter(Permanent(boom), time.Minute), Decision{}},
		{"joined with permanent", errors.Join(boom, Permanent(io.EOF)), Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}

func TestTypedErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		err   error
		msg   string
		cause error // what errors.Is must find; nil: nothing
	}{
		{"permanent keeps the message", Permanent(boom), "boom", boom},
		{"retry after names the delay", RetryAfter(boom, 90*time.Second), "boom (retry after 1m30s)", boom},
		{"empty permanent", &PermanentError{}, "permanent failure", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.msg {
				t.Errorf("Error() = %q, want %q", got, tt.msg)
			}
			if tt.cause != nil && !errors.Is(tt.err, tt.cause) {
				t.Errorf("%v does not unwrap to the cause", tt.err)
			}
		})
	}
	if Permanent(nil) != nil || RetryAfter(nil, time.Second) != nil {
		t.Error("marking a nil error must give nil")
	}
}
