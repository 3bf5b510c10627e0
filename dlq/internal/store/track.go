package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Tally is what the DLQ holds at one moment, as a Tracker counts it: the
// numbers `dlq stats` prints as total, unresolved and oldest_unresolved.
type Tally struct {
	// Entries are the committed records of webhooks.dlq still in the topic
	// (from each partition's log start), resolved or not.
	Entries int
	// Unresolved are the entries without a resolution.
	Unresolved int
	// OldestUnresolved is the dead-letter time of the oldest unresolved
	// entry; zero when there is none.
	OldestUnresolved time.Time
	// At is when the tally was taken.
	At time.Time
}

// Track follows webhooks.dlq and webhooks.dlq-status with one read_committed
// consumer that stays at their ends, and calls publish with a Tally every
// interval once it has read both topics up to where they ended when it
// started (or nothing arrived for the store's stall time; what could not be
// read then is reported through Config.Warn). It returns nil when ctx is done,
// and an error only when it cannot start.
//
// Each record is read once, so a scrape never costs a scan. It keeps the
// dead-letter time of every entry and the ref of every resolution in memory
// (about 110 bytes for an entry and its resolution, measured with a
// million), drops those below the log start (retention) every interval, and
// counts the maps every interval (linear in the entries, no Kafka request).
func (s *Store) Track(ctx context.Context, interval time.Duration, publish func(Tally)) error {
	if interval <= 0 {
		return fmt.Errorf("track: interval %s must be positive", interval)
	}
	dlqEnds, err := s.bounds(ctx, s.names.DLQ)
	if err != nil {
		return err
	}
	statusEnds, err := s.bounds(ctx, s.names.DLQStatus)
	if errors.Is(err, ErrNoTopic) {
		statusEnds, err = nil, nil
	}
	if err != nil {
		return err
	}
	type tp struct {
		topic string
		p     int32
	}
	pending := map[tp]int64{} // where each partition ended at the start
	for p, sp := range dlqEnds {
		if sp.start < sp.end {
			pending[tp{s.names.DLQ, p}] = sp.end
		}
	}
	for p, sp := range statusEnds {
		if sp.start < sp.end {
			pending[tp{s.names.DLQStatus, p}] = sp.end
		}
	}
	cl, err := s.newClient(
		kgo.ConsumeTopics(s.names.DLQ, s.names.DLQStatus),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // so the position is seen to pass transaction markers
		// A fetch returns as soon as records arrive: the wait only sets
		// how often an idle tracker asks.
		kgo.FetchMaxWait(5*time.Second),
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()

	t := tracked{entries: map[Ref]int64{}, resolved: map[Ref]struct{}{}}
	caughtUp := len(pending) == 0
	lastRecord := time.Now()
	next := time.Now().Add(interval)
	for {
		wait := min(s.stall, time.Until(next))
		pctx, cancel := context.WithTimeout(ctx, max(wait, 10*time.Millisecond))
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				s.warn(fmt.Sprintf("dlq metrics: fetch %s[%d]: %v", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			lastRecord = time.Now()
			k := tp{r.Topic, r.Partition}
			if end, ok := pending[k]; ok && r.Offset+1 >= end {
				delete(pending, k)
			}
			if r.Attrs.IsControl() {
				return
			}
			if r.Topic == s.names.DLQ {
				t.entries[Ref{r.Partition, r.Offset}] = r.Timestamp.UnixMilli()
				return
			}
			ref, rs, err := parseResolution(r)
			switch {
			case err != nil:
				s.warn(fmt.Sprintf("%s %d:%d: %v, skipped", r.Topic, r.Partition, r.Offset, err))
			case rs == nil:
				delete(t.resolved, ref)
			default:
				t.resolved[ref] = struct{}{}
			}
		})
		if !caughtUp && len(pending) == 0 {
			caughtUp = true
		}
		if !caughtUp && time.Since(lastRecord) >= s.stall {
			caughtUp = true
			s.warn(fmt.Sprintf("dlq metrics: nothing arrived for %s with %d partitions not read to their end; counting what was read", s.stall, len(pending)))
		}
		if time.Now().Before(next) {
			continue
		}
		next = time.Now().Add(interval)
		if !caughtUp {
			continue
		}
		if err := s.prune(ctx, &t); err != nil {
			s.warn(fmt.Sprintf("dlq metrics: %v", err))
		}
		publish(t.tally(s.now()))
	}
}

// tracked is what Track holds: the dead-letter time (Unix ms) of each entry
// and the refs that have a resolution.
type tracked struct {
	entries  map[Ref]int64
	resolved map[Ref]struct{}
	starts   map[int32]int64 // the DLQ's log starts at the last prune
}

func (t *tracked) tally(now time.Time) Tally {
	tl := Tally{Entries: len(t.entries), At: now}
	var oldest int64
	for ref, ms := range t.entries {
		if _, ok := t.resolved[ref]; ok {
			continue
		}
		tl.Unresolved++
		if tl.Unresolved == 1 || ms < oldest {
			oldest = ms
		}
	}
	if tl.Unresolved > 0 {
		tl.OldestUnresolved = time.UnixMilli(oldest).UTC()
	}
	return tl
}

// prune drops the entries and resolutions below each DLQ partition's log
// start (one ListOffsets request; the maps are walked only when a start
// moved).
func (s *Store) prune(ctx context.Context, t *tracked) error {
	spans, err := s.bounds(ctx, s.names.DLQ)
	if err != nil {
		return err
	}
	moved := false
	for p, sp := range spans {
		if sp.start != t.starts[p] {
			moved = true
		}
	}
	if !moved {
		return nil
	}
	t.starts = map[int32]int64{}
	for p, sp := range spans {
		t.starts[p] = sp.start
	}
	for ref := range t.entries {
		if ref.Offset < t.starts[ref.Partition] {
			delete(t.entries, ref)
		}
	}
	for ref := range t.resolved {
		if ref.Offset < t.starts[ref.Partition] {
			delete(t.resolved, ref)
		}
	}
	return nil
}

// parseResolution reads one webhooks.dlq-status record: its ref, and its
// resolution (nil for a tombstone, which withdraws the ref's resolution).
func parseResolution(r *kgo.Record) (Ref, *Resolution, error) {
	ref, err := ParseRef(string(r.Key))
	if err != nil {
		return Ref{}, nil, fmt.Errorf("key %q is not a ref", r.Key)
	}
	if r.Value == nil {
		return ref, nil, nil
	}
	var rs Resolution
	if err := json.Unmarshal(r.Value, &rs); err != nil || rs.Ref != ref.String() {
		return Ref{}, nil, fmt.Errorf("value for %s is not a resolution of it", ref)
	}
	return ref, &rs, nil
}
