// Package trace is the index behind `dlq trace KEY` and `GET /events/{key}`,
// and behind `dlq events` and `GET /events` (list.go: every outcome as a
// row, newest first, found by provider, route, event type and status):
// every record of a key on webhooks.raw, webhooks.outcomes, the retry tiers
// and webhooks.dlq, with the resolutions of webhooks.dlq-status, kept in a
// Badger directory so that a key's path is one prefix read whatever the
// topics hold.
//
// What feeds it: a Feeder reads those topics (read_committed, assign mode,
// no consumer group) and writes, per record, one small entry keyed by the
// idempotency key, the record's time and its position, together with the
// position it reached in each partition (one Badger write batch per poll).
// After a restart it reads on from the stored positions; a partition never
// read, or whose stored position fell below the log start (retention),
// starts at the log start. An entry's key names its record, so reading a
// record twice (a crash between the entries and the positions) writes the
// same entry again. Entries expire after Options.Retention (Badger TTL), so
// the index stays the size of the topics' retention.
package trace

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/badgerdb"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/topics"
)

// DefaultRetention is how long an entry stays in the index unless
// Options.Retention says otherwise: the DLQ's default retention
// (topics.DefaultDLQRetention, 30 days), the longest of the topics it reads.
const DefaultRetention = topics.DefaultDLQRetention

// Entry key prefixes.
const (
	pEvent      = 'e' // e | uvarint len(key) | key | micros(8) | rank(1) | fnv32(topic)(4) | partition(4) | offset(8)
	pDead       = 'd' // d | ref: DeadLetter
	pResolution = 's' // s | ref: store.Resolution
	pPosition   = 'o' // o | topic | 0 | partition(4): next offset(8)
)

// Options open an Index.
type Options struct {
	// Dir holds the Badger files; InMemory keeps them in memory (tests).
	Dir      string
	InMemory bool
	Names    topics.Names
	// Retention is how long entries live: the DLQ topic's retention
	// (HOOKLINE_DLQ_RETENTION), DefaultRetention when 0.
	Retention time.Duration
	Logger    *slog.Logger
	// compactCheck, when above zero, replaces badgerdb.IdleCheck (tests).
	compactCheck time.Duration
}

// Index is the trace index. Safe for concurrent use: one Feeder writes,
// any number of readers read.
type Index struct {
	db *badger.DB
	// idle stops Badger's compactors while nothing reads or writes (see
	// use).
	idle      *badgerdb.Idle
	names     topics.Names
	retention time.Duration
	// listBudget is ListBudget (tests make it smaller).
	listBudget int
}

// Open opens (or creates) the index. Badger is tuned small, like the
// processor's state store: 16 MiB memtables, 16 MiB block cache. A
// directory another process (dlq serve) holds is badgerdb.ErrHeld.
func Open(o Options) (*Index, error) {
	opts := badger.DefaultOptions(o.Dir)
	if o.InMemory {
		opts = badger.DefaultOptions("").WithInMemory(true)
	}
	opts = opts.
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithSyncWrites(false).
		WithCompression(options.Snappy)
	db, err := badgerdb.Open(opts, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("trace index %s: %w", o.Dir, err)
	}
	r := o.Retention
	if r <= 0 {
		r = DefaultRetention
	}
	ix := &Index{db: db, idle: badgerdb.NewIdle(db), names: o.Names, retention: r, listBudget: ListBudget}
	start := time.Now()
	n, err := ix.migrateList()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("trace index %s: events list: %w", o.Dir, err)
	}
	// Badger's two compactors wake every 50 ms whether or not there is
	// work, most of an idle `dlq serve`'s wake-ups (docs/performance.md):
	// stopped once the index is unused (2-3 s), started again by use.
	every := badgerdb.IdleCheck
	if o.compactCheck > 0 {
		every = o.compactCheck
	}
	ix.idle.Start(every, badgerdb.IdleQuiet, nil)
	if n > 0 && o.Logger != nil {
		o.Logger.Info("trace index: events list built from the outcomes it held", "rows", n, "took", time.Since(start).String())
	}
	return ix, nil
}

// use returns the DB for a read or write, its compactors started first if
// they were stopped for idleness. Cost: an atomic add and load.
func (ix *Index) use() *badger.DB {
	ix.idle.Use()
	return ix.db
}

// Close stops the idleness check and closes the Badger files.
func (ix *Index) Close() error {
	ix.idle.Close()
	return ix.db.Close()
}

