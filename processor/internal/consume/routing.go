package consume

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
)

// The processor's routing as its setup sees it: the table of targets
// built from the providers file and the Router (routes.go's types), the
// route a record is for, the routes a fresh record matches, and their
// classes and the admission budget over them. Above routes.go, config.go
// and lanes.go, which it uses.

// newRouting builds a target per route of every provider: from the
// providers file, and for a provider without routes there, the route
// default when the Router has a handler for it (Go users plug handlers in
// without a destination in the file).
func newRouting(cfg Config, m *laneMetrics) routing {
	rt := routing{byKey: map[string]*target{}, filed: map[string]bool{}, byLane: map[string]*target{}, moved: map[string]string{}}
	for _, name := range cfg.Providers.Names() {
		p, _ := cfg.Providers.Get(name)
		if p.WithoutDefault() {
			rt.moved[cfg.Names.RouteLane(name, route.Default)] = name
		}
		routes := p.Routes()
		if len(routes) == 0 {
			if _, ok := cfg.Router.For(name); ok {
				routes = []*providers.Route{{Name: route.Default, Priority: p.Priority}}
			}
		}
		for _, r := range routes {
			t := &target{provider: name, route: r.Name, class: r.Priority, policy: policyFor(cfg, p, r), holdOnDead: r.HoldOnDead, transform: r.Transform}
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

// policyFor is a route's decision policy: the provider's default dedup
// TTL (policyOf gives each record its event type's), and
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

// policyOf is the policy of a decision on record r of provider: route
// t's (nil: a decision for the key rather than a route: unrouted, or a
// provider delivered nowhere), with the dedup TTL of r's event type
// (dedup_ttl per event type in the providers file). The one place the
// processor asks for a TTL. Cost: a glob match per dedup_ttl entry.
func (p *setup) policyOf(t *target, r *kgo.Record, provider string) decide.Policy {
	pol := decide.Policy{Schedule: p.cfg.Schedule, TTL: decide.DefaultTTL}
	if t != nil {
		pol = t.policy
	}
	if pr, ok := p.cfg.Providers.Get(provider); ok {
		pol.TTL = pr.DedupTTLFor(headers.Value(r, headers.EventType))
	}
	return pol
}

// routePolicy is policyOf(t, r, provider) for a record whose key policy
// (policyOf(nil, r, provider)) is key and whose provider is known or not:
// the event type's TTL is looked up once per record, not once per route.
func routePolicy(t *target, key decide.Policy, known bool) decide.Policy {
	pol := t.policy
	if known {
		pol.TTL = key.TTL
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
// of its provider its event type, body and headers match. filed is false for a
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
	for _, rt := range pr.Match(providers.RequestOf(r), buf[:0]) {
		if t := p.target(provider, rt.Name); t != nil {
			dst = append(dst, t)
		}
	}
	return dst, true
}

// classOf is the priority class of a record: its route's, for a record of
// one route (a lane copy, a retry); else its provider's (the highest of
// its routes'), normal for a provider this processor does not know.
func (p *setup) classOf(r *kgo.Record) providers.Priority {
	provider := headers.Value(r, headers.Provider)
	route := headers.Value(r, headers.Route)
	if t, ok := p.routes.byLane[r.Topic]; ok {
		return t.class
	}
	if route != "" {
		if t := p.target(provider, route); t != nil {
			return t.class
		}
	}
	return p.classOfProvider(provider)
}

func (p *setup) classOfProvider(name string) providers.Priority {
	if pr, ok := p.cfg.Providers.Get(name); ok {
		return pr.Priority
	}
	return providers.PriorityNormal
}

// newBudget is the session's admission budget: MaxPending records and
// MaxPendingBytes, classes competing when the routes are of more than one
// priority class.
func (p *setup) newBudget() *admission.Budget {
	seen := map[providers.Priority]bool{}
	for _, name := range p.cfg.Providers.Names() {
		if pr, ok := p.cfg.Providers.Get(name); ok {
			seen[pr.Priority] = true
		}
	}
	for _, t := range p.routes.byKey {
		seen[t.class] = true
	}
	return admission.New(int64(p.cfg.MaxPending), p.cfg.MaxPendingBytes, len(seen) > 1, p.mBudget.classPending)
}
