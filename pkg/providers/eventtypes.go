package providers

import (
	"slices"

	"github.com/hookline/hookline/pkg/providers/glob"
)

// NamedEventTypes are the event type patterns the provider's entry of the
// providers file names anywhere, each once, in this order: its routes'
// events (routes in name order, each list in its order), its schema
// entries, its key parts' events (a preset's own parts included). They
// bound the event_type label of the metrics (package typelabel). Cost:
// none; the slice is the provider's own: never modify it.
func (p *Provider) NamedEventTypes() []glob.Glob { return p.named }

// NamedEventTypes is every provider's NamedEventTypes, by name: what
// typelabel.New takes. Cost: one map.
func (r *Registry) NamedEventTypes() map[string][]glob.Glob {
	out := make(map[string][]glob.Glob, len(r.byName))
	for name, p := range r.byName {
		out[name] = p.named
	}
	return out
}

// indexEventTypes sets p.named from its routes, schemas and key parts.
func (p *Provider) indexEventTypes() {
	add := func(g glob.Glob) {
		if !slices.ContainsFunc(p.named, func(n glob.Glob) bool { return n.Pattern() == g.Pattern() }) {
			p.named = append(p.named, g)
		}
	}
	for _, rt := range p.routes {
		for _, g := range rt.match.Globs {
			add(g)
		}
	}
	for _, g := range p.schemas.Globs() {
		add(g)
	}
	for _, k := range p.keyParts {
		for _, g := range k.Events {
			add(g)
		}
	}
}
