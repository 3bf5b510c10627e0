package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
)

// TestPayloadSchema sends order events to the providers of
// testdata/providers.yaml that check them against
// compose/schemas/order.schema.json: shop (on_invalid: reject) and
// shop-dlq (the default, dlq). Ingest checks shop's bodies only: a
// shop-dlq body, valid or not, is accepted unmarked, and the processor
// checks it (its TestInvalidPayloadToDLQ).
func TestPayloadSchema(t *testing.T) {
	const (
		valid   = `{"id":"evt_s1","type":"order.created","data":{"order_id":"o1","amount":1200,"currency":"EUR"}}`
		invalid = `{"id":"evt_s2","type":"order.created","data":{"order_id":"o1","amount":"12.00","currency":"euro"}}`
		other   = `{"id":"evt_s3","type":"customer.created"}` // shop's schema is for order.* only
	)
	cases := []struct {
		name, provider, body string
		status               int
		message              []string
	}{
		{name: "valid, reject", provider: "shop", body: valid, status: 202},
		{name: "valid, dlq", provider: "shop-dlq", body: valid, status: 202},
		{name: "no schema for the type", provider: "shop", body: other, status: 202},
		{name: "invalid, dlq: accepted unmarked, for the processor to check", provider: "shop-dlq", body: invalid, status: 202},
		{name: "not JSON, dlq", provider: "shop-dlq", body: `{"id":"evt_s4"} trailing`, status: 400}, // the key rule needs JSON first
		{name: "invalid, reject: 422", provider: "shop", body: invalid, status: 422,
			message: []string{"order.schema.json", "at '/data/amount': got string, want integer", "at '/data/currency'"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePublisher{}
			s, reg := testServer(t, pub, nil)
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, signed(t, reg, tc.provider, "application/json", []byte(tc.body), time.Now(), nil))
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status == 422 {
				var a errAnswer
				if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Error != CodeInvalidPayload {
					t.Fatalf("answer %s (%v), want error %s", w.Body, err, CodeInvalidPayload)
				}
				for _, m := range tc.message {
					if !strings.Contains(a.Message, m) {
						t.Errorf("message %q lacks %q", a.Message, m)
					}
				}
				if n := pub.count(); n != 0 {
					t.Fatalf("%d records produced for a refused delivery", n)
				}
				if n := invalidCount(t, s, tc.provider, invalidRejected); n != 1 {
					t.Errorf("rejected counted %v, want 1", n)
				}
				return
			}
			if tc.status != 202 {
				return
			}
			if n := pub.count(); n != 1 {
				t.Fatalf("%d records produced, want 1", n)
			}
			if v, ok := headers.Get(pub.records[0], headers.InvalidPayload); ok {
				t.Fatalf("a record marked %s=%q: ingest checks only on_invalid: reject", headers.InvalidPayload, v)
			}
			if n := invalidCount(t, s, tc.provider, invalidRejected); n != 0 {
				t.Errorf("rejected counted %v for an accepted delivery, want 0", n)
			}
		})
	}
}

// invalidCount reads hookline_ingest_invalid_payloads_total{provider, action}.
func invalidCount(tb testing.TB, s *Server, provider, action string) float64 {
	tb.Helper()
	mfs, err := s.cfg.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hookline_ingest_invalid_payloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["action"] == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
