package fetcherr

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionErr is a poll holding one error for topic t, partition p.
func partitionErr(t string, p int32, err error) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: t, Partitions: []kgo.FetchPartition{{Partition: p, Err: err}}}}}}
}

// TestFatal: only the client's own errors end the loop; partition errors
// are logged; the poll's context ending is neither.
func TestFatal(t *testing.T) {
	records := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "webhooks.raw", Partitions: []kgo.FetchPartition{{Partition: 0,
		Records: []*kgo.Record{{Topic: "webhooks.raw", Value: []byte("v")}}}}}}}}
	tests := []struct {
		name   string
		fs     kgo.Fetches
		fatal  error
		logged bool
	}{
		{"records, no error", records, nil, false},
		{"client closed", kgo.NewErrFetch(kgo.ErrClientClosed), kgo.ErrClientClosed, true},
		{"client closed beside records", append(records, kgo.NewErrFetch(kgo.ErrClientClosed)...), kgo.ErrClientClosed, true},
		{"context canceled", kgo.NewErrFetch(context.Canceled), nil, false},
		{"context deadline", kgo.NewErrFetch(context.DeadlineExceeded), nil, false},
		{"first read EOF on a partition", partitionErr("webhooks.raw", 2, &kgo.ErrFirstReadEOF{}), nil, true},
		{"topic load error", partitionErr("webhooks.raw", -1, kerr.TopicAuthorizationFailed), nil, true},
		{"data loss", partitionErr("webhooks.retry.1m", 0, &kgo.ErrDataLoss{Topic: "webhooks.retry.1m"}), nil, true},
		{"group session", partitionErr("", 0, &kgo.ErrGroupSession{}), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			err := Fatal(tc.fs, slog.New(slog.NewTextHandler(&logs, nil)))
			if !errors.Is(err, tc.fatal) || (err == nil) != (tc.fatal == nil) {
				t.Errorf("Fatal = %v, want %v", err, tc.fatal)
			}
			if got := strings.Contains(logs.String(), "fetch error"); got != tc.logged {
				t.Errorf("logged %t, want %t: %q", got, tc.logged, logs.String())
			}
		})
	}
}
