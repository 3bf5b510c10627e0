// Package fetcherr decides, for the services' poll loops (the processor's
// reader, the retrier's mover), which errors of a poll end the loop: those
// of the client itself, not of a partition, which the client recovers from
// by itself.
package fetcherr

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Fatal logs the errors of fs at Warn (topic, partition, err) and returns
// the one the loop cannot continue past, or nil. Cost: one pass over fs's
// partitions.
//
//   - Fatal: an error franz-go reports for no partition (topic "",
//     partition -1): the client was closed (kgo.ErrClientClosed), or a fetch
//     response was over BrokerMaxReadBytes and would be again.
//   - Not fatal, logged: an error of a topic or partition (a metadata load
//     error, kgo.ErrFirstReadEOF from a TLS or SASL mismatch, data loss, an
//     offset out of range) and kgo.ErrGroupSession (reported on partition
//     0): the client retries or rejoins by itself.
//   - Not fatal, not logged: context.Canceled and context.DeadlineExceeded,
//     the poll's context ending; the caller stops on ctx.Err().
func Fatal(fs kgo.Fetches, log *slog.Logger) error {
	var fatal error
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		if t == "" && p == -1 {
			fatal = err
		}
	})
	return fatal
}
