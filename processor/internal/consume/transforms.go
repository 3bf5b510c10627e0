package consume

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers/transform"
	"github.com/hookline/hookline/processor/internal/decide"
)

// A route's transform runs before the plan, once per route and record
// read: what it gave is the plan's input (decide.Route.Transform: send,
// skip, or failed), and the request it returned is what the route's call
// sends (destination) or its topic gets (records). The record itself is
// never changed: its retry-tier, DLQ and lane copies keep the original
// bytes, and each later read of them runs the route's script again
// (deterministic: the same bytes for the same input and script).

// send is the request a route's transform returned for a record.
type send struct {
	route string
	req   transform.Request
}

// sends are a record's transformed requests, by route.
type sends []send

// of is route's transformed request; nil when the route has no transform
// (the record is sent as received).
func (ss sends) of(route string) *transform.Request {
	for i := range ss {
		if ss[i].route == route {
			return &ss[i].req
		}
	}
	return nil
}

// transformed runs t's transform on record r: what the plan reads, and
// the request to send when there is one.
func (p *setup) transformed(r *kgo.Record, provider string, t *target) (decide.Transformed, *transform.Request) {
	res, err := t.transform.Run(transform.Request{
		Body:        r.Value,
		ContentType: headers.Value(r, headers.ContentType),
		Headers:     headers.HTTP(r),
		EventType:   headers.Value(r, headers.EventType),
		Provider:    provider,
		Route:       t.route,
	})
	switch {
	case err != nil:
		p.cfg.Logger.Warn("transform failed: to the DLQ", "key", string(r.Key), "route", t.route, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return decide.Transformed{Err: err}, nil
	case res.Skip:
		return decide.Transformed{Skip: true}, nil
	}
	return decide.Transformed{}, &res.Request
}

// transformedCopy is a topic route's record of a transformed request:
// the record's key and hookline headers, with the request's body, its
// content type and its headers (http.*) instead of the record's.
func transformedCopy(topic string, r *kgo.Record, route string, req *transform.Request) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: req.Body, Headers: make([]kgo.RecordHeader, 0, len(r.Headers)+len(req.Headers)+1)}
	for _, h := range r.Headers {
		if h.Key != headers.ContentType && !strings.HasPrefix(h.Key, headers.HTTPPrefix) {
			out.Headers = append(out.Headers, h)
		}
	}
	if req.ContentType != "" {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: headers.ContentType, Value: []byte(req.ContentType)})
	}
	for _, h := range req.Headers {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: headers.HTTPName(h.Key), Value: h.Value})
	}
	setRoute(out, route)
	return out
}
