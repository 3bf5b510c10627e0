package providers

// Ordered reports whether the provider has ordering: its events of one
// entity are called in order on each route.
func (p *Provider) Ordered() bool { return p.orderRule != nil }
