package backfill

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/parked"
)

// findTimeout bounds the admin requests that find a range.
const findTimeout = 30 * time.Second

// span is a range of webhooks.raw: per partition the offsets to read,
// their number, and the oldest record the topic still holds.
type span struct {
	spans         map[string]map[int32]parked.Span
	total         int64
	availableFrom *time.Time
}

// find turns [since, until) into offsets of webhooks.raw: per partition
// from the first record at or after since to the first at or after until,
// no further than the last stable offset (a transaction still open is not
// waited for). Cost: four ListOffsets requests and one fetch of each
// partition's first record.
func (rn *Runner) find(ctx context.Context, since, until time.Time) (span, error) {
	ctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	raw, adm := rn.Reader.Names.Raw, rn.Reader.Adm
	list := func(what string, f func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		l, err := f()
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("backfill: %s offsets of %s: %w", what, raw, err)
		}
		if _, ok := l[raw]; !ok {
			return nil, fmt.Errorf("backfill: %s has no partitions: is the prefix right, and has ingest run once?", raw)
		}
		return l, nil
	}
	starts, err := list("log start", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, raw) })
	if err != nil {
		return span{}, err
	}
	stable, err := list("last stable", func() (kadm.ListedOffsets, error) { return adm.ListCommittedOffsets(ctx, raw) })
	if err != nil {
		return span{}, err
	}
	from, err := list("since", func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), raw) })
	if err != nil {
		return span{}, err
	}
	to, err := list("until", func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, until.UnixMilli(), raw) })
	if err != nil {
		return span{}, err
	}
	out := span{spans: map[string]map[int32]parked.Span{raw: {}}}
	held := map[string]map[int32]parked.Span{raw: {}}
	for p, st := range starts[raw] {
		end := stable[raw][p].Offset
		if st.Offset < end {
			held[raw][p] = parked.Span{Start: st.Offset, End: end}
		}
		// An offset past the last record is returned as the log end; a
		// time before the first record as the log start.
		lo, hi := max(from[raw][p].Offset, st.Offset), min(to[raw][p].Offset, end)
		if lo < hi {
			out.spans[raw][p] = parked.Span{Start: lo, End: hi}
			out.total += hi - lo
		}
	}
	if _, err := rn.Reader.Scan(ctx, held, true, func(r *kgo.Record) {
		if at := r.Timestamp.UTC(); out.availableFrom == nil || at.Before(*out.availableFrom) {
			out.availableFrom = &at
		}
	}); err != nil {
		return span{}, fmt.Errorf("backfill: the oldest records of %s: %w", raw, err)
	}
	return out, nil
}
