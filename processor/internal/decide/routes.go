package decide

import (
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/headers"
)

// Per-route state. A record of a provider with routes (providers file) is
// delivered to each route its event matches, and each route's delivery has
// its own state: status, attempt expected, replay ids and expiry. Dedup
// still decides once per idempotency key: a fresh ingest record of a key
// with a live state is a duplicate, whatever its routes did.
//
// A State keeps its routes in one of two forms:
//
//   - Routes nil: one route, headers.DefaultRoute, whose state is the
//     top-level Status, NextAttempt, ExpiresAt and ReplayIDs. This is every
//     state written before routes (so a key done before an upgrade is done
//     for the route default after it), and every state of a provider with
//     a provider-level destination: its changelog value is unchanged (v 1).
//   - Routes not nil: one RouteState per route delivered, in name order;
//     the top-level Status is their summary (Summary), NextAttempt is 0 and
//     ReplayIDs empty, and ExpiresAt is the latest of theirs. An empty,
//     non-nil Routes is a key whose event matched no route (unrouted).
//     Written as changelog value v 2.

// RouteState is one route's part of a key's state.
type RouteState struct {
	Name   string
	Status Status
	// NextAttempt is the attempt expected next (retrying) or the parked
	// record's (parked); 0 otherwise.
	NextAttempt int
	// ExpiresAt is when this route's state is as good as none.
	ExpiresAt time.Time
	// ReplayIDs are the replay ids processed for this route, oldest first,
	// at most MaxReplayIDs.
	ReplayIDs []string
}

// Route returns the state of the named route ("" is headers.DefaultRoute),
// and whether the key has one.
func (s State) Route(name string) (RouteState, bool) {
	name = routeName(name)
	if s.Routes == nil {
		if name != headers.DefaultRoute {
			return RouteState{}, false
		}
		return RouteState{Name: name, Status: s.Status, NextAttempt: s.NextAttempt, ExpiresAt: s.ExpiresAt, ReplayIDs: s.ReplayIDs}, true
	}
	i, ok := slices.BinarySearchFunc(s.Routes, name, func(r RouteState, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return RouteState{}, false
	}
	return s.Routes[i], true
}

// Summary is the key-level status of routes: parked if any route is
// parked, else retrying if any is, else dead if any is, else done (also
// for no route at all).
func Summary(routes []RouteState) Status {
	rank := func(s Status) int {
		switch s {
		case StatusParked:
			return 3
		case StatusRetrying:
			return 2
		case StatusDead:
			return 1
		}
		return 0
	}
	sum := StatusDone
	for _, r := range routes {
		if rank(r.Status) > rank(sum) {
			sum = r.Status
		}
	}
	return sum
}

// routeName is the route a name means: "" is the route default.
func routeName(name string) string {
	if name == "" {
		return headers.DefaultRoute
	}
	return name
}

// view is the state of one route shaped as a whole key's state, for the
// decision table: nil when st is nil or has no state for the route.
func (s *State) view(route string) *State {
	if s == nil {
		return nil
	}
	if s.Routes == nil {
		if routeName(route) != headers.DefaultRoute {
			return nil
		}
		return s
	}
	rs, ok := s.Route(route)
	if !ok {
		return nil
	}
	v := *s
	v.Routes = nil
	v.Status, v.NextAttempt, v.ExpiresAt, v.ReplayIDs = rs.Status, rs.NextAttempt, rs.ExpiresAt, rs.ReplayIDs
	return &v
}

// withRoute returns the key's state with route's state replaced by next's
// (a state shaped by Step for that one route). The key-level fields come
// from next; a key with only the route default keeps the one-route form.
func (s *State) withRoute(route string, next State) State {
	route = routeName(route)
	if route == headers.DefaultRoute && (s == nil || s.Routes == nil) {
		return next
	}
	var routes []RouteState
	if s != nil {
		if s.Routes == nil {
			if rs, ok := s.Route(headers.DefaultRoute); ok {
				routes = []RouteState{rs}
			}
		} else {
			routes = slices.Clone(s.Routes)
		}
	}
	rs := RouteState{Name: route, Status: next.Status, NextAttempt: next.NextAttempt, ExpiresAt: next.ExpiresAt, ReplayIDs: next.ReplayIDs}
	i, found := slices.BinarySearchFunc(routes, route, func(r RouteState, n string) int { return strings.Compare(r.Name, n) })
	if found {
		routes[i] = rs
	} else {
		routes = slices.Insert(routes, i, rs)
	}
	out := next
	out.Routes = routes
	out.Status, out.NextAttempt, out.ReplayIDs = Summary(routes), 0, nil
	for _, r := range routes {
		if r.ExpiresAt.After(out.ExpiresAt) {
			out.ExpiresAt = r.ExpiresAt
		}
	}
	return out
}

// RouteResult is what became of one route's delivery of a record.
type RouteResult struct {
	// Route is the route's name.
	Route string
	// Result is what became of its delivery.
	Result Result
	// Policy is the route's decision policy.
	Policy Policy
}

// StepRoutes is Step for a record delivered to several routes at once (a
// fresh ingest record of a provider with routes): each route's result
// steps the key's state in turn, and the key's state is written once.
// With no route (the event matched none) the key becomes done for no
// route, and its one outcome says unrouted. pol gives that state's TTL.
func StepRoutes(st *State, a Arrival, results []RouteResult, pol Policy) (State, []Effect) {
	if len(results) == 0 {
		return stepUnrouted(st, a, pol)
	}
	var next State
	effects := []Effect{{Kind: ToChangelog}}
	cur := st
	for _, rr := range results {
		ra := a
		ra.Route = rr.Route
		var es []Effect
		next, es = Step(cur, ra, rr.Result, rr.Policy)
		cur = &next
		for _, e := range es {
			if e.Kind != ToChangelog {
				effects = append(effects, e)
			}
		}
	}
	return next, effects
}

// stepUnrouted: a key whose event matched no route is remembered as done,
// for no route (so a re-send is a duplicate), with an unrouted outcome.
func stepUnrouted(st *State, a Arrival, pol Policy) (State, []Effect) {
	if st != nil && st.Expired(a.Now) {
		st = nil
	}
	now := a.Now.UTC().Truncate(time.Millisecond)
	next := State{
		Status:      StatusDone,
		Provider:    a.Provider,
		FirstSeenAt: firstSeen(st, a),
		UpdatedAt:   now,
		ExpiresAt:   now.Add(ttlOf(pol)),
		Routes:      []RouteState{},
	}
	return next, []Effect{{Kind: ToChangelog}, {Kind: ToOutcomes, Status: StatusUnrouted}}
}
