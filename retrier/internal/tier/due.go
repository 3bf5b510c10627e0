package tier

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// dueAt returns when r may leave its tier: its hookline.due-at.
//
// A record without a readable due-at was not written by the processor (a
// hand-made record, another tool). Moving it at once would skip the wait the
// tier stands for, and holding it forever would block every record behind it
// in the partition, so it is held until its timestamp plus the tier's delay:
// the earliest due time the processor could have given it. err says why the
// header was not used; it is nil when it was. A record without a usable
// timestamp either is due at once.
func dueAt(r *kgo.Record, delay time.Duration) (time.Time, error) {
	due, err := headers.GetTime(r, headers.DueAt)
	if err == nil {
		return due, nil
	}
	if r.Timestamp.UnixMilli() <= 0 {
		return time.Time{}, err
	}
	return r.Timestamp.Add(delay).UTC(), err
}

// split is the decision for the records of one partition, in offset order.
type split struct {
	// n records at the front are due: they are moved now.
	n int
	// dues are the due times of those n records.
	dues []time.Time
	// hold is the due time of records[n], the new head, when n <
	// len(records): the partition is paused until then. Records after the
	// head are not looked at, even if they are due earlier (jitter can do
	// that): moving them would commit past the head.
	hold time.Time
}

// plan splits the records of one partition at the first one not due at now.
// bad is called for each record whose due-at could not be read (see dueAt).
func plan(records []*kgo.Record, delay time.Duration, now time.Time, bad func(*kgo.Record, time.Time, error)) split {
	s := split{dues: make([]time.Time, 0, len(records))}
	for _, r := range records {
		due, err := dueAt(r, delay)
		if err != nil && bad != nil {
			bad(r, due, err)
		}
		if due.After(now) {
			s.hold = due
			return s
		}
		s.dues = append(s.dues, due)
		s.n++
	}
	return s
}

// outgoing is r as it goes back to webhooks.raw: the exact key and value,
// every header kept (the attempt, the error history, due-at, first-seen-at
// and source headers included), and hookline.origin set to retry. The
// timestamp is left for the producer to set: the move time. A copy over
// maxRecord is made to fit by cutting its longest headers (headers.Fit):
// a copy the broker refused would hold its partition for ever.
func outgoing(r *kgo.Record, raw string, maxRecord int) *kgo.Record {
	out := &kgo.Record{Topic: raw, Key: r.Key, Value: r.Value, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
	headers.Set(out, headers.Origin, headers.OriginRetry)
	headers.Fit(out, maxRecord)
	return out
}
