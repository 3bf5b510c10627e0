package compose

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
	"github.com/hookline/hookline/pkg/retry"
)

// TestPriorityMatrix loads providers.example.yaml as ingest and the
// processor do (with dummy secrets) and checks that it writes seed 000's
// Queue Priority Matrix and seed 004's order rule literally: for each row,
// an event of that type goes to one route, of that priority and timeout,
// with that many attempts under the default HOOKLINE_RETRY_TIERS (1 + the
// route's tiers; "Retries" in the matrix counts attempts). The Default row
// takes every event no other row names: a provider's otherwise route
// ("rest"), or the provider-level destination of a provider without rows
// (github's route "default"); no event of any provider is unrouted.
func TestPriorityMatrix(t *testing.T) {
	dummy := func(name string) (string, bool) {
		switch {
		case strings.HasSuffix(name, "_SIGNING_SECRET"):
			return "whsec_ZHVtbXktc2lnbmluZy1rZXk=", true
		case strings.HasSuffix(name, "_SECRET"):
			return "dummy-secret", true
		}
		return "", false
	}
	if _, err := providers.Load("providers.example.yaml", dummy); err != nil {
		t.Fatalf("ingest's load: %v", err)
	}
	reg, err := providers.LoadForProcessor("providers.example.yaml", dummy)
	if err != nil {
		t.Fatalf("the processor's load: %v", err)
	}
	all := retry.DefaultSchedule()
	schedules, err := reg.RetrySchedules(all)
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		provider, eventType string
		route               string
		priority            providers.Priority
		timeout             time.Duration
		attempts            int
	}{
		{"retell", "call_inbound", "call-inbound", providers.PriorityCritical, 60 * time.Second, 1},
		{"retell", "call_ended", "call-ended", providers.PriorityHigh, 120 * time.Second, 3},
		{"retell", "call_analyzed", "call-analyzed", providers.PriorityNormal, 180 * time.Second, 3},
		{"calcom", "BOOKING_CREATED", "bookings", providers.PriorityHigh, 120 * time.Second, 3},
		{"calcom", "BOOKING_CANCELLED", "bookings", providers.PriorityHigh, 120 * time.Second, 3},
		{"stripe", "payment_intent.succeeded", "payments", providers.PriorityCritical, 60 * time.Second, 3},
		{"stripe", "payment_intent.payment_failed", "payments", providers.PriorityCritical, 60 * time.Second, 3},
		{"salla", "order.created", "orders", providers.PriorityHigh, 180 * time.Second, 3}, // seed 004
		{"salla", "order.status.updated", "orders", providers.PriorityHigh, 180 * time.Second, 3},
		// Default: what no row above names.
		{"github", "push", route.Default, providers.PriorityNormal, 180 * time.Second, 3},
		{"retell", "call_started", "rest", providers.PriorityNormal, 180 * time.Second, 3},
		{"calcom", "BOOKING_RESCHEDULED", "rest", providers.PriorityNormal, 180 * time.Second, 3},
		{"stripe", "invoice.paid", "rest", providers.PriorityNormal, 180 * time.Second, 3},
		{"salla", "product.created", "rest", providers.PriorityNormal, 180 * time.Second, 3},
	}
	for _, row := range rows {
		t.Run(row.provider+" "+row.eventType, func(t *testing.T) {
			p, ok := reg.Get(row.provider)
			if !ok {
				t.Fatalf("no provider %s", row.provider)
			}
			// The event type as ingest reads it from such a delivery.
			h, body := matrixDelivery(row.provider, row.eventType)
			d, err := p.Events(h, body)
			if err != nil || len(d.Events) != 1 || d.Events[0].Type != row.eventType {
				t.Fatalf("Events = %+v, %v: want one event of type %s", d, err, row.eventType)
			}
			if row.provider == "retell" { // the preset's key: the event, the call id, call_ended's end_timestamp
				want := "retell:" + row.eventType + ":c_1"
				if row.eventType == "call_ended" {
					want += ":" // no end_timestamp in matrixDelivery's body: an empty part
				}
				if d.Events[0].Key != want {
					t.Errorf("key %s, want %s", d.Events[0].Key, want)
				}
			}
			got := p.Match(route.Request{EventType: d.Events[0].Type, Body: d.Events[0].Body}, nil)
			if len(got) != 1 || got[0].Name != row.route {
				t.Fatalf("%s goes to %d routes (%v), want route %s only", row.eventType, len(got), got, row.route)
			}
			rt := got[0]
			if rt.Priority != row.priority || rt.Destination.Timeout != row.timeout || rt.Destination.URL == "" {
				t.Errorf("priority %v, timeout %v, destination %+v; want %v, %v, an HTTP URL", rt.Priority, rt.Destination.Timeout, rt.Destination, row.priority, row.timeout)
			}
			attempts := 1 + all.Len()
			if s, ok := schedules[route.Key(row.provider, rt.Name)]; ok {
				attempts = 1 + len(s.Used())
			}
			if attempts != row.attempts {
				t.Errorf("%d attempts, want %d", attempts, row.attempts)
			}
		})
	}
	// Every provider of the file has a Default row: an event of a type no
	// row names, or of no type at all, goes to exactly one route.
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		for _, typ := range []string{"no.row.names.this", ""} {
			if got := p.Match(route.Request{EventType: typ, Body: []byte(`{}`)}, nil); len(got) != 1 || got[0].Priority != providers.PriorityNormal {
				t.Errorf("%s: an event of type %q goes to %d routes (%v), want the Default row's route alone", name, typ, len(got), got)
			}
		}
	}
	stripe, _ := reg.Get("stripe")
	if rt, _ := stripe.Route("payments"); rt.Signing == nil || len(rt.Signing.Secrets) != 1 {
		t.Errorf("stripe payments: signing %v, want one secret read by the processor", rt.Signing)
	}
}

// matrixDelivery is a delivery of eventType as provider sends it (headers
// and body; unsigned: Events reads, Verify is not called).
func matrixDelivery(provider, eventType string) (http.Header, []byte) {
	h := http.Header{}
	switch provider {
	case "github":
		h.Set("X-GitHub-Event", eventType)
		h.Set("X-GitHub-Delivery", "d-1")
		return h, []byte(`{"ref":"refs/heads/main"}`)
	case "stripe":
		return h, []byte(`{"id":"evt_1","object":"event","type":"` + eventType + `"}`)
	case "calcom":
		return h, []byte(`{"triggerEvent":"` + eventType + `","payload":{"uid":"b_1"}}`)
	}
	return h, []byte(`{"event":"` + eventType + `","call":{"call_id":"c_1"}}`) // retell, salla
}
