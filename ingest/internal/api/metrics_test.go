package api

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
)

// TestRecordsByEventType: hookline_ingest_records_total counts each
// accepted record under its provider and an event_type bounded by the
// providers file and EventTypeLabels (package typelabel): a type the file
// names, else one of the first EventTypeLabels other types of its provider,
// else the glob of the file it matches, else "other"; a batch counts each
// element.
func TestRecordsByEventType(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(pf, []byte(`
providers:
  stripe:
    preset: stripe
    secret_env: [HL_TEST_SECRET]
    routes:
      billing: {events: ["invoice.*", "customer.created"], destination: {url: "http://billing/"}}
      audit: {destination: {topic: audit}}
  gocardless:
    preset: gocardless
    secret_env: [HL_TEST_SECRET]
    routes:
      payments: {events: ["payments.*"], destination: {url: "http://payments/"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := providers.Load(pf, lookup)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := testServer(t, &fakePublisher{}, func(c *Config) { c.Providers = reg; c.EventTypeLabels = 2 })
	h := s.Handler()
	now := time.Now()
	for _, c := range []struct{ provider, body string }{
		{"stripe", `{"id":"evt_1","type":"invoice.paid"}`},        // the first other type
		{"stripe", `{"id":"evt_2","type":"customer.created"}`},    // named
		{"stripe", `{"id":"evt_3","type":"customer.deleted"}`},    // the second
		{"stripe", `{"id":"evt_4","type":"invoice.created"}`},     // the third: its glob
		{"stripe", `{"id":"evt_5","type":"a.type.nobody.named"}`}, // no glob: other
		{"stripe", `{"id":"evt_6","type":"invoice.paid"}`},
		{"gocardless", `{"events":[{"id":"EV1","resource_type":"payments","action":"created"},{"id":"EV2","resource_type":"mandates","action":"created"},{"id":"EV3","resource_type":"payments","action":"failed"}]}`},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, reg, c.provider, "application/json", []byte(c.body), now, nil))
		if w.Code != http.StatusAccepted {
			t.Fatalf("%s %s: %d %s", c.provider, c.body, w.Code, w.Body)
		}
	}
	mfs, err := s.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "hookline_ingest_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "provider":
					k[0] = l.GetValue()
				case "event_type":
					k[1] = l.GetValue()
				}
			}
			got[k] = m.GetCounter().GetValue()
		}
	}
	want := map[[2]string]float64{
		{"stripe", "invoice.paid"}: 2, {"stripe", "customer.created"}: 1, {"stripe", "customer.deleted"}: 1,
		{"stripe", "invoice.*"}: 1, {"stripe", "other"}: 1,
		{"gocardless", "payments.created"}: 1, {"gocardless", "mandates.created"}: 1, {"gocardless", "payments.*"}: 1,
	}
	if len(got) != len(want) {
		t.Fatalf("records by provider and event type %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
