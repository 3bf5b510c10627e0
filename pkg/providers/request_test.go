package providers

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestRequestShape: each preset's content types and headers, as the HTTP
// document lists them.
func TestRequestShape(t *testing.T) {
	r := testRegistry(t)
	for _, c := range []struct {
		name     string
		types    []string // nil: any
		required []string
		optional []string
	}{
		{"stripe", []string{"application/json"}, []string{"Stripe-Signature"}, nil},
		{"github", []string{"application/json", "application/x-www-form-urlencoded"}, []string{"X-Hub-Signature-256", "X-GitHub-Delivery"}, []string{"X-GitHub-Event"}},
		{"shopify", []string{"application/json", "application/xml"}, []string{"X-Shopify-Hmac-Sha256", "X-Shopify-Webhook-Id"}, []string{"X-Shopify-Topic"}},
		{"standard", nil, []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}, []string{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}},
		{"slack", []string{"application/json", "application/x-www-form-urlencoded"}, []string{"X-Slack-Signature", "X-Slack-Request-Timestamp"}, nil},
		{"gocardless", []string{"application/json"}, []string{"Webhook-Signature"}, nil},
		{"calcom", []string{"application/json"}, []string{"X-Cal-Signature-256"}, nil},
		{"acme", []string{"application/json"}, []string{"X-Acme-Signature"}, []string{"X-Acme-Delivery", "Idempotency-Key"}},
		{"acme-json", []string{"application/json"}, []string{"X-Acme-Signature"}, []string{"X-Acme-Event", "Idempotency-Key"}},
		{"acme-sha1", nil, []string{"X-Acme-Signature"}, []string{"Idempotency-Key"}},
		{"open", nil, nil, []string{"Idempotency-Key"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustGet(t, r, c.name)
			if got := p.ContentTypes(); !slices.Equal(got, c.types) {
				t.Errorf("ContentTypes %q, want %q", got, c.types)
			}
			var req, opt []string
			for _, h := range p.RequestHeaders() {
				if h.Description == "" {
					t.Errorf("%s has no description", h.Name)
				}
				if h.Required {
					req = append(req, h.Name)
				} else {
					opt = append(opt, h.Name)
				}
			}
			if !slices.Equal(req, c.required) || !slices.Equal(opt, c.optional) {
				t.Errorf("required %q optional %q, want %q and %q", req, opt, c.required, c.optional)
			}
		})
	}
	composite := mustParse(t, `
providers:
  parts:
    preset: generic
    signature: {none: true}
    idempotency_key: {header: [X-Shop, X-Order]}
    event_type: {header: X-Order}
`, env{})
	got := mustGet(t, composite, "parts").RequestHeaders()
	want := []RequestHeader{{Name: "X-Order", Required: true}, {Name: "X-Shop", Required: true}}
	if len(got) != len(want) {
		t.Fatalf("composite key's headers %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Required != want[i].Required {
			t.Errorf("composite key's headers %+v, want %+v", got, want)
		}
	}
}

// TestRequestShapeHolds: the document's word against the code. A signed
// delivery carries every required header and each listed content type
// passes; without any one required header (or with it empty) it is refused.
func TestRequestShapeHolds(t *testing.T) {
	r := testRegistry(t)
	now := time.Now()
	for _, name := range r.Names() {
		p := mustGet(t, r, name)
		t.Run(name, func(t *testing.T) {
			for _, ct := range p.ContentTypes() {
				if err := p.CheckContentType(ct); err != nil {
					t.Errorf("listed %s refused: %v", ct, err)
				}
			}
			body := []byte(`{"id":"evt_1","type":"t","data":{"id":"d1"},"events":[{"id":"EV1","action":"a"}],"event":{"type":"e"},"triggerEvent":"BOOKING_CREATED"}`)
			if p.Preset == PresetRetell { // its event is a string at /event
				body = []byte(`{"event":"call_started","call":{"call_id":"c1"}}`)
			}
			h := http.Header{}
			if err := p.Sign(body, now, h); err != nil {
				t.Fatal(err)
			}
			for _, rh := range p.RequestHeaders() {
				if rh.Required && h.Get(rh.Name) == "" {
					h.Set(rh.Name, "v-"+rh.Name) // a key header: the caller's to set
				}
			}
			accepts := func(h http.Header) error {
				if err := p.Verify(h, body, now); err != nil {
					return err
				}
				_, err := p.Events(h, body)
				return err
			}
			if err := accepts(h); err != nil {
				t.Fatalf("signed delivery with every required header refused: %v", err)
			}
			for _, rh := range p.RequestHeaders() {
				if !rh.Required {
					continue
				}
				for _, v := range []string{"", "absent"} {
					h2 := h.Clone()
					if v == "absent" {
						h2.Del(rh.Name)
					} else {
						h2.Set(rh.Name, v)
					}
					if accepts(h2) == nil {
						t.Errorf("accepted with required %s %s", rh.Name, v)
					}
				}
			}
		})
	}
}
