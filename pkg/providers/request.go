package providers

import (
	"net/http"
	"slices"

	"github.com/hookline/hookline/pkg/providers/rule"
)

// RequestHeader is a request header a provider's deliveries carry, as
// ingest's HTTP document (GET /openapi.yaml) lists it.
type RequestHeader struct {
	Name string // as the provider spells it
	// Required: a delivery without it (or with it empty) is refused: 401
	// for a signature header, 400 for a key header.
	Required    bool
	Description string
}

// ContentTypes returns the media types the provider takes, in the
// preset's order, as CheckContentType checks them (which also takes any
// application/*+json where application/json is listed); nil: any, as for
// the standard preset and a generic provider that reads nothing from the
// body. Cost: a copy of the list.
func (p *Provider) ContentTypes() []string { return slices.Clone(p.accept) }

// RequestHeaders returns the headers a delivery's signature, idempotency
// key and event type are read from: the signature's first, then the
// key's and event type's, each name once (Required when any use of it
// requires it). An unsigned generic provider lists only its key headers.
// Cost: a new slice of a few entries.
func (p *Provider) RequestHeaders() []RequestHeader {
	var out []RequestHeader
	var all []RequestHeader
	if p.scheme != nil {
		for _, h := range p.scheme.Headers() {
			all = append(all, RequestHeader(h))
		}
	}
	for _, h := range append(all, p.keyDocs...) {
		i := slices.IndexFunc(out, func(o RequestHeader) bool {
			return http.CanonicalHeaderKey(o.Name) == http.CanonicalHeaderKey(h.Name)
		})
		if i < 0 {
			out = append(out, h)
			continue
		}
		out[i].Required = out[i].Required || h.Required
	}
	return out
}

// Signed reports whether the provider's deliveries carry a signature
// (every preset, and a generic provider unless signature: {none: true}):
// then a delivery can be refused 401. Cost: none.
func (p *Provider) Signed() bool { return p.scheme != nil }

// ruleDoc describes a generic provider's header rule r: the only
// alternative of a part of idempotency_key's parts that every key needs
// (not optional, not for some events only, no body hash) is required (400
// without it); another part's alternative, the single key and the event
// type are not.
func ruleDoc(r *rule.Rule, p *Provider) RequestHeader {
	for _, k := range p.keyParts {
		if !slices.Contains(k.Alts, r) {
			continue
		}
		if k.Always() && !k.BodyHash && len(k.Alts) == 1 {
			return RequestHeader{Name: r.HeaderName(), Required: true, Description: "A part of the composite idempotency key (400 without it)."}
		}
		return RequestHeader{Name: r.HeaderName(), Description: "A part of the composite idempotency key: one of its alternatives, optional, for some event types only, or with the body's hash when absent."}
	}
	switch {
	case r == p.keyRule:
		return RequestHeader{Name: r.HeaderName(), Description: "The idempotency key's suffix (without it, Idempotency-Key, then the SHA-256 of the body)."}
	}
	return RequestHeader{Name: r.HeaderName(), Description: "The event type."}
}
