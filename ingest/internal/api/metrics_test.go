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
// routes' events lists (providers.Provider.EventTypeLabel): a type a route
// names, the glob it matches, else "other"; a batch counts each element.
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
	s, _ := testServer(t, &fakePublisher{}, func(c *Config) { c.Providers = reg })
	h := s.Handler()
	now := time.Now()
	for _, c := range []struct{ provider, body string }{
		{"stripe", `{"id":"evt_1","type":"invoice.paid"}`},
		{"stripe", `{"id":"evt_2","type":"invoice.created"}`},
		{"stripe", `{"id":"evt_3","type":"customer.created"}`},
		{"stripe", `{"id":"evt_4","type":"customer.deleted"}`},
		{"stripe", `{"id":"evt_5","type":"a.type.nobody.named"}`},
		{"gocardless", `{"events":[{"id":"EV1","resource_type":"payments","action":"created"},{"id":"EV2","resource_type":"mandates","action":"created"}]}`},
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
		{"stripe", "invoice.*"}: 2, {"stripe", "customer.created"}: 1, {"stripe", "other"}: 2,
		{"gocardless", "payments.*"}: 1, {"gocardless", "other"}: 1,
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