// Event is one step of a key's path: a record of one of the topics.
type Event struct {
	// At is when it happened: the outcome's time for an outcome, the
	// record's timestamp otherwise.
	At time.Time `json:"at"`
	// Kind: accepted (ingest put it on webhooks.raw), retried (the retrier
	// put it back), replayed (a replay: dlq replay or auto-redrive),
	// outcome (what the processor did: Status), waiting (in a retry tier
	// until DueAt), dead_letter (a DLQ entry, Ref).
	Kind      string `json:"kind"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Provider  string `json:"provider,omitempty"`
	// Route is the route the step is for (providers file): an outcome's
	// route, or the hookline.route of a retried or replayed record, a
	// tier's record or a DLQ entry, "default" where it names none. Empty
	// on a step of the whole key: a delivery ingest accepted (for every
	// route it matches), a duplicate, an unrouted or suppressed outcome.
	Route     string `json:"route,omitempty"`
	EventType string `json:"event_type,omitempty"`
	Origin    string `json:"origin,omitempty"`
	// Attempt is the attempt the record is for (for waiting: the attempt
	// it will be delivered as).
	Attempt    int    `json:"attempt,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	ReceivedAt string `json:"received_at,omitempty"`
	ReplayID   string `json:"replay_id,omitempty"`
	// Status, Error, DurationMS, Lane: an outcome's (Lane also when the
	// record was read from its lane).
	Status     string `json:"status,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	Lane       string `json:"lane,omitempty"`
	// Tier and DueAt: a retry tier's record (Tier also on a retrying outcome).
	Tier  string `json:"tier,omitempty"`
	DueAt string `json:"due_at,omitempty"`
	// RetryAfter: a retry tier's record, the date the destination's
	// Retry-After named (hookline.retry-after): why it waits until DueAt.
	RetryAfter string `json:"retry_after,omitempty"`
	// Ref, Reason, Errors: a DLQ entry's ref, dead reason and error count;
	// Resolution its resolution when the trace was read.
	Ref        string            `json:"ref,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	Errors     int               `json:"errors,omitempty"`
	Resolution *store.Resolution `json:"resolution,omitempty"`
	// ReplayOf: a suppressed outcome's (ingest took the delivery for a
	// replay of the one with this key).
	ReplayOf string `json:"replay_of,omitempty"`
	// TraceID is the step's W3C trace id, when tracing was on: an
	// outcome's trace_id (its attempt's trace), or the trace of a record's
	// traceparent header; empty otherwise.
	TraceID string `json:"trace_id,omitempty"`
	// Transform, TransformSHA256 and TransformSkipped: an outcome's, for
	// a route with a transform (the script, its content's hash, and
	// whether it skipped the event).
	Transform        string `json:"transform,omitempty"`
	TransformSHA256  string `json:"transform_sha256,omitempty"`
	TransformSkipped bool   `json:"transform_skipped,omitempty"`
}

// Event kinds.
const (
	KindAccepted   = "accepted"
	KindRetried    = "retried"
	KindReplayed   = "replayed"
	KindBackfilled = "backfilled"
	KindOutcome    = "outcome"
	KindWaiting    = "waiting"
	KindDeadLetter = "dead_letter"
)

