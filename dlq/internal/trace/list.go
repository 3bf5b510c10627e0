package trace

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookline/hookline/pkg/outcome"
)

// The events list (GET /events, dlq events) is a second view of the same
// index: one row per outcome record (every decision about a delivery the
// processor or ingest wrote on webhooks.outcomes), newest first, found by
// provider, route, event type, status and time without knowing the key.
//
// Layout. A row is written once, beside the outcome's entry of the key
// (Apply), and never changed; it expires with it. Its position is
//
//	pos = ^micros(8) | partition(4) | offset(8)
//
// (the outcome's time, inverted so that an ascending read is newest first,
// then where the record is on webhooks.outcomes, so equal times stay
// distinct and ordered). Entries:
//
//	l | pos                                  -> the row (Delivery, JSON)
//	f | field(1) | uvarint(len) | value | pos -> nothing (one per filter field)
//
// Cost model. Listing without a filter reads the l entries from a position
// on: a page is one seek and limit steps. A filter on one field reads that
// field's entries of that value (keys only) and looks up the rows they
// name. Several filters are intersected by a leapfrog join over their
// sorted entries (each stream moves to the largest position any other
// stream stands at: a few steps, or a seek when it is further), so a page
// costs about the rows returned plus the entries the streams pass over
// between matches, never a read of a row that does not match. A join that
// finds few matches far apart is bounded by ListBudget positions per
// request: the page then ends early with the cursor where it stopped.
// Writes: 5 entries per outcome, the row (about 270 B) and four field
// entries (about 30 B of key each), measured by BenchmarkEventsList.
const (
	pList  = 'l'
	pField = 'f'
	pMeta  = 'm'
)

// Filter fields of the list.
const (
	fieldProvider  = 'p'
	fieldRoute     = 'r'
	fieldEventType = 'e'
	fieldStatus    = 's'
)

// maxIndexedValue is the longest value a field entry keeps: a longer event
// type (providers send what they like) is indexed by its first bytes and
// the rows are checked for the whole value.
const maxIndexedValue = 128

// maxRowError is the longest error a row keeps (the trace has it whole).
const maxRowError = 300

// MaxListLimit is the most rows one page returns; DefaultListLimit the
// page without a limit.
const (
	MaxListLimit     = 500
	DefaultListLimit = 50
)

// ListBudget bounds the positions one page reads (see the cost model above).
const ListBudget = 100_000

// listVersion marks an index whose outcome entries all have their rows
// (older directories get them once, at Open).
var listVersion = []byte{pMeta, 'l', 'i', 's', 't', 1}

