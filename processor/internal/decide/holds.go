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
// hold), the entity's later records on that route are not called. They
// are sent where the head waits, right behind it (the same tier with the
// head's due time, or the lane), so that they come back after it, in
// order, with no attempt used; the records themselves wait in Kafka, never
// in memory. A hold ends when the head is done (or dead with on_dead:
// release) and every record held behind it has come back and been
// delivered.
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
	// Outstanding counts the records held behind the head that have not
	// come back and been delivered yet.
	Outstanding int `json:"outstanding"`
	// Tier and DueAt say where the head (or, draining, the last records
	// held) wait: retry tier Tier (1-based) until DueAt; Tier 0 is the
	// route's lane; Dead is a dead head held by on_dead: hold, whose held
	// records wait in the last tier and look again when they come back.
	Tier  int       `json:"tier,omitempty"`
	DueAt time.Time `json:"due_at,omitzero"`
	Dead  bool      `json:"dead,omitempty"`
	// Since is when the hold began (the alert on entities held too long).
	Since time.Time `json:"since"`
}

// EntityKey is the state-store and changelog key of an entity's holds:
// "\x00e\x00<provider>\x00<entity>"; no idempotency key starts with NUL
// (ingest refuses control characters in keys).
func EntityKey(provider, entity string) string { return "\x00e\x00" + provider + "\x00" + entity }

// IsEntityKey reports whether key is an EntityKey.
func IsEntityKey(key string) bool { return strings.HasPrefix(key, "\x00e\x00") }

// HeldError is the reason a record of a held entity is not called on a
// route: it waits behind Head, where Hold says.
type HeldError struct {
	Head string
	Hold Hold
}

// Error says behind which key the record waits.
func (e *HeldError) Error() string {
	if e.Head == "" {
		return "held: the records of its entity held before it drain first"
	}
	return "held behind " + e.Head + ", the head of its entity on this route"
}

// Held is the result of a record held on a route: NotCalled(e).
func Held(e *HeldError) error { return NotCalled(e) }

// route returns route's hold, if any.
func (h Holds) route(route string) (Hold, int, bool) {
	i := slices.IndexFunc(h, func(x Hold) bool { return x.Route == route })
	if i < 0 {
		return Hold{}, -1, false
	}
	return h[i], i, true
}

// Check says whether a record of the entity, key, is held on route: nil to
// deliver it, else why it waits. heldCopy says the record is a copy sent
// behind a head before (hookline.held): it is delivered when the head has
// ended and the records before it have drained, and only then.
func (h Holds) Check(route, key string, heldCopy bool) *HeldError {
	x, _, ok := h.route(route)
	switch {
	case !ok:
		return nil
	case x.Head == key:
		return nil
	case x.Head == "" && heldCopy:
		return nil
	}
	return &HeldError{Head: x.Head, Hold: x}
}

// Where is where a route's delivery of the entity's head waits after
// its result, for After.
type Where struct {
	// Ended: done, or dead with on_dead: release.
	Ended bool
	// Tier, DueAt: retrying in tier Tier until DueAt; Tier 0 and not Dead:
	// parked in the lane; Dead: dead with on_dead: hold.
	Tier  int
	DueAt time.Time
	Dead  bool
}

// After returns the holds after one route's result for a record of the
// entity (key, heldCopy as for Check): held (Check said so), the record
// joins those behind the head (a copy already counted is not counted
// again); delivered, the record ends, or becomes the head where it waits.
// h is not changed.
func (h Holds) After(route, key string, heldCopy, held bool, w Where, now time.Time) Holds {
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
	drop := func() Holds {
		if i < 0 {
			return out
		}
		out = slices.Delete(out, i, i+1)
		if len(out) == 0 {
			return nil
		}
		return out
	}
	now = now.UTC().Truncate(time.Millisecond)
	if held {
		if !heldCopy {
			x.Outstanding++
		}
		return set(x)
	}
	if !ok {
		if w.Ended {
			return out
		}
		return set(Hold{Route: route, Head: key, Tier: w.Tier, DueAt: w.DueAt.UTC().Truncate(time.Millisecond), Dead: w.Dead, Since: now})
	}
	if heldCopy && x.Head != key {
		x.Outstanding--
	}
	if w.Ended {
		x.Head = ""
		if x.Outstanding <= 0 {
			return drop()
		}
		return set(x)
	}
	x.Head, x.Tier, x.DueAt, x.Dead = key, w.Tier, w.DueAt.UTC().Truncate(time.Millisecond), w.Dead
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
