package api

import (
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/schemas"
)

// mustDocument generates the served document for the test providers file
// and decodes it, with the static one, into plain values.
func mustDocument(tb testing.TB, reg *providers.Registry, ipLimit bool) (raw []byte, served, static map[string]any) {
	tb.Helper()
	raw, err := openAPIDocument(reg, ipLimit)
	if err != nil {
		tb.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &served); err != nil {
		tb.Fatal(err)
	}
	b, err := schemas.Document(schemas.IngestAPI)
	if err != nil {
		tb.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &static); err != nil {
		tb.Fatal(err)
	}
	return raw, served, static
}

// at walks plain YAML values by keys.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// TestOpenAPIDocument: the served document compiles (OpenAPI 3.1.0, every
// schema JSON Schema 2020-12, every example valid), and each provider's
// path lists exactly its preset's content types, its signature and key
// headers with their Required, and the answers it can give.
func TestOpenAPIDocument(t *testing.T) {
	reg, err := providers.Load("testdata/providers.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	for _, ipLimit := range []bool{false, true} {
		raw, served, _ := mustDocument(t, reg, ipLimit)
		api, err := schemas.ParseAPI("ingest.served.openapi.yaml", raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := api.CheckExamples(); err != nil {
			t.Error(err)
		}
		paths := at(served, "paths").(map[string]any)
		if _, ok := paths[webhookTemplate]; ok {
			t.Errorf("the template path %s is still there", webhookTemplate)
		}
		if at(paths, "/openapi.yaml", "get") == nil {
			t.Error("GET /openapi.yaml is not listed")
		}
		for _, name := range reg.Names() {
			p, _ := reg.Get(name)
			op, _ := at(paths, "/webhooks/"+name, "post").(map[string]any)
			if op == nil {
				t.Errorf("no POST /webhooks/%s", name)
				continue
			}
			want := p.ContentTypes()
			if want == nil {
				want = []string{anyMediaType}
			}
			if got := slices.Sorted(maps.Keys(at(op, "requestBody", "content").(map[string]any))); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("%s: content types %q, want %q", name, got, want)
			}
			type param struct {
				name     string
				required bool
			}
			var gotParams []param
			for _, x := range op["parameters"].([]any) {
				m := x.(map[string]any)
				if m["in"] != "header" {
					t.Errorf("%s: a parameter in %v", name, m["in"])
				}
				r, _ := m["required"].(bool)
				gotParams = append(gotParams, param{m["name"].(string), r})
			}
			wantParams := []param{{"X-Request-Id", false}}
			for _, h := range p.RequestHeaders() {
				wantParams = append(wantParams, param{h.Name, h.Required})
			}
			if !slices.Equal(gotParams, wantParams) {
				t.Errorf("%s: header parameters %v, want %v", name, gotParams, wantParams)
			}
			wantStatus := []string{"202", "400", "413", "500", "503"}
			if p.Preset == providers.PresetSlack {
				wantStatus = append(wantStatus, "200")
			}
			if p.Signed() {
				wantStatus = append(wantStatus, "401")
			}
			if p.ContentTypes() != nil {
				wantStatus = append(wantStatus, "415")
			}
			if p.RateLimit != nil || ipLimit {
				wantStatus = append(wantStatus, "429")
			}
			if p.RejectsInvalid() {
				wantStatus = append(wantStatus, "422")
			}
			slices.Sort(wantStatus)
			if got := slices.Sorted(maps.Keys(op["responses"].(map[string]any))); !slices.Equal(got, wantStatus) {
				t.Errorf("%s (ipLimit %v): responses %v, want %v", name, ipLimit, got, wantStatus)
			}
		}
	}
	// Exactly what the presets say, spelt out for the ones the issue named.
	_, served, _ := mustDocument(t, reg, false)
	for path, want := range map[string][]string{
		"/webhooks/stripe":   {"application/json"},
		"/webhooks/github":   {"application/json", "application/x-www-form-urlencoded"},
		"/webhooks/slack":    {"application/json", "application/x-www-form-urlencoded"},
		"/webhooks/shopify":  {"application/json", "application/xml"},
		"/webhooks/standard": {"*/*"},
	} {
		if got := slices.Sorted(maps.Keys(at(served, "paths", path, "post", "requestBody", "content").(map[string]any))); !slices.Equal(got, want) {
			t.Errorf("%s: content types %q, want %q", path, got, want)
		}
	}
	if got := at(served, "paths", "/webhooks/stripe", "post", "parameters").([]any)[1].(map[string]any); got["name"] != "Stripe-Signature" || got["required"] != true {
		t.Errorf("stripe's signature header: %v", got)
	}
}

// TestOpenAPIDocumentAgrees: the served document is the static one
// (schemas/ingest.openapi.yaml) but for the webhook paths: every other
// path, the components, servers and openapi are the same, and each
// provider's operation keeps the template's answers it lists, unchanged.
func TestOpenAPIDocumentAgrees(t *testing.T) {
	reg, err := providers.Load("testdata/providers.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	_, served, static := mustDocument(t, reg, true)
	for _, k := range []string{"openapi", "servers", "components"} {
		if !reflect.DeepEqual(served[k], static[k]) {
			t.Errorf("%s differs from %s's", k, schemas.IngestAPI)
		}
	}
	sp, tp := at(served, "paths").(map[string]any), at(static, "paths").(map[string]any)
	for path, item := range tp {
		if path == webhookTemplate {
			continue
		}
		if !reflect.DeepEqual(sp[path], item) {
			t.Errorf("%s differs from %s's", path, schemas.IngestAPI)
		}
	}
	if len(sp) != len(tp)-1+len(reg.Names()) {
		t.Errorf("%d paths served, want %d of the static document and %d providers", len(sp), len(tp)-1, len(reg.Names()))
	}
	tmpl := at(tp, webhookTemplate, "post", "responses").(map[string]any)
	for _, name := range reg.Names() {
		for code, r := range at(sp, "/webhooks/"+name, "post", "responses").(map[string]any) {
			if !reflect.DeepEqual(r, tmpl[code]) {
				t.Errorf("%s %s differs from the template's", name, code)
			}
		}
	}
	un := at(served, "x-unrouted", "responses").(map[string]any)
	for code, r := range at(static, "x-unrouted", "responses").(map[string]any) {
		if code != "404" && !reflect.DeepEqual(un[code], r) {
			t.Errorf("x-unrouted %s differs", code)
		}
	}
}

// TestOpenAPIRoute: GET /openapi.yaml answers the generated document, as
// YAML, and it holds the providers the server was given.
func TestOpenAPIRoute(t *testing.T) {
	reg, err := providers.Load("testdata/providers.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Providers: reg, Publisher: &fakePublisher{}, Topic: "webhooks.raw", MaxBodyBytes: testLimit,
		Health: obs.NewHealth("kafka"), Registry: obs.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	want, err := openAPIDocument(reg, false)
	if err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/yaml" || w.Body.String() != string(want) {
		t.Errorf("GET /openapi.yaml: %d %q, %d bytes; want 200 application/yaml, the %d bytes generated", w.Code, w.Header().Get("Content-Type"), w.Body.Len(), len(want))
	}
}
