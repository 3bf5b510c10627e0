// Package route decides which events a route of a provider takes, and
// names routes: a route's event type globs and where conditions on the JSON
// body, and for an otherwise route the other routes it yields to (Matcher,
// ParseWhere), the body parsed once for all the routes that
// look at it (Doc), the name of a provider-level destination's route
// (Default) and the key of per-route maps (Key). The routes themselves,
// with their destinations and policies, are the providers package's.
package route

import (
	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Default is the name of the one route a provider-level destination
// makes (a provider without routes:).
const Default = "default"

// Key is "provider/route": the key of per-route maps (retry schedules,
// slots, breakers). Cost: one string concatenation.
func Key(provider, route string) string { return provider + "/" + route }

// Matcher is what a route takes: its event type globs and its where
// conditions, less what the matchers in Unless take. The zero Matcher
// takes every event.
type Matcher struct {
	Globs []glob.Glob // the route's events compiled; nil: every event type
	Where []Condition // nil: no condition on the body
	// Unless are the matchers of the provider's other routes when this is
	// its otherwise route: it takes an event only when none of them does.
	// nil for any other route.
	Unless []Matcher
}

// Match reports whether an event of eventType with body goes to the
// route: its type matches one of Globs (or Globs is nil), every where
// condition holds on the body parsed as JSON (a body that is not JSON, or a
// pointer that resolves to nothing, does not match), and no matcher of
// Unless matches. An empty eventType matches only a Matcher without Globs.
// doc holds the parsed body for the next Matcher that looks at the same
// body. Cost: no allocation without where; with where, one parse of the
// body per doc; Unless adds a match per matcher in it.
func (m Matcher) Match(eventType string, body []byte, doc *Doc) bool {
	if !m.own(eventType, body, doc) {
		return false
	}
	for _, u := range m.Unless {
		if u.Match(eventType, body, doc) {
			return false
		}
	}
	return true
}

// own is Match without Unless: the route's globs and where alone.
func (m Matcher) own(eventType string, body []byte, doc *Doc) bool {
	if m.Globs != nil && !glob.MatchAny(m.Globs, eventType) {
		return false
	}
	if len(m.Where) == 0 {
		return true
	}
	v, ok := doc.get(body)
	if !ok {
		return false
	}
	for _, c := range m.Where {
		if !c.Holds(v) {
			return false
		}
	}
	return true
}

// Doc is a body parsed at most once, the first time a where condition
// needs it, however many routes look at it. The zero Doc is an unparsed
// body.
type Doc struct {
	parsed, ok bool
	v          any
}

func (d *Doc) get(body []byte) (any, bool) {
	if !d.parsed {
		d.v, d.ok = jsonptr.Decode(body)
		d.parsed = true
	}
	return d.v, d.ok
}

// EventFilter is a list of event type globs written as a route's events:
// for tools that narrow a set of events by type (dlq backfill --events).
// The zero EventFilter matches every event type.
type EventFilter struct{ globs []glob.Glob }

// ParseEventFilter compiles patterns as a route's events entries; none
// gives the filter that matches every event type.
func ParseEventFilter(patterns []string) (EventFilter, error) {
	var f EventFilter
	for _, p := range patterns {
		g, err := glob.Compile(p)
		if err != nil {
			return EventFilter{}, err
		}
		f.globs = append(f.globs, g)
	}
	return f, nil
}

// Match reports whether eventType matches one of the filter's globs (an
// empty eventType matches only the zero filter).
func (f EventFilter) Match(eventType string) bool {
	return f.globs == nil || glob.MatchAny(f.globs, eventType)
}
