package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rediscover is how often a following Feeder looks for new topics (a
// retry tier added to HOOKLINE_RETRY_TIERS).
const rediscover = 30 * time.Second

// feedGap is how long Follow waits before its next poll after one that
// brought records within feedGap. franz-go sends the next fetch as soon as
// a poll takes the last one's records, and the broker answers it on the
// first record to arrive: at 1,000 events/s dlq serve fetched hundreds of
// times a second, a record or two each, and paid more CPU per event than
// ingest (bench-e2e -cost, issue 36). With the wait a busy feed fetches at
// most twice a gap (the fetch sent at the poll, answered early, and the
// one after the wait, which brings what arrived meanwhile), and the index
// trails the topics by about two gaps. Sleeping, not pausing as the
// processor's reader does: no one waits on the index record by record.
// An idle feed's fetch waits in the broker (FetchMaxWait) as before.
const feedGap = 100 * time.Millisecond

// Feeder reads the topics into an Index.
type Feeder struct {
	ix        *Index
	newClient func(...kgo.Opt) (*kgo.Client, error)
	adm       *kadm.Client
	log       *slog.Logger
}

// NewFeeder returns a Feeder writing to ix; newClient makes consumers with
// the connection options, adm lists topics and offsets.
func NewFeeder(ix *Index, newClient func(...kgo.Opt) (*kgo.Client, error), adm *kadm.Client, log *slog.Logger) *Feeder {
	return &Feeder{ix: ix, newClient: newClient, adm: adm, log: log}
}

// partitions lists the partitions of every topic the index reads.
func (f *Feeder) partitions(ctx context.Context) (map[string][]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	td, err := f.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("trace: list topics: %w", err)
	}
	out := map[string][]int32{}
	for name, t := range td {
		if t.Err != nil || !f.ix.Reads(name) {
			continue
		}
		for p := range t.Partitions {
			out[name] = append(out[name], p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trace: none of the topics exists yet (%s, %s, ...): has a hookline service run once?", f.ix.names.Raw, f.ix.names.Outcomes)
	}
	return out, nil
}

// CatchUp reads every topic from the stored positions to where it ends
// now (its last stable offset), then returns. A `dlq trace` run calls it
// before reading a key. A partition that yields nothing for stall is left
// where it is (aborted writes at its end, or its leader unreachable),
// with a warning.
func (f *Feeder) CatchUp(ctx context.Context, stall time.Duration) error {
	parts, err := f.partitions(ctx)
	if err != nil {
		return err
	}
	var names []string
	for t := range parts {
		names = append(names, t)
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ends, err := f.adm.ListCommittedOffsets(lctx, names...)
	cancel()
	if err != nil {
		return fmt.Errorf("trace: end offsets: %w", err)
	}
	pos, err := f.ix.Positions()
	if err != nil {
		return err
	}
	want := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > pos[o.Topic][o.Partition] {
			if want[o.Topic] == nil {
				want[o.Topic] = map[int32]int64{}
			}
			want[o.Topic][o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := f.client(want, pos)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, stall)
		fs := cl.PollFetches(pctx)
		stalled := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		moved, err := f.apply(fs)
		if err != nil {
			return err
		}
		for _, p := range moved {
			if end, ok := want[p.Topic][p.Partition]; ok && p.Next >= end {
				delete(want[p.Topic], p.Partition)
				if len(want[p.Topic]) == 0 {
					delete(want, p.Topic)
				}
			}
		}
		if len(moved) == 0 && stalled {
			f.log.Warn("trace index: nothing arrived; partitions left where they are", "stall", stall.String(), "partitions", describe(want))
			return nil
		}
	}
	return nil
}

// Follow reads every topic from the stored positions and keeps reading
// until ctx ends (dlq serve); caughtUp, when set, is called once the
// index reached where the topics ended when it started.
func (f *Feeder) Follow(ctx context.Context, caughtUp func()) error {
	parts, err := f.partitions(ctx)
	if err != nil {
		return err
	}
	pos, err := f.ix.Positions()
	if err != nil {
		return err
	}
	cl, err := f.client(parts2map(parts), pos)
	if err != nil {
		return err
	}
	defer cl.Close()
	if caughtUp != nil {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			if f.waitCaughtUp(cctx) == nil {
				caughtUp()
			}
		}()
	}
	next := time.Now().Add(f.rediscoverIn(parts))
	gap := time.NewTimer(0)
	defer gap.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-gap.C:
		}
		polled := time.Now()
		pctx, cancel := context.WithTimeout(ctx, time.Until(next))
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		wait := time.Duration(0)
		if fs.NumRecords() > 0 && time.Since(polled) < feedGap {
			wait = feedGap
		}
		gap.Reset(wait) // no stale tick after Reset (Go 1.23 timers)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				f.log.Warn("trace index: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		if _, err := f.apply(fs); err != nil {
			return err
		}
		if time.Now().After(next) {
			next = time.Now().Add(f.rediscoverIn(parts))
			now, err := f.partitions(ctx)
			if err != nil {
				f.log.Warn("trace index: looking for new topics", "err", err)
				continue
			}
			add := map[string]map[int32]kgo.Offset{}
			for t, ps := range now {
				for _, p := range ps {
					if !contains(parts[t], p) {
						if add[t] == nil {
							add[t] = map[int32]kgo.Offset{}
						}
						add[t][p] = kgo.NewOffset().AtStart()
						parts[t] = append(parts[t], p)
					}
				}
			}
			if len(add) > 0 {
				cl.AddConsumePartitions(add)
			}
		}
	}
	return nil
}

