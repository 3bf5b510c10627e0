package consume

import (
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/decide"
)

// policyOf returns the decision policy of a provider's destination: its
// dedup TTL, and the retry schedule its failures are routed by (its own
// retry.tiers, the whole schedule restricted to them, or the whole
// schedule). Either way tier numbers are the whole schedule's, so
// Names.Retry[tier-1] and Schedule.DueAt stay right. Cost: two map
// lookups.
func (p *Processor) policyOf(provider string) decide.Policy {
	pol := decide.Policy{Schedule: p.cfg.Schedule, TTL: decide.DefaultTTL}
	if s, ok := p.cfg.RetryPolicies[providers.RouteKey(provider, providers.DefaultRoute)]; ok {
		pol.Schedule = s
	}
	if pr, ok := p.cfg.Providers.Get(provider); ok {
		pol.TTL = pr.DedupTTL
	}
	return pol
}
