package rules

import (
	"strings"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/transform"
)

var _ Transformer = Transform

// Transform is the Transformer of the processor's own code: rt's
// transform (providers file transform:) run on the event as the processor
// runs it (transform.Script.Run, with the same limits), giving the request
// the route would send, its skip, or the error that would dead-letter it
// as transform_failed. nil for a route without a transform. Cost: one call
// of the script.
func Transform(p *providers.Provider, rt *providers.Route, ev Event) *Transformed {
	sc := rt.Transform
	if sc == nil {
		return nil
	}
	out := &Transformed{Script: sc.Path, SHA256: sc.SHA256}
	res, err := sc.Run(transform.Request{Body: ev.Request.Body, ContentType: ev.ContentType, Headers: ev.Headers,
		EventType: ev.Type, Provider: p.Name, Route: rt.Name})
	switch {
	case err != nil:
		out.Error = err.Error()
	case res.Skip:
		out.Skip = true
	default:
		out.Body = string(res.Request.Body)
		out.Headers = map[string]string{}
		if res.Request.ContentType != "" {
			out.Headers["content-type"] = res.Request.ContentType
		}
		for _, h := range res.Request.Headers {
			out.Headers[strings.ToLower(h.Key)] = string(h.Value)
		}
	}
	return out
}
