package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
	"github.com/hookline/hookline/pkg/providers/keys"
	"github.com/hookline/hookline/pkg/providers/signature"
)

// MaxBatchEvents bounds the events of one batch delivery (GoCardless): each
// becomes a record of its own, so a 449 KB batch of 20,000 tiny events
// made 20,000 records per request. GoCardless batches a few hundred at most.
const MaxBatchEvents = 1000

// eventsFunc derives the records of one verified request.
type eventsFunc func(p *Provider, h http.Header, body []byte) (Delivery, error)

func one(key, typ string, body []byte) Delivery {
	return Delivery{Events: []Event{{Key: key, Type: typ, Body: body}}}
}

// headerEvents keys a delivery on a header the provider always sends and
// types it from another (github, shopify); the body is not parsed.
func headerEvents(keyHeader, typeHeader string) eventsFunc {
	return func(p *Provider, h http.Header, body []byte) (Delivery, error) {
		id := h.Get(keyHeader)
		if id == "" {
			return Delivery{}, malformed("missing %s header", keyHeader)
		}
		return one(p.Name+":"+id, h.Get(typeHeader), body), nil
	}
}

// objectWith parses b as a JSON object that must hold a string (or number)
// at field; where names b in the error ("body", "events[2]").
func objectWith(b []byte, where, field string) (jsonptr.Object, string, error) {
	o, err := jsonptr.ParseObject(b)
	if err != nil {
		return nil, "", malformed("%s is not a JSON object", where)
	}
	v := o.Str(field)
	if v == "" {
		return nil, "", malformed("%s has no %s", where, field)
	}
	return o, v, nil
}

// stripeEvents: key <name>:<id>, type from "type".
func stripeEvents(p *Provider, _ http.Header, body []byte) (Delivery, error) {
	o, id, err := objectWith(body, "body", "id")
	if err != nil {
		return Delivery{}, err
	}
	return one(p.Name+":"+id, o.Str("type"), body), nil
}

// standardEvents: key <name>:<webhook-id>; type from a JSON body's "type"
// when there is one.
func standardEvents(p *Provider, h http.Header, body []byte) (Delivery, error) {
	idName, _, _ := signature.StandardHeaders(h)
	id := h.Get(idName)
	if id == "" {
		return Delivery{}, malformed("missing %s header", idName)
	}
	typ := ""
	if o, err := jsonptr.ParseObject(body); err == nil {
		typ = o.Str("type")
	}
	return one(p.Name+":"+id, typ, body), nil
}

// slackEvents answers a url_verification with its challenge and keys other
// deliveries on event_id, or on the body's hash when there is none (slash
// commands and interactivity arrive form-encoded); keys are <name>:<...>.
func slackEvents(p *Provider, _ http.Header, body []byte) (Delivery, error) {
	o, err := jsonptr.ParseObject(body)
	if err != nil {
		return one(p.Name+":"+keys.BodyHash(body), "", body), nil
	}
	if o.Str("type") == "url_verification" {
		challenge := o.Str("challenge")
		if challenge == "" {
			return Delivery{}, malformed("url_verification has no challenge")
		}
		answer, err := json.Marshal(struct {
			Challenge string `json:"challenge"`
		}{challenge})
		if err != nil {
			return Delivery{}, malformed("url_verification challenge: %v", err)
		}
		return Delivery{Challenge: answer, ChallengeContentType: "application/json"}, nil
	}
	typ := o.Str("event", "type")
	if typ == "" {
		typ = o.Str("type")
	}
	key := p.Name + ":" + keys.BodyHash(body)
	if id := o.Str("event_id"); id != "" {
		key = p.Name + ":" + id
	}
	return one(key, typ, body), nil
}

