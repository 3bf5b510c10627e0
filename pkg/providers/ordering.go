package providers

// Ordered reports whether the provider has ordering: its events of one
// entity are called in order on each route.
func (p *Provider) Ordered() bool { return p.orderRule != nil }

// OrderingRule names the rule that finds an event's entity, as the file
// gives it ("json /data/object/customer", "header X-Entity"); "" when
// the provider is not ordered. Ingest places an ordered provider's
// records by entity, the others' by key: a changed rule is a changed
// placement (PlacementFrom).
func (p *Provider) OrderingRule() string {
	if p.orderRule == nil {
		return ""
	}
	return p.orderRule.String()
}
