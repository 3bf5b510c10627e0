// Package backfill sends the deliveries webhooks.raw holds from a time
// range again, to one route of a provider: the route added since ("send
// the new CRM last week's invoices"), or one whose destination lost them
// ("the CRM lost Tuesday", mode again).
//
// A backfill record is the accepted record (exact key, body and headers)
// with hookline.origin=backfill, hookline.attempt=1, hookline.route naming
// the route, hookline.replay-id=backfill:<id> and hookline.backfill giving
// the mode, produced to webhooks.raw in the partition it was read from, so
// it meets its key's state and keeps the order ingest gave it. The
// processor decides it by that route's state only (decide.Admit): in mode
// missing it is delivered where the route has no live state for the key;
// in mode again also where the route is done, once per backfill id. So a
// backfill run twice, or resumed with its id, calls nobody twice, and it
// never changes what another route did.
package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
)

// Spec is one backfill.
type Spec struct {
	Provider *providers.Provider
	Route    *providers.Route
	// Since and Until bound the time ingest accepted the records (the
	// record timestamp): [Since, Until). A zero Until is the run's start.
	Since, Until time.Time
	// Events narrows the route's events further (--events).
	Events route.EventFilter
	// Again also re-delivers keys the route is done with, once per ID.
	Again bool
	// ID is the backfill's id (NewID): its records carry backfill:<ID>.
	ID string
	// Rate bounds the records produced per second; <= 0: as fast as Kafka
	// acknowledges.
	Rate float64
	// DryRun reads and counts; it produces nothing.
	DryRun bool
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckID reports whether id can name a backfill.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("backfill id %q: want 1 to 63 of a-z, 0-9 and -, starting with a letter or digit", id)
	}
	return nil
}

// NewID is a fresh backfill id: the time, then 4 hex digits of nanoseconds.
func NewID(now time.Time) string {
	now = now.UTC()
	return fmt.Sprintf("%s-%04x", now.Format("20060102-150405"), now.Nanosecond()&0xffff)
}

// ReplayID is the hookline.replay-id of a backfill's records.
func ReplayID(id string) string { return "backfill:" + id }

// Record builds the backfill of the accepted record src (pure): its key,
// body and headers (not ingest's hookline.invalid-payload verdict: the
// processor checks a backfill against its own schema), with origin backfill, attempt 1, the route, the
// backfill id and the mode set, in src's partition of topic.
func Record(topic string, src *kgo.Record, route, id string, again bool) *kgo.Record {
	out := &kgo.Record{Topic: topic, Partition: src.Partition, Key: slices.Clone(src.Key), Value: src.Value}
	for _, h := range src.Headers {
		if h.Key != headers.InvalidPayload { // the processor checks a backfill against its own schema
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
		}
	}
	mode := headers.BackfillMissing
	if again {
		mode = headers.BackfillAgain
	}
	headers.Set(out, headers.Origin, headers.OriginBackfill)
	headers.SetAttempt(out, 1)
	headers.Set(out, headers.Route, route)
	headers.Set(out, headers.ReplayID, ReplayID(id))
	headers.Set(out, headers.Backfill, mode)
	return out
}

// Matches reports whether the record r of webhooks.raw is one the spec
// backfills: accepted by ingest (not a retry, replay or backfill) for the
// provider, in the time range, of an event type Events takes, and going
// to the route (its events, where and filter). It returns the event type.
func (s *Spec) Matches(r *kgo.Record) (string, bool) {
	if o := headers.Value(r, headers.Origin); o != "" && o != headers.OriginIngest {
		return "", false
	}
	if headers.Value(r, headers.Provider) != s.Provider.Name || r.Timestamp.Before(s.Since) || !r.Timestamp.Before(s.Until) {
		return "", false
	}
	ev := headers.Value(r, headers.EventType)
	if !s.Events.Match(ev) || !s.Route.Matches(providers.RequestOf(r)) {
		return "", false
	}
	return ev, true
}

// Progress is a run's progress: offsets read of the range's total, records
// matched and produced.
type Progress struct {
	Read, Total           int64
	Matched, Sent, Failed int64
	Elapsed, ETA          time.Duration
	PerSecond             float64
}

// MarshalJSON writes the durations in seconds.
func (p Progress) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Read           int64   `json:"read"`
		Total          int64   `json:"total"`
		Matched        int64   `json:"matched"`
		Sent           int64   `json:"sent"`
		Failed         int64   `json:"failed"`
		ElapsedSeconds float64 `json:"elapsed_seconds"`
		ETASeconds     float64 `json:"eta_seconds"`
		PerSecond      float64 `json:"per_second"`
	}{p.Read, p.Total, p.Matched, p.Sent, p.Failed, p.Elapsed.Seconds(), p.ETA.Seconds(), p.PerSecond})
}