// rediscoverIn is when to look for new topics: in a second while one of
// raw, outcomes, dlq and dlq-status is missing (a new environment), else in
// rediscover.
func (f *Feeder) rediscoverIn(parts map[string][]int32) time.Duration {
	n := f.ix.names
	for _, t := range []string{n.Raw, n.Outcomes, n.DLQ, n.DLQStatus} {
		if len(parts[t]) == 0 {
			return time.Second
		}
	}
	return rediscover
}

// waitCaughtUp polls the stored positions until every partition reached
// the end it had when called.
func (f *Feeder) waitCaughtUp(ctx context.Context) error {
	parts, err := f.partitions(ctx)
	if err != nil {
		return err
	}
	var names []string
	for t := range parts {
		names = append(names, t)
	}
	ends, err := f.adm.ListCommittedOffsets(ctx, names...)
	if err != nil {
		return err
	}
	for {
		pos, err := f.ix.Positions()
		if err != nil {
			return err
		}
		behind := false
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && o.Offset > 0 && pos[o.Topic][o.Partition] < o.Offset {
				behind = true
			}
		})
		if !behind {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// client makes the consumer: every partition of want from its stored
// position (the log start when none, or when it fell below the start).
func (f *Feeder) client(want map[string]map[int32]int64, pos map[string]map[int32]int64) (*kgo.Client, error) {
	assign := map[string]map[int32]kgo.Offset{}
	for t, ps := range want {
		assign[t] = map[int32]kgo.Offset{}
		for p := range ps {
			if at, ok := pos[t][p]; ok {
				assign[t][p] = kgo.NewOffset().At(at)
			} else {
				assign[t][p] = kgo.NewOffset().AtStart()
			}
		}
	}
	cl, err := f.newClient(
		kgo.ConsumePartitions(assign),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), // a position below the log start
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // so positions move past transaction markers
		// A fetch returns as soon as records arrive; the wait sets how
		// often an idle feed asks, and how late a topic found by
		// rediscovery is first fetched (AddConsumePartitions waits for the
		// fetch in flight).
		kgo.FetchMaxWait(2*time.Second),
		kgo.FetchMaxBytes(16<<20),
	)
	if err != nil {
		return nil, fmt.Errorf("trace: kafka client: %w", err)
	}
	return cl, nil
}

// apply writes one poll's records and the positions they reached; an
// empty fetch at a partition's end moves its position to the last stable
// offset (aborted writes before it are never delivered).
func (f *Feeder) apply(fs kgo.Fetches) ([]Position, error) {
	var recs []*kgo.Record
	var moved []Position
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Err != nil {
			return
		}
		if len(p.Records) == 0 {
			return
		}
		recs = append(recs, p.Records...)
		moved = append(moved, Position{Topic: p.Topic, Partition: p.Partition, Next: p.Records[len(p.Records)-1].Offset + 1})
	})
	if len(moved) == 0 {
		return nil, nil
	}
	if err := f.ix.Apply(recs, moved); err != nil {
		return nil, fmt.Errorf("trace index: write: %w", err)
	}
	return moved, nil
}

func parts2map(parts map[string][]int32) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for t, ps := range parts {
		out[t] = map[int32]int64{}
		for _, p := range ps {
			out[t][p] = 0
		}
	}
	return out
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func describe(want map[string]map[int32]int64) string {
	var out []string
	for t, ps := range want {
		for p, end := range ps {
			out = append(out, fmt.Sprintf("%s[%d] (end %d)", t, p, end))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
