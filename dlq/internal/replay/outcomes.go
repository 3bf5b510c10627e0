package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
)

// OutcomePending is Result.Outcome for a replay whose outcome did not arrive
// in time.
const OutcomePending = "pending"

// Outcomes finds the processor's outcome records for replays. Note where
// webhooks.outcomes ends before producing (WatchOutcomes), then Wait.
type Outcomes struct {
	topic     string
	newClient func(extra ...kgo.Opt) (*kgo.Client, error)
	from      map[int32]kgo.Offset
}

// WatchOutcomes notes the end of every partition of topic (one ListOffsets
// request). Outcomes of records produced after this are at or past it.
func WatchOutcomes(ctx context.Context, adm *kadm.Client, newClient func(extra ...kgo.Opt) (*kgo.Client, error), topic string) (*Outcomes, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	w := &Outcomes{topic: topic, newClient: newClient, from: map[int32]kgo.Offset{}}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("end offset of %s[%d]: %w", topic, o.Partition, o.Err))
			return
		}
		w.from[o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

type pos struct {
	p int32
	o int64
}

// Wait reads outcomes, read_committed, until every sent result has the
// outcome of the record it landed as (matched by webhooks.raw partition and
// offset, so an earlier replay of the same ref cannot be mistaken for this
// one, and by route: the result's, or none for a duplicate decided for the
// key), or until timeout. It fills Outcome (and OutcomeError) and returns
// how many are still pending.
func (w *Outcomes) Wait(ctx context.Context, results []*Result, timeout time.Duration) (int, error) {
	want := map[pos]*Result{}
	for _, r := range results {
		if r.Sent {
			want[pos{r.Partition, r.Offset}] = r
		}
	}
	if len(want) == 0 {
		return 0, nil
	}
	cl, err := w.newClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: w.from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return 0, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for len(want) > 0 && wctx.Err() == nil {
		fs := cl.PollFetches(wctx)
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
			}
		})
		if ferr != nil {
			return len(want), ferr
		}
		fs.EachRecord(func(rec *kgo.Record) {
			o, err := outcome.Decode(rec.Value)
			if err != nil || o.Partition < 0 || o.Offset < 0 { // not an outcome, or one without its position
				return
			}
			k := pos{o.Partition, o.Offset}
			if r, ok := want[k]; ok && o.ReplayID == r.ReplayID && outcomeFor(o, r.Route) {
				r.Outcome, r.OutcomeError = o.Status, o.Error
				delete(want, k)
			}
		})
	}
	for _, r := range want {
		r.Outcome = OutcomePending
	}
	if err := ctx.Err(); err != nil {
		return len(want), err
	}
	return len(want), nil
}

// outcomeFor reports whether o answers a replay to route: an outcome of
// that route (none named is the route default's), or one decided for the
// whole key (duplicate, unrouted), which carries no route.
func outcomeFor(o outcome.Outcome, route string) bool {
	switch {
	case o.Route != "":
		return o.Route == control.RouteOr(route)
	case o.Status == outcome.StatusDuplicate, o.Status == outcome.StatusUnrouted:
		return true
	}
	return control.RouteOr(route) == headers.DefaultRoute
}