// Report is what a run did.
type Report struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Route    string `json:"route"`
	Mode     string `json:"mode"`
	DryRun   bool   `json:"dry_run"`
	// Since and Until are the range asked; AvailableFrom is the oldest
	// record webhooks.raw still holds (its retention bounds a backfill),
	// nil when the topic is empty.
	Since         time.Time  `json:"since"`
	Until         time.Time  `json:"until"`
	AvailableFrom *time.Time `json:"available_from,omitempty"`
	// Truncated: Since is older than AvailableFrom, so records accepted
	// between them are gone.
	Truncated bool `json:"truncated"`
	// Read counts the offsets of the range read (every provider's).
	Read int64 `json:"read"`
	// Matched counts the records the spec backfills, ByEventType per event
	// type ("" for none); First and Last are the oldest and newest of them.
	Matched     int64            `json:"matched"`
	ByEventType map[string]int64 `json:"by_event_type"`
	First       *time.Time       `json:"first,omitempty"`
	Last        *time.Time       `json:"last,omitempty"`
	// Sent counts the records Kafka acknowledged; Failed those it refused
	// (FirstError says why).
	Sent       int64  `json:"sent"`
	Failed     int64  `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
	// Incomplete names partitions that could not be read to the range's
	// end (nothing arrived for the reader's stall time).
	Incomplete []string `json:"incomplete,omitempty"`
	// Interrupted: the context ended before the range was read; resume
	// with the same id.
	Interrupted bool `json:"interrupted"`
}

// producer is the part of *kgo.Client a run produces with.
type producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
}

// Runner runs backfills from webhooks.raw.
type Runner struct {
	Reader *parked.Reader
	// Producer must place a record in its Partition
	// (kgo.ManualPartitioner) and be idempotent.
	Producer producer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Run reads the spec's range of webhooks.raw and produces the backfill of
// each record it matches, at most spec.Rate a second; progress, when set,
// is called about once a second and at the end. It returns after every
// produce it started was answered. An error is a failure to read; produce
// failures are counted in the report.
func (rn *Runner) Run(ctx context.Context, spec Spec, progress func(Progress)) (Report, error) {
	now := time.Now
	if rn.Now != nil {
		now = rn.Now
	}
	if spec.Until.IsZero() {
		spec.Until = now()
	}
	rep := Report{ID: spec.ID, Provider: spec.Provider.Name, Route: spec.Route.Name, Mode: headers.BackfillMissing, DryRun: spec.DryRun,
		Since: spec.Since.UTC(), Until: spec.Until.UTC(), ByEventType: map[string]int64{}}
	if spec.Again {
		rep.Mode = headers.BackfillAgain
	}
	if err := CheckID(spec.ID); err != nil {
		return rep, err
	}
	if !spec.Since.Before(spec.Until) {
		return rep, fmt.Errorf("the range is empty: --since %s is not before --until %s", rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339))
	}
	rg, err := rn.find(ctx, spec.Since, spec.Until)
	if err != nil {
		return rep, err
	}
	rep.AvailableFrom = rg.availableFrom
	rep.Truncated = rg.availableFrom != nil && spec.Since.Before(*rg.availableFrom)

	var lim *rate.Limiter
	if spec.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(spec.Rate), 1)
	}
	var read, matched, sent, failed atomic.Int64
	var errOnce sync.Once
	start := time.Now()
	snapshot := func() Progress {
		p := Progress{Read: read.Load(), Total: rg.total, Matched: matched.Load(), Sent: sent.Load(), Failed: failed.Load(), Elapsed: time.Since(start)}
		if secs := p.Elapsed.Seconds(); secs > 0 && p.Read > 0 {
			p.PerSecond = float64(p.Read) / secs
			if p.Read < p.Total {
				p.ETA = time.Duration(float64(p.Total-p.Read) / p.PerSecond * float64(time.Second))
			}
		}
		return p
	}
	stop := make(chan struct{})
	var ticking sync.WaitGroup
	if progress != nil {
		ticking.Add(1)
		go func() {
			defer ticking.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					progress(snapshot())
				}
			}
		}()
	}
	// Produces outlive ctx: what was handed to Kafka is answered and
	// counted, so an interrupted run says truly what it sent.
	prodCtx := context.WithoutCancel(ctx)
	var scanErr error
	pos := map[int32]int64{} // per partition, the offset after the last record read
	for p, sp := range rg.spans[rn.Reader.Names.Raw] {
		pos[p] = sp.Start
	}
	rep.Incomplete, scanErr = rn.Reader.Scan(ctx, rg.spans, false, func(r *kgo.Record) {
		read.Add(r.Offset + 1 - pos[r.Partition]) // the control records skipped before it too
		pos[r.Partition] = r.Offset + 1
		ev, ok := spec.Matches(r)
		if !ok || ctx.Err() != nil {
			return
		}
		matched.Add(1)
		rep.ByEventType[ev]++
		at := r.Timestamp.UTC()
		if rep.First == nil || at.Before(*rep.First) {
			rep.First = &at
		}
		if rep.Last == nil || at.After(*rep.Last) {
			rep.Last = &at
		}
		if spec.DryRun {
			return
		}
		if lim != nil && lim.Wait(ctx) != nil {
			return
		}
		rn.Producer.Produce(prodCtx, Record(r.Topic, r, spec.Route.Name, spec.ID, spec.Again), func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { rep.FirstError = err.Error() })
				return
			}
			sent.Add(1)
		})
	})
	if !spec.DryRun {
		if err := rn.Producer.Flush(prodCtx); err != nil {
			scanErr = errors.Join(scanErr, fmt.Errorf("flush: %w", err))
		}
	}
	close(stop)
	ticking.Wait()
	rep.Read, rep.Matched, rep.Sent, rep.Failed = read.Load(), matched.Load(), sent.Load(), failed.Load()
	if progress != nil {
		progress(snapshot())
	}
	if errors.Is(scanErr, context.Canceled) || errors.Is(scanErr, context.DeadlineExceeded) || ctx.Err() != nil {
		rep.Interrupted = true
		return rep, nil
	}
	return rep, scanErr
}

// EventTypes returns the report's event types in order, most records first.
func (r Report) EventTypes() []string {
	evs := slices.Collect(maps.Keys(r.ByEventType))
	slices.SortFunc(evs, func(a, b string) int {
		if d := r.ByEventType[b] - r.ByEventType[a]; d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		if a < b {
			return -1
		}
		return 1
	})
	return evs
}
