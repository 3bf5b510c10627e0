// Package rules tries a provider's routes on one delivery before they go
// live (dlq rules test, POST /rules/test): for each route, whether the
// event matches and which part of its rule decided. It runs the
// processor's own matching (providers.Provider.Explain, the code
// Provider.Match is) over the same providers file.
package rules

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
)

// Input is the delivery to try: a request (Body, Header and, when the
// provider cannot tell it from them, EventType), or a stored record
// (Record: a DLQ entry or a webhooks.raw record, whose event type, body and
// copied headers are used as the processor would see them).
type Input struct {
	Body      []byte
	Header    http.Header
	EventType string // "": the provider's own derivation (ingest's)
	Record    *kgo.Record
	Source    string // what the input is, for the answer ("body", "dlq 3:17", "raw 0:42")
}

// Transformer fills a matching route's Transformed (the route's transform
// run on the event); nil, or a nil answer, leaves it empty. The extension
// point for routes with a transform.
type Transformer func(p *providers.Provider, rt *providers.Route, ev Event) *Transformed

// Event is one event of the input as the routes see it, with the
// headers and content type the processor would give a route's transform
// (a record's copied http.* headers; for a request, those its provider's
// ingest copies).
type Event struct {
	Type        string
	Key         string
	Request     route.Request
	Headers     []kgo.RecordHeader
	ContentType string
}

// Result is the answer: per event of the input, per route, the verdict.
type Result struct {
	Provider string        `json:"provider"`
	Source   string        `json:"source"`
	Events   []EventResult `json:"events"`
}

// EventResult is one event's verdicts. Unrouted: no route takes it.
type EventResult struct {
	EventType string        `json:"event_type"`
	Key       string        `json:"key,omitempty"`
	Unrouted  bool          `json:"unrouted"`
	Routes    []RouteResult `json:"routes"`
}

// RouteResult is one route's verdict: Matched, the part of its rule that
// decided (By: all, events, where, filter or otherwise) and a sentence
// saying how.
type RouteResult struct {
	Route       string       `json:"route"`
	Destination string       `json:"destination"`
	Matched     bool         `json:"matched"`
	By          string       `json:"by"`
	Reason      string       `json:"reason"`
	Glob        string       `json:"glob,omitempty"`
	Where       string       `json:"where,omitempty"`
	Filter      *route.Place `json:"filter,omitempty"`
	YieldedTo   string       `json:"yielded_to,omitempty"`
	// Transformed is the request the route would send after its
	// transform, for a matching route that has one (Transformer); nil
	// otherwise.
	Transformed *Transformed `json:"transformed,omitempty"`
}

// Transformed is what a route's transform made of the event: the request
// to send, a skip, or the error that would dead-letter it.
type Transformed struct {
	Script  string            `json:"script"`
	SHA256  string            `json:"sha256,omitempty"`
	Skip    bool              `json:"skip,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// Test tries every route of p on the input's events. An input body the
// provider derives no event from (and no EventType) is an error saying so.
// Cost: the provider's event derivation and one Explain per event.
func Test(p *providers.Provider, in Input, tr Transformer) (Result, error) {
	res := Result{Provider: p.Name, Source: in.Source, Events: []EventResult{}}
	evs, err := events(p, in)
	if err != nil {
		return res, err
	}
	for _, ev := range evs {
		er := EventResult{EventType: ev.Type, Key: ev.Key, Unrouted: true, Routes: []RouteResult{}}
		for _, v := range p.Explain(ev.Request) {
			rr := verdict(v)
			if rr.Matched {
				er.Unrouted = false
				if tr != nil {
					rr.Transformed = tr(p, v.Route, ev)
				}
			}
			er.Routes = append(er.Routes, rr)
		}
		res.Events = append(res.Events, er)
	}
	return res, nil
}

// events are the input's events: a record's one, a request with an event
// type given as one event, else what the provider derives from it.
func events(p *providers.Provider, in Input) ([]Event, error) {
	if in.Record != nil {
		req := providers.RequestOf(in.Record)
		return []Event{{Type: req.EventType, Key: string(in.Record.Key), Request: req,
			Headers: headers.HTTP(in.Record), ContentType: headers.Value(in.Record, headers.ContentType)}}, nil
	}
	h := in.Header
	if h == nil {
		h = http.Header{}
	}
	var copied []kgo.RecordHeader
	for _, fh := range p.ForwardHeaders(h) {
		copied = append(copied, kgo.RecordHeader{Key: strings.ToLower(fh.Name), Value: []byte(fh.Value)})
	}
	if in.EventType != "" {
		return []Event{{Type: in.EventType, Request: providers.HTTPRequest(in.EventType, in.Body, h), Headers: copied, ContentType: h.Get("Content-Type")}}, nil
	}
	d, err := p.Events(h, in.Body)
	if err != nil {
		return nil, fmt.Errorf("provider %q derives no event from this request (%w); give the event type", p.Name, err)
	}
	out := make([]Event, 0, len(d.Events))
	for _, ev := range d.Events {
		out = append(out, Event{Type: ev.Type, Key: ev.Key, Request: providers.HTTPRequest(ev.Type, ev.Body, h), Headers: copied, ContentType: h.Get("Content-Type")})
	}
	return out, nil
}

// verdict turns a route's verdict into its answer.
func verdict(v providers.RouteVerdict) RouteResult {
	rr := RouteResult{Route: v.Route.Name, Matched: v.Matched, By: v.By, Glob: v.Glob, Where: v.Where, Filter: v.At, YieldedTo: v.YieldedTo}
	if d := v.Route.Destination; d != nil {
		rr.Destination = d.URL
		if d.Topic != "" {
			rr.Destination = "topic " + d.Topic
		}
	}
	rr.Reason = reason(v)
	return rr
}

// reason says in a sentence how the verdict came.
func reason(v providers.RouteVerdict) string {
	switch v.By {
	case route.ByAll:
		return "the route takes every event"
	case route.ByOtherwise:
		if v.Matched {
			return "no other route matched: the otherwise route takes it"
		}
		return fmt.Sprintf("route %q matched: the otherwise route yields", v.YieldedTo)
	case route.ByEvents:
		if v.Matched {
			return fmt.Sprintf("event type matches %q", v.Glob)
		}
		return "event type matches none of the route's events"
	case route.ByWhere:
		switch {
		case v.NotJSON:
			return "where: the body is not JSON"
		case v.Matched:
			return "every where condition holds"
		}
		return fmt.Sprintf("where %s does not hold", v.Where)
	case route.ByFilter:
		switch {
		case v.NotJSON:
			return "filter: the body is not JSON"
		case v.Matched:
			return fmt.Sprintf("the filter holds (last condition checked: %s)", v.At)
		}
		return fmt.Sprintf("the filter fails at %s", v.At)
	}
	return v.By
}

// FromRecord is the input of a stored record: a DLQ entry or a raw record.
func FromRecord(r *kgo.Record, source string) Input {
	return Input{Record: r, Source: source}
}

// ProviderOf is the provider a stored record is of (its hookline.provider
// header).
func ProviderOf(r *kgo.Record) string { return headers.Value(r, headers.Provider) }
