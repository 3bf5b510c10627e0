package rules

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
)

// TestTransform: dlq rules test shows what a matching route's transform
// would send (the processor's code on the same event), its skip, or the
// error that would dead-letter it; a route without a transform has none.
func TestTransform(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"slack.js": `function transform(r, c) {
  if (r.body.type === "invoice.voided") return null;
  if (r.body.type === "invoice.deleted") throw new Error("no invoice");
  return {body: {text: c.route + ": " + r.body.type + " " + r.body.id, sig: r.headers["stripe-signature"] !== undefined}, headers: {"x-team": "billing"}};
}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yml := "providers:\n  shop:\n    preset: stripe\n    secret_env: [S]\n    routes:\n" +
		"      slack: {events: [\"invoice.*\"], destination: {url: \"http://slack.invalid/\"}, transform: slack.js}\n" +
		"      crm: {destination: {topic: crm}}\n"
	path := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := providers.LoadWithoutSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := reg.Get("shop")
	h := http.Header{"Stripe-Signature": {"t=1,v1=00"}, "Content-Type": {"application/json"}}
	rec := &kgo.Record{Key: []byte("shop:evt_9"), Value: []byte(`{"id":"evt_9","type":"invoice.deleted"}`)}
	headers.Set(rec, headers.Provider, "shop")
	headers.Set(rec, headers.EventType, "invoice.deleted")
	for _, tc := range []struct {
		name string
		in   Input
		want Transformed
	}{
		{"sent", Input{Body: []byte(`{"id":"evt_1","type":"invoice.paid"}`), Header: h},
			Transformed{Script: "slack.js", Body: `{"text":"slack: invoice.paid evt_1","sig":true}`, Headers: map[string]string{"content-type": "application/json", "x-team": "billing"}}},
		{"skipped", Input{Body: []byte(`{"id":"evt_2","type":"invoice.voided"}`), Header: h}, Transformed{Script: "slack.js", Skip: true}},
		{"failed, from a stored record", FromRecord(rec, "dlq 0:1"), Transformed{Script: "slack.js", Error: "transform slack.js: threw: Error: no invoice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Test(p, tc.in, Transform)
			if err != nil {
				t.Fatal(err)
			}
			for _, rr := range res.Events[0].Routes {
				got := rr.Transformed
				if rr.Route == "crm" {
					if got != nil {
						t.Errorf("crm (no transform): transformed %+v", got)
					}
					continue
				}
				if got == nil || got.Script != tc.want.Script || len(got.SHA256) != 64 || got.Skip != tc.want.Skip || got.Body != tc.want.Body ||
					!strings.HasPrefix(got.Error, tc.want.Error) || len(got.Headers) != len(tc.want.Headers) {
					t.Fatalf("slack: transformed %+v; want %+v", got, tc.want)
				}
				for k, v := range tc.want.Headers {
					if got.Headers[k] != v {
						t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
					}
				}
			}
		})
	}
}