// DeadLetter is what the index keeps of each DLQ entry (for re-drive).
type DeadLetter struct {
	Ref      string `json:"ref"`
	Key      string `json:"key"`
	Provider string `json:"provider"`
	// Route is the entry's route; empty in what an index kept before
	// routes, which is the route default (control.RouteOr).
	Route  string    `json:"route,omitempty"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// ReplayID is set when the entry is itself a replay that failed again:
	// dlq:<ref of the entry replayed>.
	ReplayID string `json:"replay_id,omitempty"`
}

// topicKind says what a topic is to the index: raw, outcomes, a retry tier
// (with its name), dlq, dlq-status; "" for a topic it does not read.
func (ix *Index) topicKind(topic string) (kind, tier string) {
	switch topic {
	case ix.names.Raw:
		return "raw", ""
	case ix.names.Outcomes:
		return "outcomes", ""
	case ix.names.DLQ:
		return "dlq", ""
	case ix.names.DLQStatus:
		return "status", ""
	}
	if t, ok := strings.CutPrefix(topic, ix.names.Prefix+topics.BaseRetryPrefix); ok && t != "" {
		return "retry", t
	}
	return "", ""
}

// Reads reports whether the index reads topic.
func (ix *Index) Reads(topic string) bool { k, _ := ix.topicKind(topic); return k != "" }

// eventOf turns a record into its event; ok is false for a record that
// gives none (a resolution, a record without a key).
func (ix *Index) eventOf(r *kgo.Record) (Event, bool) {
	kind, tier := ix.topicKind(r.Topic)
	if len(r.Key) == 0 || kind == "" || kind == "status" {
		return Event{}, false
	}
	h := func(n string) string { return headers.Value(r, n) }
	ev := Event{At: r.Timestamp.UTC(), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Provider: h(headers.Provider), Route: h(headers.Route), EventType: h(headers.EventType), Origin: h(headers.Origin), ReplayID: h(headers.ReplayID)}
	ev.Attempt, _ = headers.GetAttempt(r)
	ev.TraceID = headers.TraceID(r)
	switch kind {
	case "raw":
		ev.RequestID, ev.ReceivedAt = h(headers.RequestID), h(headers.ReceivedAt)
		switch ev.Origin {
		case headers.OriginRetry:
			ev.Kind = KindRetried
		case headers.OriginReplay:
			ev.Kind = KindReplayed
		case headers.OriginBackfill:
			ev.Kind = KindBackfilled
		default:
			ev.Kind = KindAccepted
		}
	case "outcomes":
		o, err := outcome.Decode(r.Value)
		if err != nil {
			ev.Kind, ev.Status, ev.Error = KindOutcome, statusUnreadable, "outcome record: "+err.Error()
			ev.routed()
			return ev, true
		}
		ev.Kind, ev.Status, ev.Attempt, ev.Origin, ev.DurationMS, ev.Error = KindOutcome, o.Status, o.Attempt, o.Origin, o.DurationMS, o.Error
		ev.Tier, ev.Reason, ev.ReplayID, ev.Lane, ev.Provider, ev.EventType = o.Tier, o.DeadReason, o.ReplayID, o.Lane, o.Provider, o.EventType
		ev.Route, ev.ReplayOf, ev.TraceID = o.Route, o.ReplayOf, o.TraceID
		ev.Transform, ev.TransformSHA256, ev.TransformSkipped = o.Transform, o.TransformSHA256, o.TransformSkipped
		if t, err := headers.ParseTime(o.Time); err == nil {
			ev.At = t
		}
	case "retry":
		ev.Kind, ev.Tier, ev.DueAt, ev.RetryAfter = KindWaiting, tier, h(headers.DueAt), h(headers.RetryAfter)
		if es, err := headers.GetErrors(r); err == nil && len(es) > 0 {
			ev.Errors, ev.Error = len(es), es[len(es)-1].Error
		}
	case "dlq":
		ev.Kind, ev.Ref, ev.Reason = KindDeadLetter, store.Ref{Partition: r.Partition, Offset: r.Offset}.String(), h(headers.DeadReason)
		if es, err := headers.GetErrors(r); err == nil && len(es) > 0 {
			ev.Errors, ev.Error = len(es), es[len(es)-1].Error
		}
	}
	ev.routed()
	return ev, true
}

// routed sets the event's route as Event.Route says: none on a step of
// the whole key, the route default on a step of a route that names none
// (written before routes, or by a version that leaves the default out).
// Events read back from an index written before routes get theirs so too.
func (ev *Event) routed() {
	switch {
	case ev.Kind == KindAccepted,
		ev.Kind == KindOutcome && (ev.Status == outcome.StatusDuplicate || ev.Status == outcome.StatusUnrouted || ev.Status == outcome.StatusSuppressed || ev.Status == statusUnreadable):
		ev.Route = ""
	default:
		ev.Route = control.RouteOr(ev.Route)
	}
}

// statusUnreadable is the status of an outcome step whose record is not
// an outcome.
const statusUnreadable = "unreadable"

// rank orders events of one instant: arrivals, then outcomes, then where
// the record went.
func rank(kind string) byte {
	switch kind {
	case KindAccepted, KindRetried, KindReplayed, KindBackfilled:
		return 0
	case KindOutcome:
		return 1
	}
	return 2
}

func keyPrefix(key string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(key))
	b = append(b, pEvent)
	b = binary.AppendUvarint(b, uint64(len(key)))
	return append(b, key...)
}

func eventKey(key string, ev Event) []byte {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ev.Topic))
	b := keyPrefix(key)
	b = binary.BigEndian.AppendUint64(b, uint64(ev.At.UnixMicro()))
	b = append(b, rank(ev.Kind))
	b = binary.BigEndian.AppendUint32(b, h.Sum32())
	b = binary.BigEndian.AppendUint32(b, uint32(ev.Partition))
	return binary.BigEndian.AppendUint64(b, uint64(ev.Offset))
}

func positionKey(topic string, p int32) []byte {
	b := append([]byte{pPosition}, topic...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(p))
}

func refKey(prefix byte, ref string) []byte { return append([]byte{prefix}, ref...) }

// Position is how far the index has read one partition: the next offset.
type Position struct {
	Topic     string
	Partition int32
	Next      int64
}

// Apply writes the entries of recs (records of the topics it reads, in
// offset order per partition; control records only move positions) and
// the positions, as one write batch. Records older than the retention
// are skipped.
func (ix *Index) Apply(recs []*kgo.Record, pos []Position) error {
	wb := ix.use().NewWriteBatch()
	defer wb.Cancel()
	if err := ix.entries(recs, wb.SetEntry, wb.Delete); err != nil {
		return err
	}
	for _, p := range pos {
		if err := wb.Set(positionKey(p.Topic, p.Partition), binary.BigEndian.AppendUint64(nil, uint64(p.Next))); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// entries makes the entries of recs, as Apply writes them: set for each
// entry written, del for each key deleted (a resolution withdrawn).
func (ix *Index) entries(recs []*kgo.Record, set setEntry, del func([]byte) error) error {
	cutoff := time.Now().Add(-ix.retention)
	expires := func(t time.Time) uint64 { return uint64(t.Add(ix.retention).Unix()) }
	for _, r := range recs {
		if r.Attrs.IsControl() || r.Timestamp.Before(cutoff) {
			continue
		}
		if kind, _ := ix.topicKind(r.Topic); kind == "status" {
			ref, err := store.ParseRef(string(r.Key))
			if err != nil {
				continue
			}
			k := refKey(pResolution, ref.String())
			if r.Value == nil {
				if err := del(k); err != nil {
					return err
				}
				continue
			}
			var rs store.Resolution
			if json.Unmarshal(r.Value, &rs) != nil || rs.Ref != ref.String() {
				continue
			}
			if err := set(badger.NewEntry(k, r.Value).WithMeta(0)); err != nil {
				return err
			}
			continue
		}
		ev, ok := ix.eventOf(r)
		if !ok {
			continue
		}
		v, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		e := badger.NewEntry(eventKey(string(r.Key), ev), v)
		e.ExpiresAt = expires(ev.At)
		if err := set(e); err != nil {
			return err
		}
		if err := listRow(set, string(r.Key), ev, e.ExpiresAt); err != nil {
			return err
		}
		if ev.Kind == KindDeadLetter {
			dl, _ := json.Marshal(DeadLetter{Ref: ev.Ref, Key: string(r.Key), Provider: ev.Provider, Route: ev.Route, Reason: ev.Reason, At: ev.At, ReplayID: ev.ReplayID})
			e := badger.NewEntry(refKey(pDead, ev.Ref), dl)
			e.ExpiresAt = expires(ev.At)
			if err := set(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Positions returns how far each partition was read.
func (ix *Index) Positions() (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	err := ix.use().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pPosition}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) < 6 || k[len(k)-5] != 0 {
				continue
			}
			topic, p := string(k[1:len(k)-5]), int32(binary.BigEndian.Uint32(k[len(k)-4:]))
			err := it.Item().Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("position of %s[%d]: %d bytes", topic, p, len(v))
				}
				if out[topic] == nil {
					out[topic] = map[int32]int64{}
				}
				out[topic][p] = int64(binary.BigEndian.Uint64(v))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// Events returns every event of key, in time order, DLQ entries with
// their resolutions. Cost: one prefix read of the key's entries.
func (ix *Index) Events(key string) ([]Event, error) {
	var out []Event
	err := ix.use().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: keyPrefix(key), PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var ev Event
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &ev) }); err != nil {
				return fmt.Errorf("trace index entry of %q: %w", key, err)
			}
			ev.routed()
			if ev.Kind == KindDeadLetter {
				rs, err := resolution(txn, ev.Ref)
				if err != nil {
					return err
				}
				ev.Resolution = rs
			}
			out = append(out, ev)
		}
		return nil
	})
	return out, err
}

func resolution(txn *badger.Txn, ref string) (*store.Resolution, error) {
	item, err := txn.Get(refKey(pResolution, ref))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs store.Resolution
	if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &rs) }); err != nil {
		return nil, fmt.Errorf("resolution of %s: %w", ref, err)
	}
	return &rs, nil
}

// Resolution returns the resolution of a DLQ entry, nil when none.
func (ix *Index) Resolution(ref string) (*store.Resolution, error) {
	var rs *store.Resolution
	err := ix.use().View(func(txn *badger.Txn) (err error) {
		rs, err = resolution(txn, ref)
		return err
	})
	return rs, err
}

// DeadLetter returns what the index knows of one DLQ entry.
func (ix *Index) DeadLetter(ref string) (DeadLetter, bool, error) {
	var dl DeadLetter
	found := false
	err := ix.use().View(func(txn *badger.Txn) error {
		item, err := txn.Get(refKey(pDead, ref))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &dl) })
	})
	return dl, found, err
}

// DeadLetters calls fn for every DLQ entry the index holds, in ref order,
// with its resolution; fn returning false stops. Cost: a read of every
// entry (tens of bytes each).
func (ix *Index) DeadLetters(ctx context.Context, fn func(DeadLetter, *store.Resolution) bool) error {
	return ix.use().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pDead}, PrefetchValues: true, PrefetchSize: 100})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			var dl DeadLetter
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &dl) }); err != nil {
				return err
			}
			rs, err := resolution(txn, dl.Ref)
			if err != nil {
				return err
			}
			if !fn(dl, rs) {
				return nil
			}
		}
		return nil
	})
}
