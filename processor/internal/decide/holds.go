package decide

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Holds are an ordered provider's entity's holds, one per route that is
// held (issue 24): while the head of an entity's chain waits on a route
// (in a retry tier, parked in the route's lane, or dead with on_dead:
// hold), the entity's later records on that route are not called. Each is
// numbered in the order it was held and sent to a retry tier (the head's,
// else the first), where it waits in Kafka, never in memory; when it comes
// back it is delivered only once the head has ended and every record held
// before it has been delivered, else it goes round again. The numbers, not
// the order copies come back in, keep the entity's order: a copy that comes
// back before an earlier one simply waits another round.
//
// The holds of an entity are one state record (EncodeHolds), in the
// changelog and the store under EntityKey, written in the transaction of
// the record that changes them, so a crash loses or repeats none.
type Holds []Hold

// Hold is one route's hold of an entity.
type Hold struct {
	Route string `json:"route"`
	// Head is the key the entity waits behind; "" once the head ended and
	// the records held behind it drain.
	Head string `json:"head,omitempty"`
	// Next is the number the next held record gets; Deliver the number of
	// the held record to deliver next once the head has ended. Next -
	// Deliver records wait.
	Next    int `json:"next"`
	Deliver int `json:"deliver"`
	// Tier is the retry tier (1-based) the head waits in, where held
	// records are sent; 0: the head is parked in the lane, and held
	// records go to the first tier. Dead: the head is dead and on_dead:
	// hold keeps the entity held until it is replayed and done.
	Tier int  `json:"tier,omitempty"`
	Dead bool `json:"dead,omitempty"`
	// Since is when the hold began (the alert on entities held too long).
	Since time.Time `json:"since"`
}

// Waiting is how many records wait behind the hold.
func (x Hold) Waiting() int { return x.Next - x.Deliver }

// EntityPrefix starts every EntityKey: a state store scan of it finds a
// partition's holds and nothing else.
const EntityPrefix = "\x00e\x00"

// EntityKey is the state-store and changelog key of an entity's holds:
// "\x00e\x00<provider>\x00<entity>"; no idempotency key starts with NUL
// (ingest refuses control characters in keys).
func EntityKey(provider, entity string) string { return EntityPrefix + provider + "\x00" + entity }

// IsEntityKey reports whether key is an EntityKey.
func IsEntityKey(key string) bool { return strings.HasPrefix(key, EntityPrefix) }

// SplitEntityKey returns the provider and entity of an EntityKey; ok is
// false for any other key. (A provider's name has no NUL; an entity has
// no control character, so the first NUL after the prefix splits them.)
func SplitEntityKey(key string) (provider, entity string, ok bool) {
	rest, ok := strings.CutPrefix(key, EntityPrefix)
	if !ok {
		return "", "", false
	}
	provider, entity, ok = strings.Cut(rest, "\x00")
	return provider, entity, ok && provider != ""
}

// HeldError is the reason a record of a held entity is not called on a
// route: it waits behind Head (or, draining, behind the held records
// numbered before Seq), numbered Seq, in tier Tier.
type HeldError struct {
	Head string
	Seq  int
	Tier int
}

// Error says behind what the record waits.
func (e *HeldError) Error() string {
	if e.Head == "" {
		return fmt.Sprintf("held as number %d of its entity on this route: the records held before it go first", e.Seq)
	}
	return fmt.Sprintf("held as number %d behind %s, the head of its entity on this route", e.Seq, e.Head)
}

// route returns route's hold, if any.
func (h Holds) route(route string) (Hold, int, bool) {
	i := slices.IndexFunc(h, func(x Hold) bool { return x.Route == route })
	if i < 0 {
		return Hold{}, -1, false
	}
	return h[i], i, true
}

// Check says whether a record of the entity, key, is held on route: nil to
// deliver it, else why it waits and the number it waits as. seq is the
// number of a copy held before (hookline.held), 0 for any other record: a
// copy is delivered once the head has ended and it is the next to
// deliver, and only then.
func (h Holds) Check(route, key string, seq int) *HeldError {
	x, _, ok := h.route(route)
	switch {
	case !ok:
		return nil
	case x.Head == key:
		return nil
	case x.Head == "" && seq > 0 && seq == x.Deliver:
		return nil
	}
	e := &HeldError{Head: x.Head, Seq: seq, Tier: max(x.Tier, 1)}
	if x.Dead || x.Head == "" {
		e.Tier = 1 // a dead head's or a draining entity's records look again soon
	}
	if seq == 0 {
		e.Seq = x.Next
	}
	return e
}

// Where is where a route's delivery of the entity's record waits after
// its result, for After.
type Where struct {
	// Ended: done, or dead with on_dead: release.
	Ended bool
	// Tier: retrying in that tier; 0 and not Dead: parked in the lane;
	// Dead: dead with on_dead: hold.
	Tier int
	Dead bool
}

// After returns the holds after one route's result for a record of the
// entity (key and seq as for Check): held (Check said so), a new record
// takes the next number; delivered, a held copy leaves the queue, and the
// record ends or becomes the head where it waits. h is not changed.
func (h Holds) After(route, key string, seq int, held bool, w Where, now time.Time) Holds {
	x, i, ok := h.route(route)
	out := slices.Clone(h)
	set := func(x Hold) Holds {
		if i >= 0 {
			out[i] = x
			return out
		}
		out = append(out, x)
		slices.SortFunc(out, func(a, b Hold) int { return strings.Compare(a.Route, b.Route) })
		return out
	}
	if held {
		if seq == 0 {
			x.Next++
		}
		return set(x)
	}
	if !ok {
		if w.Ended {
			return out
		}
		return set(Hold{Route: route, Head: key, Next: 1, Deliver: 1, Tier: w.Tier, Dead: w.Dead, Since: now.UTC().Truncate(time.Millisecond)})
	}
	if seq > 0 && seq == x.Deliver && x.Head != key {
		x.Deliver++
	}
	if !w.Ended {
		x.Head, x.Tier, x.Dead = key, w.Tier, w.Dead
		return set(x)
	}
	if x.Head == key {
		x.Head = ""
	}
	if x.Head == "" && x.Waiting() <= 0 {
		out = slices.Delete(out, i, i+1)
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return set(x)
}

// holdsJSON is the changelog and stored form of an entity's holds.
type holdsJSON struct {
	V     string `json:"v"` // "holds"
	Holds Holds  `json:"holds"`
}

// EncodeHolds is the changelog (and stored) value of an entity's holds;
// none is a nil value: the key's tombstone.
func EncodeHolds(h Holds) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	return json.Marshal(holdsJSON{V: "holds", Holds: h})
}

// DecodeHolds reads EncodeHolds' value; nil is none.
func DecodeHolds(b []byte) (Holds, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var j holdsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("holds: %w", err)
	}
	if j.V != "holds" {
		return nil, fmt.Errorf("holds: version %q, want holds", j.V)
	}
	return j.Holds, nil
}