// Delivery is one row of the events list: one outcome of a delivery, what
// the processor (or ingest, for a suppressed delivery) decided for it.
type Delivery struct {
	At  time.Time `json:"at"`
	Key string    `json:"key"`
	// Provider, Route (empty on a decision for the whole key: duplicate,
	// unrouted, suppressed), EventType, Status (an outcome status).
	Provider   string `json:"provider"`
	Route      string `json:"route,omitempty"`
	EventType  string `json:"event_type,omitempty"`
	Status     string `json:"status"`
	Attempt    int    `json:"attempt,omitempty"`
	Origin     string `json:"origin,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	// Error, cut to 300 bytes (the trace has it whole); Tier, Lane, Reason
	// as in the trace's outcome step.
	Error  string `json:"error,omitempty"`
	Tier   string `json:"tier,omitempty"`
	Lane   string `json:"lane,omitempty"`
	Reason string `json:"reason,omitempty"`
	// TraceID is the outcome's trace id (OpenTelemetry), when it has one.
	TraceID string `json:"trace_id,omitempty"`
	// Partition and Offset: the outcome record on webhooks.outcomes.
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// ListFilter selects rows; empty fields select every value. Since and
// Until bound the outcome's time, both included.
type ListFilter struct {
	Provider, Route, EventType, Status string
	Since, Until                       time.Time
}

// ListPage is one page of the list, newest first.
type ListPage struct {
	Events []Delivery `json:"events"`
	// NextCursor continues after the last row (or, when the page ended at
	// ListBudget, after the last position read); empty when nothing older
	// matches.
	NextCursor string `json:"next_cursor"`
	Limit      int    `json:"limit"`
	// Seeks is what the page cost: index positions read (steps and seeks
	// of the join).
	Seeks int `json:"seeks"`
}

// ErrBadCursor is a cursor List did not write.
var ErrBadCursor = errors.New("cursor: not one this server gave")

const posLen = 20

func listPos(at time.Time, partition int32, offset int64) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, posLen), math.MaxUint64-uint64(at.UnixMicro()))
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	return binary.BigEndian.AppendUint64(b, uint64(offset))
}

func fieldPrefix(field byte, value string) []byte {
	if len(value) > maxIndexedValue {
		value = value[:maxIndexedValue]
	}
	b := make([]byte, 0, 2+binary.MaxVarintLen64+len(value)+posLen)
	b = append(b, pField, field)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

func cat(a, b []byte) []byte { return append(append(make([]byte, 0, len(a)+len(b)), a...), b...) }

// deliveryOf is the row of an outcome event of key.
func deliveryOf(key string, ev Event) Delivery {
	d := Delivery{At: ev.At.UTC(), Key: key, Provider: ev.Provider, Route: ev.Route, EventType: ev.EventType, Status: ev.Status,
		Attempt: ev.Attempt, Origin: ev.Origin, DurationMS: ev.DurationMS, Error: ev.Error, Tier: ev.Tier, Lane: ev.Lane,
		Reason: ev.Reason, TraceID: ev.TraceID, Partition: ev.Partition, Offset: ev.Offset}
	if len(d.Error) > maxRowError {
		d.Error = d.Error[:maxRowError]
	}
	return d
}

// setEntry is what a write batch and a migration both write with.
type setEntry func(*badger.Entry) error

// listRow writes the row of an outcome event and its field entries.
func listRow(set setEntry, key string, ev Event, expiresAt uint64) error {
	if ev.Kind != KindOutcome {
		return nil
	}
	d := deliveryOf(key, ev)
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	pos := listPos(d.At, d.Partition, d.Offset)
	e := badger.NewEntry(cat([]byte{pList}, pos), v)
	e.ExpiresAt = expiresAt
	if err := set(e); err != nil {
		return err
	}
	for _, f := range []struct {
		field byte
		value string
	}{{fieldProvider, d.Provider}, {fieldRoute, d.Route}, {fieldEventType, d.EventType}, {fieldStatus, d.Status}} {
		if f.value == "" {
			continue
		}
		e := badger.NewEntry(cat(fieldPrefix(f.field, f.value), pos), nil)
		e.ExpiresAt = expiresAt
		if err := set(e); err != nil {
			return err
		}
	}
	return nil
}

// migrateList gives every outcome entry of an index written before the
// list its row, once (listVersion marks it done). Cost: a read of every
// entry's key and of each outcome's value, at the first Open after the
// upgrade (about 25 s of CPU a million outcomes on this project's machine).
func (ix *Index) migrateList() (int, error) {
	done := false
	if err := ix.use().View(func(txn *badger.Txn) error {
		_, err := txn.Get(listVersion)
		if err == nil {
			done = true
			return nil
		}
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		return err
	}); err != nil || done {
		return 0, err
	}
	wb := ix.use().NewWriteBatch()
	defer wb.Cancel()
	n := 0
	err := ix.use().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pEvent}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			l, w := binary.Uvarint(k[1:])
			if w <= 0 || 1+w+int(l) > len(k) {
				continue
			}
			// The rank byte after the key and the time says an outcome
			// (eventKey): other entries are passed over unread.
			if r := 1 + w + int(l) + 8; r >= len(k) || k[r] != rank(KindOutcome) {
				continue
			}
			key := string(k[1+w : 1+w+int(l)])
			var ev Event
			if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &ev) }); err != nil {
				continue
			}
			if ev.Kind != KindOutcome {
				continue
			}
			ev.routed()
			if err := listRow(wb.SetEntry, key, ev, item.ExpiresAt()); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := wb.Set(listVersion, nil); err != nil {
		return n, err
	}
	return n, wb.Flush()
}

// nextSteps is how many entries a stream steps through before it seeks:
// in a join the next entry at or past target is most often a step or two
// away, and a step is cheaper than a seek (which repositions every level
// of the LSM tree).
const nextSteps = 4

// moveTo moves a stream to its first entry at or past target and returns
// the positions it read.
func moveTo(it *badger.Iterator, prefix, target []byte, started bool) int {
	n := 0
	if started {
		for ; n < nextSteps && it.Valid(); n++ {
			if bytes.Compare(it.Item().Key()[len(prefix):], target) >= 0 {
				return max(n, 1)
			}
			it.Next()
		}
		if !it.Valid() {
			return max(n, 1)
		}
		if bytes.Compare(it.Item().Key()[len(prefix):], target) >= 0 {
			return n + 1
		}
	}
	it.Seek(cat(prefix, target))
	return n + 1
}

// row reads the row at pos: the stream's value when the stream is the
// rows, else a lookup (ok false when it expired meanwhile).
func row(txn *badger.Txn, it *badger.Iterator, rows bool, pos []byte) (Delivery, bool, error) {
	var d Delivery
	item := it.Item()
	if !rows {
		var err error
		item, err = txn.Get(cat([]byte{pList}, pos))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return d, false, nil
		}
		if err != nil {
			return d, false, err
		}
	}
	if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &d) }); err != nil {
		return d, false, fmt.Errorf("events list row: %w", err)
	}
	return d, true, nil
}

// EncodeCursor and DecodeCursor turn a position into the opaque cursor of
// the API and back.
func encodeCursor(pos []byte) string { return base64.RawURLEncoding.EncodeToString(pos) }

func decodeCursor(c string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != posLen {
		return nil, fmt.Errorf("%q: %w", c, ErrBadCursor)
	}
	return b, nil
}

// after is the smallest position greater than pos.
func after(pos []byte) []byte { return append(bytes.Clone(pos), 0) }

// matches checks a row against the filter (the field entries found it; a
// long event type is indexed by its first bytes only).
func (f ListFilter) matches(d Delivery) bool {
	return (f.Provider == "" || d.Provider == f.Provider) && (f.Route == "" || d.Route == f.Route) &&
		(f.EventType == "" || d.EventType == f.EventType) && (f.Status == "" || d.Status == f.Status)
}

// CheckStatus says whether s is a status the list can be filtered by.
func CheckStatus(s string) error {
	switch s {
	case outcome.StatusDone, outcome.StatusDuplicate, outcome.StatusRetrying, outcome.StatusParked, outcome.StatusDead,
		outcome.StatusUnrouted, outcome.StatusHeld, outcome.StatusSuppressed, statusUnreadable:
		return nil
	}
	return fmt.Errorf("status %q: want done, duplicate, retrying, parked, dead, unrouted, held, suppressed or unreadable", s)
}

// List returns one page of the rows that match f, newest first, from the
// cursor on ("" is the newest); limit is clamped to 1..MaxListLimit. See
// the cost model above.
func (ix *Index) List(ctx context.Context, f ListFilter, cursor string, limit int) (ListPage, error) {
	limit = min(max(limit, 1), MaxListLimit)
	page := ListPage{Events: []Delivery{}, Limit: limit}
	target := make([]byte, posLen)
	if !f.Until.IsZero() {
		target = listPos(f.Until, 0, 0)
	}
	if cursor != "" {
		c, err := decodeCursor(cursor)
		if err != nil {
			return page, err
		}
		if c = after(c); bytes.Compare(c, target) > 0 {
			target = c
		}
	}
	var stop []byte // the first position past Since
	if !f.Since.IsZero() {
		stop = listPos(f.Since.Add(-time.Microsecond), math.MaxInt32, math.MaxInt64)
	}
	var prefixes [][]byte
	for _, fv := range []struct {
		field byte
		value string
	}{{fieldStatus, f.Status}, {fieldRoute, f.Route}, {fieldEventType, f.EventType}, {fieldProvider, f.Provider}} {
		if fv.value != "" {
			prefixes = append(prefixes, fieldPrefix(fv.field, fv.value))
		}
	}
	rows := len(prefixes) == 0 // no filter: the rows themselves are the stream
	if rows {
		prefixes = [][]byte{{pList}}
	}
	err := ix.use().View(func(txn *badger.Txn) error {
		its := make([]*badger.Iterator, len(prefixes))
		for i, p := range prefixes {
			its[i] = txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: rows, PrefetchSize: limit})
			defer its[i].Close()
		}
		started := make([]bool, len(its))
		// Leapfrog: each stream in turn moves to target (the first entry
		// at or past it); a stream standing past it moves target there;
		// once every stream stands at target, that position is a row of
		// every filter.
		agree := 0
		for i := 0; ; i = (i + 1) % len(its) {
			if page.Seeks >= ix.listBudget {
				page.NextCursor = encodeCursor(target)
				return nil
			}
			if page.Seeks%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			it, p := its[i], prefixes[i]
			page.Seeks += moveTo(it, p, target, started[i])
			started[i] = true
			if !it.Valid() {
				return nil
			}
			pos := it.Item().Key()[len(p):]
			if len(pos) != posLen {
				return fmt.Errorf("events list: entry %q has no position", it.Item().Key())
			}
			if stop != nil && bytes.Compare(pos, stop) >= 0 {
				return nil
			}
			if bytes.Equal(pos, target) {
				agree++
			} else {
				target, agree = bytes.Clone(pos), 1
			}
			if agree < len(its) {
				continue
			}
			d, ok, err := row(txn, it, rows, target)
			if err != nil {
				return err
			}
			if ok && f.matches(d) {
				page.Events = append(page.Events, d)
				if len(page.Events) == limit {
					page.NextCursor = encodeCursor(target)
					return nil
				}
			}
			target, agree = after(target), 0
		}
	})
	if err != nil {
		return ListPage{Events: []Delivery{}, Limit: limit}, err
	}
	return page, nil
}
