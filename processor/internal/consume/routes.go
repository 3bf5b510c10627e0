package consume

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
	"github.com/hookline/hookline/processor/internal/decide"
)

// target is one route of a provider as this processor delivers it: an
// HTTP destination with its lane, a topic destination, or neither (the
// outcome is the product).
type target struct {
	provider, route string
	// lane is the HTTP destination's lane; nil for a topic route or a
	// route without destination.
	lane *lane
	// topic is a topic destination's topic, used as written.
	topic  string
	policy decide.Policy
	class  providers.Priority
	// holdOnDead is the route's on_dead: hold (ordering.go).
	holdOnDead bool
}

// routing is the processor's table of targets, built once by New.
type routing struct {
	// byKey holds every target by route.Key.
	byKey map[string]*target
	// filed says the provider has routes: in its providers entry
	// (routes:, or a provider-level destination) or from the Router
	// alone (a Go handler plugged in for its route default). A provider
	// without any is delivered nowhere: its records get their outcome
	// only.
	filed map[string]bool
	// byLane is the target of each lane topic.
	byLane map[string]*target
}

// newRouting builds a target per route of every provider: from the
// providers file, and for a provider without routes there, the route
// default when the Router has a handler for it (Go users plug handlers in
// without a destination in the file).
func newRouting(cfg Config, m *laneMetrics) routing {
	rt := routing{byKey: map[string]*target{}, filed: map[string]bool{}, byLane: map[string]*target{}}
	for _, name := range cfg.Providers.Names() {
		p, _ := cfg.Providers.Get(name)
		routes := p.Routes()
		if len(routes) == 0 {
			if _, ok := cfg.Router.For(name); ok {
				routes = []*providers.Route{{Name: route.Default, Priority: p.Priority}}
			}
		}
		for _, r := range routes {
			t := &target{provider: name, route: r.Name, class: r.Priority, policy: policyFor(cfg, p, r), holdOnDead: r.HoldOnDead}
			if d := r.Destination; d != nil && d.Topic != "" {
				t.topic = d.Topic
			} else if h, ok := cfg.Router.ForRoute(name, r.Name); ok {
				t.lane = newLane(cfg, m, name, r, h)
				rt.byLane[t.lane.topic] = t
			}
			rt.byKey[route.Key(name, r.Name)] = t
			rt.filed[name] = true
		}
	}
	return rt
}

// policyFor is a route's decision policy: the provider's dedup TTL, and
// the retry schedule its failures are routed by (its own retry.tiers, the
// whole schedule restricted to them, or the whole schedule). Either way
// tier numbers are the whole schedule's, so Names.Retry[tier-1] and
// Schedule.DueAt stay right.
func policyFor(cfg Config, p *providers.Provider, r *providers.Route) decide.Policy {
	pol := decide.Policy{Schedule: cfg.Schedule, TTL: p.DedupTTL}
	if s, ok := cfg.RetryPolicies[route.Key(p.Name, r.Name)]; ok {
		pol.Schedule = s
	}
	pol.Topic = r.Destination != nil && r.Destination.Topic != ""
	return pol
}

// keyPolicy is the policy of a decision for the key rather than a route
// (unrouted, or a provider delivered nowhere): its provider's dedup TTL.
func (p *setup) keyPolicy(provider string) decide.Policy {
	pol := decide.Policy{Schedule: p.cfg.Schedule, TTL: decide.DefaultTTL}
	if pr, ok := p.cfg.Providers.Get(provider); ok {
		pol.TTL = pr.DedupTTL
	}
	return pol
}

// target returns the target of a provider's route, nil when none.
func (p *setup) target(provider, name string) *target {
	return p.routes.byKey[route.Key(provider, name)]
}

// routeOf is the route a record is for (decide.Arrival.Route): its lane's
// for a lane copy, its hookline.route header, the route default for a
// retry or replay written before routes, and "" for a fresh ingest record
// (every route its event matches).
func (p *setup) routeOf(r *kgo.Record, a decide.Arrival) string {
	if a.FromLane {
		if t, ok := p.routes.byLane[r.Topic]; ok {
			return t.route
		}
	}
	if v := headers.Value(r, headers.Route); v != "" {
		return v
	}
	if a.FromLane || a.Origin != headers.OriginIngest {
		return headers.DefaultRoute
	}
	return ""
}

// matching appends the targets a fresh ingest record goes to: each route
// of its provider its event type and body match. filed is false for a
// provider delivered nowhere.
func (p *setup) matching(r *kgo.Record, provider string, dst []*target) (ts []*target, filed bool) {
	if !p.routes.filed[provider] {
		return dst, false
	}
	pr, ok := p.cfg.Providers.Get(provider)
	if !ok {
		return dst, false
	}
	routes := pr.Routes()
	if len(routes) == 0 { // the Router's route default alone
		return append(dst, p.target(provider, route.Default)), true
	}
	var buf [4]*providers.Route
	for _, rt := range pr.Match(headers.Value(r, headers.EventType), r.Value, buf[:0]) {
		if t := p.target(provider, rt.Name); t != nil {
			dst = append(dst, t)
		}
	}
	return dst, true
}
