// Package deliver is where the processor hands a webhook it decided to process
// (DESIGN §6): a Handler per provider, looked up in a Router. The HTTP handler
// POSTs the exact body to the provider's destination with the provider's
// headers and the idempotency key (and a Standard Webhooks signature when it
// has signing secrets), and says through its error how the failure
// is classified by retry.Classify: nil is success, a *retry.PermanentError
// goes to the DLQ, a *retry.RetryAfterError is retryable no sooner than its
// delay, anything else is retryable.
//
// Go users who process webhooks in-process plug a HandlerFunc into the Router
// instead of a URL.
package deliver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// Delivery is one webhook to hand to a destination.
type Delivery struct {
	// Key is the idempotency key (the record key).
	Key string
	// Provider is the provider name from the ingest URL.
	Provider string
	// EventType is the provider's event type, empty when unknown.
	EventType string
	// Route is the name of the route (providers file) this delivery is
	// for, empty when the caller has no route to name. The HTTP handler
	// sends it as X-Hookline-Route.
	Route string
	// Attempt is the 1-based number of this processing attempt.
	Attempt int
	// Body is the request body exactly as received; handlers must not modify
	// it.
	Body []byte
	// ContentType is the Content-Type of the original request.
	ContentType string
	// Headers are the provider headers to forward: lower-case names without
	// the "http." prefix, as headers.HTTP(record) returns them.
	Headers []kgo.RecordHeader
	// Traceparent and Tracestate are the W3C Trace Context of the call's
	// span, sent as the traceparent and tracestate headers (replacing any
	// forwarded ones); empty when tracing is off.
	Traceparent, Tracestate string
}

// Handler processes one delivery. The returned error is classified with
// retry.Classify. Implementations must be safe for concurrent use.
type Handler interface {
	Handle(ctx context.Context, d Delivery) error
}

// Breaker is a destination with a circuit breaker: one that can refuse
// before a call. The processor parks a destination's records while
// Refusing holds (no call is made, no attempt used) and exports
// BreakerOpen as a gauge and on the control topic.
type Breaker interface {
	Handler
	// Refusing reports, changing nothing, whether a call now would be
	// refused: open with cool-down left, or half-open with its probe in
	// flight.
	Refusing() bool
	// BreakerOpen reports whether the breaker is open or half-open.
	BreakerOpen() bool
}

var _ Breaker = (*HTTP)(nil)

// HandlerFunc adapts a function to Handler, for Go users plugging in their
// own processing, and for tests.
type HandlerFunc func(ctx context.Context, d Delivery) error

// Handle calls f(ctx, d).
func (f HandlerFunc) Handle(ctx context.Context, d Delivery) error { return f(ctx, d) }

// Router maps a provider's route to its destination Handler. It is
// immutable after NewRouter, so it is safe for concurrent use; a nil
// *Router routes nothing.
type Router struct {
	handlers map[string]Handler
}

// NewRouter returns a Router over a copy of handlers, keyed
// "provider/route" (route.Key), or by the provider's name alone
// for its route default. A nil Handler in the map means no destination,
// the same as leaving it out.
func NewRouter(handlers map[string]Handler) *Router {
	m := make(map[string]Handler, len(handlers))
	for name, h := range handlers {
		if h != nil {
			m[name] = h
		}
	}
	return &Router{handlers: m}
}

// For returns the Handler of the provider's route default, or false when it
// has none. Cost: a map lookup or two.
func (r *Router) For(provider string) (Handler, bool) {
	return r.ForRoute(provider, headers.DefaultRoute)
}

// ForRoute returns the Handler of one route of a provider (key
// "provider/route", or the provider's name for the route default), or
// false when the route has no HTTP destination: its records are then
// handled by writing their outcome only (DESIGN §5), or by a topic
// destination. Cost: a map lookup or two.
func (r *Router) ForRoute(provider, route string) (Handler, bool) {
	if r == nil {
		return nil, false
	}
	if h, ok := r.handlers[provider+"/"+route]; ok {
		return h, true
	}
	if route != headers.DefaultRoute {
		return nil, false
	}
	h, ok := r.handlers[provider]
	return h, ok
}
