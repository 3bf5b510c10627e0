package consume

import "github.com/hookline/hookline/pkg/retry"

// scheduleOf returns the retry schedule a provider's failures are routed
// by: its own retry policy (the whole schedule restricted to its
// retry.tiers), or the whole schedule. Either way tier numbers are the whole
// schedule's, so Names.Retry[tier-1] and Schedule.DueAt stay right. Cost: a
// map lookup.
func (p *Processor) scheduleOf(provider string) retry.Schedule {
	if s, ok := p.cfg.RetryPolicies[provider]; ok {
		return s
	}
	return p.cfg.Schedule
}
