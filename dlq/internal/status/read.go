package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/topics"
)

// readTimeout bounds the admin requests of one reading.
const readTimeout = 30 * time.Second

// RawBacklog reads what the processor group has not processed of
// webhooks.raw: per partition its committed offset, the last stable
// offset and, where they differ, the timestamp of the record at the
// committed offset (the oldest unprocessed). Cost: the admin requests of
// parked.Reader.Waiting and one record fetched per lagging partition.
func RawBacklog(ctx context.Context, rd *parked.Reader, now time.Time) (Backlog, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	raw := rd.Names.Raw
	b := Backlog{Topic: raw, Group: rd.Names.Group(topics.GroupProcessor), Partitions: []Partition{}}
	spans, err := rd.Waiting(ctx, map[string][]string{topics.GroupProcessor: {raw}})
	if err != nil {
		return Backlog{}, nil, err
	}
	oldest := map[int32]time.Time{}
	incomplete, err := rd.Scan(ctx, spans, true, func(r *kgo.Record) { oldest[r.Partition] = r.Timestamp.UTC() })
	if err != nil {
		return Backlog{}, nil, err
	}
	for p, sp := range spans[raw] {
		part := Partition{Partition: p, Committed: sp.Start, End: sp.End, Lag: sp.End - sp.Start}
		if at, ok := oldest[p]; ok {
			part.OldestAt = &at
			if b.OldestAt == nil || at.Before(*b.OldestAt) {
				b.OldestAt = &at
			}
		}
		b.Lag += part.Lag
		b.Partitions = append(b.Partitions, part)
	}
	slices.SortFunc(b.Partitions, func(x, y Partition) int { return int(x.Partition - y.Partition) })
	if b.OldestAt != nil {
		b.OldestAgeSeconds = max(0, now.Sub(*b.OldestAt).Seconds())
	}
	return b, incomplete, nil
}

// Window reads the records of webhooks.raw and webhooks.outcomes stamped
// since `since`: the records ingest accepted by provider (hookline.origin
// ingest, or none) and the outcomes done by route. Cost: a fetch of those
// records, bodies included (raw).
func Window(ctx context.Context, rd *parked.Reader, since time.Time) (accepted map[string]int, done map[RouteKey]int, incomplete []string, err error) {
	actx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	ts := []string{rd.Names.Raw, rd.Names.Outcomes}
	from, err := rd.Adm.ListOffsetsAfterMilli(actx, since.UnixMilli(), ts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("status: offsets after %s: %w", headers.FormatTime(since), err)
	}
	ends, err := rd.Adm.ListCommittedOffsets(actx, ts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("status: end offsets: %w", err)
	}
	spans := map[string]map[int32]parked.Span{}
	ends.Each(func(o kadm.ListedOffset) {
		f, ok := from.Lookup(o.Topic, o.Partition)
		if o.Err != nil || !ok || f.Err != nil || f.Offset < 0 || f.Offset >= o.Offset {
			return
		}
		if spans[o.Topic] == nil {
			spans[o.Topic] = map[int32]parked.Span{}
		}
		spans[o.Topic][o.Partition] = parked.Span{Start: f.Offset, End: o.Offset}
	})
	accepted, done = map[string]int{}, map[RouteKey]int{}
	incomplete, err = rd.Scan(ctx, spans, false, func(r *kgo.Record) {
		if r.Timestamp.Before(since) {
			return
		}
		switch r.Topic {
		case rd.Names.Raw:
			if o := headers.Value(r, headers.Origin); o == "" || o == headers.OriginIngest {
				accepted[headers.Value(r, headers.Provider)]++
			}
		case rd.Names.Outcomes:
			if o, err := outcome.Decode(r.Value); err == nil && o.Status == outcome.StatusDone {
				done[RouteKey{o.Provider, control.RouteOr(o.Route)}]++
			}
		}
	})
	return accepted, done, incomplete, err
}

// Sources are the readings Collect makes; the CLI reads the control topic
// once, dlq serve hands what it follows.
type Sources struct {
	Reader *parked.Reader
	Store  *store.Store
	Known  settings.Known
	// Control gives the operators' settings by name and the processors'
	// reports (breakers, held entities).
	Control func(context.Context) (map[string]control.Setting, control.Reports, error)
	// HeldAfter is how long an entity may be held before the verdict says
	// degraded (HOOKLINE_HELD_ALERT_AFTER); 0 is DefaultHeldAfter.
	HeldAfter time.Duration
	// ProcessorMetrics are the processors' /metrics URLs
	// (HOOKLINE_PROCESSOR_METRICS): the source of in flight and completed;
	// none leaves them null. HTTP reads them (http.DefaultClient when nil).
	ProcessorMetrics []string
	HTTP             *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Collect makes every reading at once and builds the report over the
// window ending now. Cost: parked.Reader.Read, store.Store.List, Control,
// RawBacklog, Window and ProcessorMetrics, concurrently.
func Collect(ctx context.Context, src Sources, window time.Duration) (Report, error) {
	now := time.Now()
	if src.Now != nil {
		now = src.Now()
	}
	in := Inputs{Now: now, Window: window, Known: src.Known, HeldAfter: src.HeldAfter}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		parkedRp parked.Report
		rawInc   []string
		winInc   []string
	)
	run := func(what string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
				mu.Unlock()
			}
		}()
	}
	run("parked", func() (err error) {
		parkedRp, err = src.Reader.Read(ctx, parked.Filter{}, 0, math.MaxInt)
		return err
	})
	run("dlq", func() (err error) { in.DLQ, err = src.Store.List(ctx, store.Filter{}, false); return err })
	run("control", func() error {
		got, rs, err := src.Control(ctx)
		in.Settings, in.Breakers, in.Held, in.Trials = got, rs.Breakers, rs.Held, rs.Trials
		return err
	})
	run("raw backlog", func() (err error) { in.Raw, rawInc, err = RawBacklog(ctx, src.Reader, now); return err })
	run("window", func() (err error) {
		in.Accepted, in.Done, winInc, err = Window(ctx, src.Reader, now.Add(-window))
		return err
	})
	if len(src.ProcessorMetrics) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.Processors, in.Completed = ProcessorMetrics(ctx, cmp.Or(src.HTTP, http.DefaultClient), src.ProcessorMetrics)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Report{}, err
	}
	in.Parked = parkedRp.Records
	in.Incomplete = append(append(append([]string(nil), parkedRp.Incomplete...), rawInc...), winInc...)
	return Build(in), nil
}
