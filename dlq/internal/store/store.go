package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// ErrNotFound is returned for a ref with no committed DLQ record.
var ErrNotFound = errors.New("no such DLQ entry")

// DefaultStall is how long a scan waits for a record before it gives up on
// the partitions it has not finished (see Config.Stall).
const DefaultStall = 5 * time.Second

// Config wires a Store.
type Config struct {
	Names topics.Names
	// NewClient makes a Kafka client with the connection options plus extra;
	// every scan gets its own consumer and closes it.
	NewClient func(extra ...kgo.Opt) (*kgo.Client, error)
	// Client makes admin requests and writes resolutions (acks=all,
	// idempotent).
	Client *kgo.Client
	// Stall ends a scan when no record arrived for this long (DefaultStall
	// when 0); see scan.
	Stall time.Duration
	// Warn receives what a scan could not finish; nil drops it.
	Warn func(string)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Store reads webhooks.dlq and webhooks.dlq-status and writes resolutions.
// Each read scans the topics afresh: cost is proportional to what they hold.
type Store struct {
	names     topics.Names
	newClient func(extra ...kgo.Opt) (*kgo.Client, error)
	cl        *kgo.Client
	adm       *kadm.Client
	stall     time.Duration
	warn      func(string)
	now       func() time.Time
}

// New returns a Store.
func New(c Config) *Store {
	s := &Store{names: c.Names, newClient: c.NewClient, cl: c.Client, adm: kadm.NewClient(c.Client), stall: c.Stall, warn: c.Warn, now: c.Now}
	if s.stall <= 0 {
		s.stall = DefaultStall
	}
	if s.warn == nil {
		s.warn = func(string) {}
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Names are the topics the store reads and writes.
func (s *Store) Names() topics.Names { return s.names }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Filter selects entries; zero fields match everything.
type Filter struct {
	Provider string
	// Route keeps the entries of that route (Entry.Route: "default" takes
	// those without a route header too), of any provider unless Provider
	// says which.
	Route  string
	Reason string
	Key    string
	// Since keeps entries dead-lettered at or after it.
	Since time.Time
	// Unresolved keeps entries without a resolution.
	Unresolved bool
}

// Match reports whether e passes the filter.
func (f Filter) Match(e *Entry) bool {
	switch {
	case f.Provider != "" && e.Header(headers.Provider) != f.Provider,
		f.Route != "" && e.Route() != f.Route,
		f.Reason != "" && e.Header(headers.DeadReason) != f.Reason,
		f.Key != "" && e.Key() != f.Key,
		!f.Since.IsZero() && e.DeadAt().Before(f.Since),
		f.Unresolved && e.Resolved():
		return false
	}
	return true
}

// List returns the entries f matches, newest first (by the time they were
// dead-lettered, then by ref). Bodies are kept only when bodies is true; the
// entries kept are held in memory.
func (s *Store) List(ctx context.Context, f Filter, bodies bool) ([]*Entry, error) {
	res, err := s.Resolutions(ctx)
	if err != nil {
		return nil, err
	}
	spans, err := s.bounds(ctx, s.names.DLQ)
	if err != nil {
		return nil, err
	}
	var out []*Entry
	err = s.scan(ctx, s.names.DLQ, spans, func(r *kgo.Record) {
		e := entry(r, bodies)
		if rs, ok := res[e.Ref]; ok {
			e.Resolution = &rs
		}
		if f.Match(e) {
			out = append(out, e)
		}
	})
	if err != nil {
		return nil, err
	}
	SortNewestFirst(out)
	return out, nil
}

// SortNewestFirst orders entries by dead-letter time, newest first, then by
// ref, highest first.
func SortNewestFirst(es []*Entry) {
	slices.SortStableFunc(es, func(a, b *Entry) int {
		if c := b.DeadAt().Compare(a.DeadAt()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Ref.Partition, a.Ref.Partition); c != 0 {
			return c
		}
		return cmp.Compare(b.Ref.Offset, a.Ref.Offset)
	})
}

func entry(r *kgo.Record, body bool) *Entry {
	e := &Entry{Ref: Ref{Partition: r.Partition, Offset: r.Offset}, Record: r, BodyBytes: len(r.Value)}
	if !body {
		r.Value = nil
	}
	return e
}

// Get reads the DLQ record at ref, with its body and resolution. It returns
// an error wrapping ErrNotFound when the partition does not exist, the
// offset is outside what the partition holds now, or no committed record sits
// at it (a transaction marker or an aborted write).
func (s *Store) Get(ctx context.Context, ref Ref) (*Entry, error) {
	es, err := s.getAll(ctx, []Ref{ref})
	if err != nil {
		return nil, err
	}
	return es[0], nil
}

// getAll reads the entries at refs (in that order) with their bodies and
// resolutions: the topic's bounds and the resolutions are read once, then
// one short read per ref.
func (s *Store) getAll(ctx context.Context, refs []Ref) ([]*Entry, error) {
	spans, err := s.bounds(ctx, s.names.DLQ)
	if err != nil {
		return nil, err
	}
	out := make([]*Entry, 0, len(refs))
	for _, ref := range refs {
		e, err := s.read(ctx, spans, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	res, err := s.Resolutions(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range out {
		if rs, ok := res[e.Ref]; ok {
			e.Resolution = &rs
		}
	}
	return out, nil
}

// RawRecord reads the webhooks.raw record at ref (partition:offset), for
// a tool that takes a stored delivery as input (dlq rules test
// --from-raw). Errors wrap ErrNotFound as Get's do.
func (s *Store) RawRecord(ctx context.Context, ref Ref) (*kgo.Record, error) {
	spans, err := s.bounds(ctx, s.names.Raw)
	if err != nil {
		return nil, err
	}
	e, err := s.readAt(ctx, s.names.Raw, spans, ref)
	if err != nil {
		return nil, err
	}
	return e.Record, nil
}

// read reads the one DLQ record at ref, within spans.
func (s *Store) read(ctx context.Context, spans map[int32]span, ref Ref) (*Entry, error) {
	return s.readAt(ctx, s.names.DLQ, spans, ref)
}

// readAt reads the one record of topic at ref, within spans.
func (s *Store) readAt(ctx context.Context, topic string, spans map[int32]span, ref Ref) (*Entry, error) {
	sp, ok := spans[ref.Partition]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: %w: %s has no partition %d", ref, ErrNotFound, topic, ref.Partition)
	case ref.Offset < sp.start:
		return nil, fmt.Errorf("%s: %w: partition %d starts at offset %d now (older records are past retention)", ref, ErrNotFound, ref.Partition, sp.start)
	case ref.Offset >= sp.end:
		return nil, fmt.Errorf("%s: %w: partition %d ends at offset %d", ref, ErrNotFound, ref.Partition, sp.end)
	}
	var found *Entry
	err := s.scan(ctx, topic, map[int32]span{ref.Partition: {start: ref.Offset, end: ref.Offset + 1}}, func(r *kgo.Record) {
		if r.Offset == ref.Offset {
			found = entry(r, true)
		}
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("%s: %w: no committed record at that offset", ref, ErrNotFound)
	}
	return found, nil
}

// Resolutions reads webhooks.dlq-status: the latest resolution per ref. A
// missing topic is no resolution; a value that is not a resolution is
// skipped with a warning.
func (s *Store) Resolutions(ctx context.Context) (map[Ref]Resolution, error) {
	out := map[Ref]Resolution{}
	spans, err := s.bounds(ctx, s.names.DLQStatus)
	if errors.Is(err, ErrNoTopic) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, s.names.DLQStatus, spans, func(r *kgo.Record) {
		ref, rs, err := parseResolution(r)
		switch {
		case err != nil:
			s.warn(fmt.Sprintf("%s %d:%d: %v, skipped", s.names.DLQStatus, r.Partition, r.Offset, err))
		case rs == nil: // tombstone: the resolution was withdrawn
			delete(out, ref)
		default:
			out[ref] = *rs
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Resolve writes a resolution to webhooks.dlq-status and waits for the ack.
func (s *Store) Resolve(ctx context.Context, rs Resolution) error {
	v, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	if err := s.cl.ProduceSync(ctx, ResolutionRecord(s.names.DLQStatus, rs, v)).FirstErr(); err != nil {
		return fmt.Errorf("write resolution of %s to %s: %w", rs.Ref, s.names.DLQStatus, err)
	}
	return nil
}

// ResolutionRecord is the webhooks.dlq-status record of rs, whose JSON is v.
func ResolutionRecord(topic string, rs Resolution, v []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(rs.Ref), Value: v}
}

// Selection is what a replay takes: explicit refs, or every entry a filter
// matches.
type Selection struct {
	// Refs, when set, are replayed whatever their resolution.
	Refs []Ref
	// Filter selects entries when Refs is empty; unresolved ones only unless
	// IncludeResolved. A filter selects by key or provider, or All.
	Filter          Filter
	All             bool
	IncludeResolved bool
}

// Validate checks a replay's selection by the rules the CLI (dlq replay)
// and the API (POST /dlq/replay) share: refs, or a selection (a key, a
// provider, or all, narrowed by route, reason and since, resolved entries
// too with include-resolved), not both; all with neither key nor
// provider.
func (sel Selection) Validate() error {
	f := sel.Filter
	selecting := f.Key != "" || f.Provider != "" || sel.All
	switch {
	case len(sel.Refs) > 0 && (selecting || f.Route != "" || f.Reason != "" || !f.Since.IsZero() || sel.IncludeResolved):
		return errors.New("replay takes either refs or a selection (key, provider or all, with route, reason, since, include-resolved), not both")
	case len(sel.Refs) == 0 && !selecting:
		return errors.New("replay needs refs (<partition>:<offset>...), a key, a provider or all")
	case sel.All && (f.Key != "" || f.Provider != ""):
		return errors.New("all replays every entry: drop it, or drop key and provider")
	}
	return nil
}

// Select reads the entries of a selection with their bodies, in ref order
// (per partition, the order they were dead-lettered in, so the records of
// one key are replayed in their original order). A ref that does not exist
// is an error wrapping ErrNotFound, before anything is selected.
func (s *Store) Select(ctx context.Context, sel Selection) ([]*Entry, error) {
	var out []*Entry
	if len(sel.Refs) > 0 {
		var refs []Ref
		seen := map[Ref]bool{}
		for _, ref := range sel.Refs {
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
		var err error
		if out, err = s.getAll(ctx, refs); err != nil {
			return nil, err
		}
	} else {
		f := sel.Filter
		f.Unresolved = !sel.IncludeResolved
		var err error
		if out, err = s.List(ctx, f, true); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b *Entry) int {
		if a.Ref.Less(b.Ref) {
			return -1
		}
		if b.Ref.Less(a.Ref) {
			return 1
		}
		return 0
	})
	return out, nil
}

// EnsureStatusTopic creates webhooks.dlq-status when it is missing, compacted
// and with as many partitions as webhooks.dlq (which must exist), and
// refuses an existing one with another shape (topics.Ensure).
//
// It runs on a client of its own (one connection and one metadata request
// more per call), never on the producing one: topics.Ensure purges the
// topic from the client it is given, which for a producer also forgets the
// topic's sequence numbers, and the broker then discards the next records
// to a partition already written as duplicates while acknowledging them.
// `dlq serve` calls this before every replay and resolve: on the shared
// client, every resolution after a partition's first was lost.
func (s *Store) EnsureStatusTopic(ctx context.Context, replication int16) error {
	spans, err := s.bounds(ctx, s.names.DLQ)
	if err != nil {
		return err
	}
	for _, spec := range s.names.Specs(topics.Shape{Partitions: int32(len(spans))}) {
		if spec.Name == s.names.DLQStatus {
			cl, err := s.newClient()
			if err != nil {
				return fmt.Errorf("kafka client: %w", err)
			}
			defer cl.Close()
			return topics.Ensure(ctx, cl, []topics.Spec{spec}, replication)
		}
	}
	return fmt.Errorf("no spec for %s", s.names.DLQStatus)
}
