package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
)

// MixedProviders are the providers of the harness's providers file that
// deliver to the destination, one per signing scheme and key rule: HMAC over
// a timestamp (stripe, standard), over the body in hex (github, gocardless,
// calcom) and in base64 (shopify); keys from the body, from a header, from a
// batch (gocardless sends two events per request) and composed (calcom).
var MixedProviders = []string{"stripe", "github", "shopify", "standard", "gocardless", "calcom"}

// Event is one delivery as a provider would send it: the body, the headers
// that carry its identity (the signature is added when it is sent, so a
// re-sent event is signed afresh, as providers do), the idempotency keys
// ingest must answer with, and their event type.
type Event struct {
	Provider string
	Body     []byte
	Header   http.Header
	Keys     []string
	// Type is the event type ingest reads for every key ("" for a batch
	// whose keys differ in type: gocardless).
	Type string
	// Signed says Header already carries the signature (made by the
	// provider's own library): Send leaves it as it is.
	Signed bool
}

// NewEvent builds a delivery of provider whose identity derives from id: the
// same id gives the same keys, so sending it again is a duplicate.
func NewEvent(provider, id string) Event { return NewTypedEvent(provider, id, "") }

// NewTypedEvent is NewEvent of event type typ, for the providers whose body
// names its type (stripe, standard, fastpay, slowcrm); "" keeps the
// shape's own type (invoice.paid for those). It panics when provider
// cannot carry typ.
func NewTypedEvent(provider, id, typ string) Event {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	ev := Event{Provider: provider, Header: h}
	switch provider {
	case "stripe", "standard", isolation.Fast, isolation.Slow:
	default:
		if typ != "" {
			panic("e2e: provider " + provider + " does not carry its event type in the body")
		}
	}
	if typ == "" {
		typ = "invoice.paid"
	}
	switch provider {
	case "stripe":
		ev.Body, ev.Type = stripeEvent(id, typ), typ
		ev.Keys = []string{"stripe:" + id}
	case "github":
		ev.Body, ev.Type = []byte(fmt.Sprintf(`{"action":"opened","issue":{"number":1,"title":%q}}`, id)), "issues"
		h.Set("X-GitHub-Event", "issues")
		h.Set("X-GitHub-Delivery", id)
		ev.Keys = []string{"github:" + id}
	case "shopify":
		ev.Body, ev.Type = []byte(fmt.Sprintf(`{"id":%q,"total_price":"10.00"}`, id)), "orders/create"
		h.Set("X-Shopify-Topic", "orders/create")
		h.Set("X-Shopify-Webhook-Id", id)
		h.Set("X-Shopify-Shop-Domain", "e2e.myshopify.com")
		ev.Keys = []string{"shopify:" + id}
	case "standard":
		ev.Body, ev.Type = []byte(fmt.Sprintf(`{"type":%q,"data":{"id":%q}}`, typ, id)), typ
		h.Set("Webhook-Id", id)
		ev.Keys = []string{"standard:" + id}
	case "gocardless":
		ev.Body = []byte(fmt.Sprintf(`{"events":[{"id":"%s_a","resource_type":"payments","action":"confirmed"},`+
			`{"id":"%s_b","resource_type":"payments","action":"paid_out"}]}`, id, id))
		ev.Keys = []string{"gocardless:" + id + "_a", "gocardless:" + id + "_b"}
	case "calcom":
		ev.Body, ev.Type = []byte(fmt.Sprintf(`{"triggerEvent":"BOOKING_CREATED","payload":{"uid":%q}}`, id)), "BOOKING_CREATED"
		ev.Keys = []string{"calcom:BOOKING_CREATED:" + id}
	case isolation.Fast, isolation.Slow: // generic, keyed by the body's id
		ev.Body, ev.Type = stripeEvent(id, typ), typ
		ev.Keys = []string{provider + ":" + id}
	case "outcomes":
		ev.Body, ev.Type = []byte(fmt.Sprintf(`{"id":%q,"type":"audit"}`, id)), ""
		ev.Keys = []string{"outcomes:" + id}
	default:
		panic("e2e: no event shape for provider " + provider)
	}
	return ev
}

// Answer is what ingest said to one request.
type Answer struct {
	Status int
	// Keys are the idempotency keys of a 202 (idempotency_key, or
	// idempotency_keys for a batch).
	Keys []string
	// Error is the error code of a refusal.
	Error string
	// Duplicate says ingest recognised a delivery it accepted before under
	// the same key (status "duplicate"): a 202 that produced nothing.
	Duplicate bool
	// ReplayOf is set when ingest took the delivery for a replay of the
	// one accepted under this key (status "replay"): a 202 that produced
	// nothing, its keys never delivered.
	ReplayOf string
}

// Sign sets on h the signature headers provider sends for body, signed
// now with the harness's secret: for tests that build their own requests
// (chunked, raw or hostile ones). Cost: one HMAC over the body.
func (s *System) Sign(provider string, body []byte, h http.Header) error {
	p, ok := s.reg.Get(provider)
	if !ok {
		return fmt.Errorf("no provider %s in the harness", provider)
	}
	return p.Sign(body, time.Now(), h)
}

// Send signs ev now (unless ev.Signed) and posts it to the running ingest once.
func (s *System) Send(ev Event) (Answer, error) {
	s.mu.Lock()
	base := s.ingest
	s.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+ev.Provider, bytes.NewReader(ev.Body))
	if err != nil {
		return Answer{}, err
	}
	req.Header = ev.Header.Clone()
	if !ev.Signed {
		if err := s.Sign(ev.Provider, ev.Body, req.Header); err != nil {
			return Answer{}, err
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Status: resp.StatusCode}, err
	}
	a := Answer{Status: resp.StatusCode}
	var body struct {
		Key      string   `json:"idempotency_key"`
		Keys     []string `json:"idempotency_keys"`
		Error    string   `json:"error"`
		Status   string   `json:"status"`
		ReplayOf string   `json:"replay_of"`
	}
	if err := json.Unmarshal(b, &body); err != nil && resp.StatusCode == http.StatusAccepted {
		return a, fmt.Errorf("answer %d is not JSON: %q", resp.StatusCode, b)
	}
	a.Error, a.Duplicate, a.ReplayOf = body.Error, body.Status == "duplicate", body.ReplayOf
	if body.Key != "" {
		a.Keys = []string{body.Key}
	}
	a.Keys = append(a.Keys, body.Keys...)
	return a, nil
}

// KeyFraction maps key to a number in [0, 1), the same for the same key in
// every run: tests use it to give a share of keys a behaviour. (SHA-256, not
// FNV: FNV's high bits barely change between keys that differ in their last
// digit, so "a random tenth" of evt_1, evt_2, ... came out as runs of
// neighbours.)
func KeyFraction(key string) float64 {
	h := sha256.Sum256([]byte(key))
	return float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53)
}
