package rules

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookline/hookline/pkg/providers"
)

const file = `
providers:
  shop:
    preset: stripe
    secret_env: [S]
    routes:
      big:
        events: ["invoice.*"]
        where: {"/livemode": true}
        filter: {body: {data: {object: {amount: {$gte: 100}}}}}
        destination: {url: "http://big.invalid/"}
      crm: {events: ["customer.*"], destination: {topic: crm}}
      rest: {otherwise: true, destination: {url: "http://rest.invalid/"}}
`

// TestTest: each route's verdict and the part that decided, for events
// the provider derives itself (stripe: the body's type and id) and for a
// given event type; the Transformer is asked for matching routes only.
func TestTest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := providers.LoadWithoutSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.Get("shop")
	type want struct {
		matched bool
		by      string
	}
	cases := []struct {
		name string
		in   Input
		key  string
		want map[string]want
	}{
		{"filter holds", Input{Body: []byte(`{"id":"evt_1","type":"invoice.paid","livemode":true,"data":{"object":{"amount":150}}}`)}, "shop:evt_1",
			map[string]want{"big": {true, "filter"}, "crm": {false, "events"}, "rest": {false, "otherwise"}}},
		{"filter fails", Input{Body: []byte(`{"id":"evt_2","type":"invoice.paid","livemode":true,"data":{"object":{"amount":5}}}`)}, "shop:evt_2",
			map[string]want{"big": {false, "filter"}, "crm": {false, "events"}, "rest": {true, "otherwise"}}},
		{"where fails first", Input{Body: []byte(`{"id":"evt_3","type":"invoice.paid","livemode":false}`)}, "shop:evt_3",
			map[string]want{"big": {false, "where"}, "rest": {true, "otherwise"}}},
		{"event type given", Input{Body: []byte(`{}`), EventType: "customer.created", Header: http.Header{}}, "",
			map[string]want{"big": {false, "events"}, "crm": {true, "events"}, "rest": {false, "otherwise"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked := map[string]bool{}
			res, err := Test(p, tc.in, func(_ *providers.Provider, rt *providers.Route, _ Event) *Transformed {
				asked[rt.Name] = true
				return &Transformed{Script: "x.js"}
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Events) != 1 || res.Events[0].Key != tc.key {
				t.Fatalf("events %+v, want one with key %q", res.Events, tc.key)
			}
			for _, r := range res.Events[0].Routes {
				w, ok := tc.want[r.Route]
				if ok && (r.Matched != w.matched || r.By != w.by) {
					t.Errorf("%s: matched %v by %s (%s), want %v by %s", r.Route, r.Matched, r.By, r.Reason, w.matched, w.by)
				}
				if asked[r.Route] != r.Matched || (r.Transformed != nil) != r.Matched {
					t.Errorf("%s: transformer asked %v, transformed %v, matched %v", r.Route, asked[r.Route], r.Transformed, r.Matched)
				}
			}
		})
	}
	if _, err := Test(p, Input{Body: []byte(`not json`)}, nil); err == nil {
		t.Error("a body stripe derives no event from was taken")
	}
}