// calcomEvents: key <name>:<triggerEvent>:<payload.uid>[:<payload.rescheduleUid>].
// Triggers without a booking uid fall back to payload.bookingUid (no-show
// updates), payload.oooEntry.uuid (out of office) and then the body's hash
// (PING and forms), so an authentic delivery is never refused for its shape.
func calcomEvents(p *Provider, _ http.Header, body []byte) (Delivery, error) {
	o, trigger, err := objectWith(body, "body", "triggerEvent")
	if err != nil {
		return Delivery{}, err
	}
	id := o.Str("payload", "uid")
	if id == "" {
		id = o.Str("payload", "bookingUid")
	}
	if id == "" {
		id = o.Str("payload", "oooEntry", "uuid")
	}
	if id == "" {
		id = keys.BodyHash(body)
	} else if r := o.Str("payload", "rescheduleUid"); r != "" {
		id += ":" + r
	}
	return one(p.Name+":"+trigger+":"+id, trigger, body), nil
}

// gocardlessEvents splits {"events":[...]} into one record per event, keyed
// <name>:<event id>, whose body is that element's exact bytes, sliced from
// the request body. Cost: one
// tokenising pass over the body plus one parse of each event.
func gocardlessEvents(p *Provider, _ http.Header, body []byte) (Delivery, error) {
	raws, err := splitEvents(body)
	if err != nil {
		return Delivery{}, err
	}
	d := Delivery{Events: make([]Event, 0, len(raws)), Batch: true}
	for i, raw := range raws {
		o, id, err := objectWith(raw, "events["+strconv.Itoa(i)+"]", "id")
		if err != nil {
			return Delivery{}, err
		}
		typ := o.Str("resource_type")
		if action := o.Str("action"); action != "" {
			if typ != "" {
				typ += "."
			}
			typ += action
		}
		d.Events = append(d.Events, Event{Key: p.Name + ":" + id, Type: typ, Body: raw})
	}
	return d, nil
}

// splitEvents walks the top-level object with a json.Decoder and returns each
// element of its "events" array as a sub-slice of body.
func splitEvents(body []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	notJSON := malformed("body is not a JSON object")
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notJSON
	}
	var events [][]byte
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notJSON
		}
		if name, _ := tok.(string); name != "events" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, notJSON
			}
			continue
		}
		if seen {
			return nil, malformed("body has more than one events member")
		}
		seen = true
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return nil, malformed("events is not an array")
		}
		for dec.More() {
			if len(events) == MaxBatchEvents {
				return nil, malformed("events has more than %d elements", MaxBatchEvents)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, notJSON
			}
			end := int(dec.InputOffset())
			start := end - len(raw)
			if start < 0 || end > len(body) || !bytes.Equal(body[start:end], raw) {
				return nil, malformed("events[%d] could not be located in the body", len(events))
			}
			events = append(events, body[start:end:end])
		}
		if _, err := dec.Token(); err != nil { // ]
			return nil, notJSON
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, notJSON
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, malformed("body has data after the JSON object")
	}
	switch {
	case !seen:
		return nil, malformed("body has no events array")
	case len(events) == 0:
		return nil, malformed("events array is empty")
	}
	return events, nil
}

const headerIdempotencyKey = "Idempotency-Key"

// genericEvents (generic and retell): key <name>:<configured rule>, else
// <name>:<Idempotency-Key>, else <name>:sha256:<hex of body>; a composite
// rule gives keys.Compose's <name>:<part>:<part>... or a MalformedError, never
// one of those fallbacks (a part may have a body-hash fallback of its own).
// Type from the event_type rule, read first: a part may apply to some
// event types only.
func genericEvents(p *Provider, h http.Header, body []byte) (Delivery, error) {
	var typ string
	if p.typeRule != nil {
		v, err := p.typeRule.Value(h, body, false)
		if err != nil {
			return Delivery{}, malformed("%v", err)
		}
		typ = v
	}
	var key string
	if p.keyParts != nil {
		k, err := keys.Compose(p.Name, p.keyParts, typ, h, body)
		if err != nil {
			return Delivery{}, malformed("%v", err)
		}
		key = k
	}
	if p.keyRule != nil {
		v, err := p.keyRule.Value(h, body, true)
		if err != nil {
			return Delivery{}, malformed("%v", err)
		}
		if v != "" {
			key = p.Name + ":" + v
		}
	}
	if key == "" {
		if v := h.Get(headerIdempotencyKey); v != "" {
			key = p.Name + ":" + v
		}
	}
	if key == "" {
		key = p.Name + ":" + keys.BodyHash(body)
	}
	return one(key, typ, body), nil
}
