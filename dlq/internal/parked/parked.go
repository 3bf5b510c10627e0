// Package parked answers "what waits?": the records parked in the retry
// tiers (webhooks.retry.<tier>, until their due time) and in the routes'
// lanes (webhooks.lane.<provider> for the route default,
// webhooks.lane.<provider>.<route> for another, until the destination has
// room), for `dlq parked` and GET /parked, and the oldest one per tier for
// the gauges of `dlq serve`. Lane topics are found by their prefix, and
// each is its route's (a provider name has no '.').
//
// What waits in a tier is what lies between the retrier group's committed
// offset and the partition's end; in a lane, what lies between the
// processor group's committed offset (its low-water mark) and the end. A
// read costs a fetch of those records (read_committed), not of the whole
// topics; Heads reads one record per partition.
package parked

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// TierLane is the tier name of every lane record: it waits for room, not
// for a time.
const TierLane = "lane"

// Record is one parked record.
type Record struct {
	// Tier is the retry tier ("1h") or "lane".
	Tier      string `json:"tier"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Provider  string `json:"provider"`
	// Route is the route it waits for: its lane's, or in a retry tier its
	// hookline.route header (the route default without one).
	Route     string `json:"route"`
	EventType string `json:"event_type"`
	// Attempt is the attempt it will be delivered as.
	Attempt int `json:"attempt"`
	// ParkedAt is when it was parked (the record's timestamp); DueAt when
	// it may be delivered again (retry tiers; empty for a lane); LastError
	// the last error of its history (retry tiers).
	ParkedAt  time.Time `json:"parked_at"`
	DueAt     string    `json:"due_at,omitempty"`
	LastError string    `json:"last_error,omitempty"`
}

// Count is how many records wait in one tier for one route of one
// provider, and since when.
type Count struct {
	Tier     string    `json:"tier"`
	Provider string    `json:"provider"`
	Route    string    `json:"route"`
	Records  int       `json:"records"`
	Oldest   time.Time `json:"oldest"`
}

// Report is `dlq parked --json`'s first line and GET /parked's answer.
type Report struct {
	Total  int     `json:"total"`
	Counts []Count `json:"counts"`
	// Oldest is the record parked longest (nil when none).
	Oldest *Record `json:"oldest"`
	// Records is one page of the listing, in due order (lanes by parked
	// time), starting at Offset, at most Limit.
	Records []Record `json:"records"`
	Offset  int      `json:"offset"`
	Limit   int      `json:"limit"`
	// Incomplete names partitions that could not be read to their end.
	Incomplete []string `json:"incomplete,omitempty"`
}

// Filter selects records; zero fields match all. Route takes that route
// of every provider, or of Provider.
type Filter struct{ Tier, Provider, Route string }

// match reports whether a record of provider and route passes f's
// provider and route.
func (f Filter) match(provider, route string) bool {
	return (f.Provider == "" || f.Provider == provider) && (f.Route == "" || f.Route == route)
}

// Lane reads a lane topic's name (without the topics prefix): provider
// and route ("stripe" is stripe's route default, "stripe.billing" its
// route billing); ok is false for a name that is no lane's.
func Lane(names topics.Names, topic string) (provider, route string, ok bool) {
	rest, ok := strings.CutPrefix(topic, names.Prefix+topics.BaseLanePrefix)
	if !ok || rest == "" {
		return "", "", false
	}
	provider, route, dotted := strings.Cut(rest, ".")
	if !dotted {
		return provider, headers.DefaultRoute, true
	}
	if provider == "" || control.CheckRoute(route) != nil {
		return "", "", false
	}
	return provider, route, true
}

// Reader reads parked records.
type Reader struct {
	Names     topics.Names
	NewClient func(...kgo.Opt) (*kgo.Client, error)
	Adm       *kadm.Client
	// Stall ends a read when nothing arrived for this long (5 s when 0).
	Stall time.Duration
}

// Span is [Start, End) of one partition: the offsets a scan reads.
type Span struct{ Start, End int64 }

// where lists, per parked topic, the spans that wait: from the owning
// group's committed offset (the log start when none) to the last stable
// offset.
func (rd *Reader) where(ctx context.Context, f Filter) (map[string]map[int32]Span, map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	td, err := rd.Adm.ListTopics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("parked: list topics: %w", err)
	}
	tierOf := map[string]string{}
	var retries, lanes []string
	for name, t := range td {
		if t.Err != nil {
			continue
		}
		if tier, ok := strings.CutPrefix(name, rd.Names.Prefix+topics.BaseRetryPrefix); ok && tier != "" {
			if f.Tier == "" || f.Tier == tier {
				tierOf[name], retries = tier, append(retries, name)
			}
		}
		if prov, route, ok := Lane(rd.Names, name); ok {
			if (f.Tier == "" || f.Tier == TierLane) && f.match(prov, route) {
				tierOf[name], lanes = TierLane, append(lanes, name)
			}
		}
	}
	out, err := rd.Waiting(ctx, map[string][]string{topics.GroupRetrier: retries, topics.GroupProcessor: lanes})
	return out, tierOf, err
}

// Waiting lists, for the topics of each group (topics.GroupRetrier,
// topics.GroupProcessor, without the prefix), the spans its consumer has
// not committed yet: from the group's committed offset (the log start when
// it has none) to the last stable offset. Partitions with nothing waiting
// are left out. Cost: three admin requests and one per group.
func (rd *Reader) Waiting(ctx context.Context, byGroup map[string][]string) (map[string]map[int32]Span, error) {
	var all []string
	for _, ts := range byGroup {
		all = append(all, ts...)
	}
	if len(all) == 0 {
		return nil, nil
	}
	starts, err := rd.Adm.ListStartOffsets(ctx, all...)
	if err != nil {
		return nil, fmt.Errorf("parked: start offsets: %w", err)
	}
	ends, err := rd.Adm.ListCommittedOffsets(ctx, all...)
	if err != nil {
		return nil, fmt.Errorf("parked: end offsets: %w", err)
	}
	committed := map[string]map[int32]int64{}
	for group, ts := range byGroup {
		if len(ts) == 0 {
			continue
		}
		offs, err := rd.Adm.FetchOffsetsForTopics(ctx, rd.Names.Group(group), ts...)
		if err != nil {
			return nil, fmt.Errorf("parked: committed offsets of %s: %w", rd.Names.Group(group), err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				if committed[o.Topic] == nil {
					committed[o.Topic] = map[int32]int64{}
				}
				committed[o.Topic][o.Partition] = o.At
			}
		})
	}
	out := map[string]map[int32]Span{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		start := int64(0)
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Err == nil {
			start = s.Offset
		}
		if c, ok := committed[o.Topic][o.Partition]; ok && c > start {
			start = c
		}
		if start < o.Offset {
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]Span{}
			}
			out[o.Topic][o.Partition] = Span{start, o.Offset}
		}
	})
	return out, nil
}

// Read reads every parked record f selects and returns the counts, the
// oldest and the page [offset, offset+limit) of the listing.
func (rd *Reader) Read(ctx context.Context, f Filter, offset, limit int) (Report, error) {
	spans, tierOf, err := rd.where(ctx, f)
	if err != nil {
		return Report{}, err
	}
	var recs []Record
	incomplete, err := rd.Scan(ctx, spans, false, func(r *kgo.Record) {
		rec := recordOf(rd.Names, r, tierOf[r.Topic])
		if f.match(rec.Provider, rec.Route) {
			recs = append(recs, rec)
		}
	})
	if err != nil {
		return Report{}, err
	}
	rep := Report{Total: len(recs), Counts: []Count{}, Records: []Record{}, Offset: offset, Limit: limit, Incomplete: incomplete}
	counts := map[[3]string]*Count{}
	for i := range recs {
		r := &recs[i]
		k := [3]string{r.Tier, r.Provider, r.Route}
		c, ok := counts[k]
		if !ok {
			c = &Count{Tier: r.Tier, Provider: r.Provider, Route: r.Route, Oldest: r.ParkedAt}
			counts[k] = c
		}
		c.Records++
		if r.ParkedAt.Before(c.Oldest) {
			c.Oldest = r.ParkedAt
		}
		if rep.Oldest == nil || r.ParkedAt.Before(rep.Oldest.ParkedAt) {
			rep.Oldest = r
		}
	}
	for _, c := range counts {
		rep.Counts = append(rep.Counts, *c)
	}
	slices.SortFunc(rep.Counts, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Route, b.Route))
	})
	if rep.Oldest != nil {
		o := *rep.Oldest
		rep.Oldest = &o
	}
	slices.SortStableFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.due(), b.due()), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	if offset < len(recs) {
		rep.Records = recs[offset:min(len(recs), offset+limit)]
	}
	return rep, nil
}

// due is when the record may go: its due time, or for a lane its parked
// time (lanes drain in order).
func (r Record) due() string {
	if r.DueAt != "" {
		return r.DueAt
	}
	return headers.FormatTime(r.ParkedAt)
}

// Heads returns, per tier (TierLane for every lane), the oldest record
// waiting: the first record after the committed offset of each partition
// (records enter a tier in due order and a lane in parked order).
func (rd *Reader) Heads(ctx context.Context) (map[string]time.Time, error) {
	spans, tierOf, err := rd.where(ctx, Filter{})
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, t := range tierOf {
		out[t] = time.Time{}
	}
	_, err = rd.Scan(ctx, spans, true, func(r *kgo.Record) {
		t := tierOf[r.Topic]
		if o := out[t]; o.IsZero() || r.Timestamp.Before(o) {
			out[t] = r.Timestamp.UTC()
		}
	})
	return out, err
}

// recordOf is the Record of r, read from a topic of tier: its route is its
// lane's, or (a retry tier) its hookline.route header's.
func recordOf(names topics.Names, r *kgo.Record, tier string) Record {
	rec := Record{Tier: tier, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key),
		Provider: headers.Value(r, headers.Provider), Route: control.RecordRoute(r), EventType: headers.Value(r, headers.EventType),
		ParkedAt: r.Timestamp.UTC(), DueAt: headers.Value(r, headers.DueAt)}
	if _, route, ok := Lane(names, r.Topic); ok && tier == TierLane {
		rec.Route = route
	}
	rec.Attempt, _ = headers.GetAttempt(r)
	if es, err := headers.GetErrors(r); err == nil && len(es) > 0 {
		rec.LastError = es[len(es)-1].Error
	}
	return rec
}

// Scan reads the committed records of spans (topic, partition, offsets);
// with first, only the first data record of each partition. It returns
// the partitions it could not finish (nothing arrived for the stall
// time). Cost: one consumer, a fetch of the spans.
func (rd *Reader) Scan(ctx context.Context, spans map[string]map[int32]Span, first bool, each func(*kgo.Record)) ([]string, error) {
	assign := map[string]map[int32]kgo.Offset{}
	left := 0
	for t, ps := range spans {
		assign[t] = map[int32]kgo.Offset{}
		for p, sp := range ps {
			assign[t][p] = kgo.NewOffset().At(sp.Start)
			left++
		}
	}
	if left == 0 {
		return nil, nil
	}
	stall := rd.Stall
	if stall <= 0 {
		stall = 5 * time.Second
	}
	cl, err := rd.NewClient(
		kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("parked: kafka client: %w", err)
	}
	defer cl.Close()
	done := map[string]map[int32]bool{}
	finish := func(t string, p int32) {
		if done[t] == nil {
			done[t] = map[int32]bool{}
		}
		if !done[t][p] {
			done[t][p] = true
			left--
			cl.PauseFetchPartitions(map[string][]int32{t: {p}})
		}
	}
	for left > 0 {
		pctx, cancel := context.WithTimeout(ctx, stall)
		fs := cl.PollFetches(pctx)
		stalled := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("parked: fetch %s[%d]: %w", t, p, err))
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		got := 0
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			sp := spans[fp.Topic][fp.Partition]
			for _, r := range fp.Records {
				if done[fp.Topic][fp.Partition] || r.Offset < sp.Start {
					continue
				}
				got++
				if r.Offset >= sp.End {
					finish(fp.Topic, fp.Partition)
					continue
				}
				if !r.Attrs.IsControl() {
					each(r)
					if first {
						finish(fp.Topic, fp.Partition)
						continue
					}
				}
				if r.Offset+1 >= sp.End {
					finish(fp.Topic, fp.Partition)
				}
			}
		})
		if got == 0 && stalled {
			var out []string
			for t, ps := range spans {
				for p := range ps {
					if !done[t][p] {
						out = append(out, fmt.Sprintf("%s[%d]", t, p))
					}
				}
			}
			slices.Sort(out)
			return out, nil
		}
	}
	return nil, nil
}
