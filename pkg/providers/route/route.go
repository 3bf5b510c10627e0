// Package route decides which events a route of a provider takes, and
// names routes: a route's event type globs, where conditions on the JSON
// body and filter on the body and headers (filter.go), and for an
// otherwise route the other routes it yields to (Matcher, ParseWhere,
// ParseFilter, and Explain: which part decided), the body parsed once for all the routes that
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

// Request is what a route's rule looks at: the event type, the body, and
// the request headers a filter reads (Header gets one by its lower-case
// name; nil: the request has none).
type Request struct {
	EventType string
	Body      []byte
	Header    func(name string) (string, bool)
}

// Matcher is what a route takes: its event type globs, its where
// conditions and its filter, less what the matchers in Unless take. The
// zero Matcher takes every event.
type Matcher struct {
	Globs  []glob.Glob // the route's events compiled; nil: every event type
	Where  []Condition // nil: no condition on the body
	Filter *Filter     // nil: no filter
	// Unless are the matchers of the provider's other routes when this is
	// its otherwise route: it takes an event only when none of them does.
	// nil for any other route.
	Unless []Matcher
}

// The parts of a route's rule, as Verdict.By names them.
const (
	ByAll       = "all"       // the route has no rule: it takes every event
	ByEvents    = "events"    // its event type globs
	ByWhere     = "where"     // its where conditions
	ByFilter    = "filter"    // its filter
	ByOtherwise = "otherwise" // it is the otherwise route: another route matched, or none did
)

// Verdict is whether a route takes an event and which part of its rule
// decided: the part that refused it, or, when it matched, the last part
// checked.
type Verdict struct {
	Matched bool
	By      string // ByAll, ByEvents, ByWhere, ByFilter or ByOtherwise
	// Glob is the event type glob that matched (By events, or a later part
	// after it); "" when none did or the route has no events.
	Glob string
	// Where is the pointer of the where condition that failed, or of the
	// last one that held (By where).
	Where string
	// At is the filter's condition that failed, or the last that held (By
	// filter); NotJSON: the filter has a body part and the body is not
	// JSON.
	At      *Place
	NotJSON bool
	// Yielded is the index in Unless of the matcher that matched (By
	// otherwise, not matched); -1 otherwise.
	Yielded int
}

// Match reports whether an event goes to the route: its type matches one
// of Globs (or Globs is nil), every where condition holds on the body
// parsed as JSON (a body that is not JSON, or a pointer that resolves to
// nothing, does not match), the filter holds, and no matcher of Unless
// matches. An empty EventType matches only a Matcher without Globs. doc
// holds the parsed body for the next Matcher that looks at the same body.
// It is Explain's answer. Cost: no allocation without where or filter;
// with them, one parse of the body per doc and a walk of the conditions;
// Unless adds a match per matcher in it.
func (m Matcher) Match(req Request, doc *Doc) bool { return m.Explain(req, doc).Matched }

// Explain is Match with the part of the rule that decided. Cost: Match's;
// the Verdict points into the Matcher, nothing is allocated.
func (m Matcher) Explain(req Request, doc *Doc) Verdict {
	v := m.own(req, doc)
	if !v.Matched || m.Unless == nil {
		return v
	}
	for i, u := range m.Unless {
		if u.Match(req, doc) {
			return Verdict{By: ByOtherwise, Yielded: i}
		}
	}
	return Verdict{Matched: true, By: ByOtherwise, Yielded: -1}
}

// own is Explain without Unless: the route's globs, where and filter.
func (m Matcher) own(req Request, doc *Doc) Verdict {
	v := Verdict{Matched: true, By: ByAll, Yielded: -1}
	if m.Globs != nil {
		v.By = ByEvents
		v.Matched = false
		for _, g := range m.Globs { // as glob.MatchAny: an empty event type matches none
			if req.EventType != "" && g.Match(req.EventType) {
				v.Matched, v.Glob = true, g.Pattern()
				break
			}
		}
		if !v.Matched {
			return v
		}
	}
	if len(m.Where) > 0 {
		v.By = ByWhere
		body, ok := doc.get(req.Body)
		if !ok {
			v.Matched, v.NotJSON = false, true
			return v
		}
		for _, c := range m.Where {
			v.Where = c.path
			if !c.Holds(body) {
				v.Matched = false
				return v
			}
		}
	}
	if m.Filter != nil {
		v.By = ByFilter
		var parsed bool
		v.Matched, v.At, parsed = m.Filter.holds(req, doc)
		v.NotJSON = !parsed
	}
	return v
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
