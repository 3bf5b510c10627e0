package consume

import (
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/transform"
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
	// transform is the route's transform; nil: none (transforms.go).
	transform *transform.Script
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
	// moved are the route default's lane topics of the providers with
	// routes but none named default, by provider: what was parked there
	// before the provider's destination moved to routes is read back and
	// goes to its routes (decide.Input.Moved).
	moved map[string]string
}
