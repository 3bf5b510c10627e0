package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// providerServer is the admin handler with /providers over a kfake cluster,
// following webhooks.control as dlq serve does, its providers checked
// against the test providers file (stripe, slowcrm) unless providersFile is
// "". set, when not nil, stands for the write.
func providerServer(t *testing.T, providersFile string, set func(context.Context, control.Setting) error) http.Handler {
	t.Helper()
	names := topics.NewNames("", nil)
	addrs := kafkatest.Fake(t, kfake.SeedTopics(1, names.Control), kfake.SeedTopics(2, names.DLQ, names.DLQStatus))
	cl := kafkatest.Client(t, addrs)
	newClient := kafkatest.NewClient(addrs)
	known, err := settings.LoadKnown(providersFile)
	if err != nil {
		t.Fatal(err)
	}
	reg := obs.NewRegistry()
	live := settings.NewLive(known, reg)
	go func() {
		_ = control.Follow(t.Context(), newClient, names.Control, live.Apply, live.CaughtUp, func(err error) { t.Errorf("follow: %v", err) })
	}()
	if set == nil {
		set = func(ctx context.Context, s control.Setting) error { return control.Write(ctx, cl, names.Control, s) }
	}
	st := store.New(store.Config{Names: names, Client: cl, NewClient: newClient})
	return New(Config{Store: st, Token: token, Settings: live, SetProvider: set, Metrics: obs.Metrics(reg), Hosts: []string{"example.com"}}).Handler()
}

// getProviders is GET /providers once the control topic was read to its end.
func getProviders(t *testing.T, h http.Handler) map[string]settings.View {
	t.Helper()
	return getSettings(t, h, "/providers")
}

// getSettings is GET /providers or GET /routes once the control topic was
// read to its end, by name (provider, or provider/route).
func getSettings(t *testing.T, h http.Handler, path string) map[string]settings.View {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w := do(h, "GET", path, "Bearer "+token, "")
		var ans struct {
			providersAnswer
			Routes []settings.View `json:"routes"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &ans); w.Code != 200 || err != nil {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		if ans.CaughtUp {
			out := map[string]settings.View{}
			for _, v := range append(ans.Providers, ans.Routes...) {
				out[v.Name()] = v
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never caught up", path)
		}
	}
}

// refusal is a POST the settings routes refuse: its answer's code and
// what its message says.
type refusal struct {
	path, body string
	code       int
	says       string
}

// refused POSTs each request and checks it is refused as it says.
func refused(t *testing.T, h http.Handler, cs []refusal) {
	t.Helper()
	for _, c := range cs {
		w := do(h, "POST", c.path, "Bearer "+token, c.body)
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); w.Code != c.code || err != nil || !strings.Contains(e.Message, c.says) {
			t.Errorf("POST %s %s: %d %s; want %d saying %q", c.path, c.body, w.Code, w.Body, c.code, c.says)
		}
	}
}

// hasMetrics checks GET /metrics has each series.
func hasMetrics(t *testing.T, h http.Handler, want []string) {
	t.Helper()
	metrics := do(h, "GET", "/metrics", "", "").Body.String()
	for _, w := range want {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

const testProviders = "../settings/testdata/providers.yaml"

func TestProviderRoutes(t *testing.T) {
	h := providerServer(t, testProviders, nil)
	auth := "Bearer " + token
	for _, r := range []struct{ method, path string }{
		{"GET", "/providers"}, {"POST", "/providers/slowcrm/pause"}, {"POST", "/providers/slowcrm/resume"}, {"POST", "/providers/slowcrm/rate?rate=5"},
	} {
		for _, a := range []string{"", "Bearer nope", token} {
			if w := do(h, r.method, r.path, a, ""); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `"error":"unauthorized"`) {
				t.Errorf("%s %s with %q: %d %s, want 401", r.method, r.path, a, w.Code, w.Body)
			}
		}
	}
	got := getProviders(t, h)
	if len(got) != 2 || got["slowcrm"].State != "running" || got["stripe"].State != "running" || got["stripe"].At != nil {
		t.Fatalf("GET /providers before any setting: %+v", got)
	}

	for _, c := range []struct {
		path, body string
		state      string
		rate       float64
		by         string
	}{
		{"/providers/slowcrm/pause", "", "paused", 0, "api"},
		{"/providers/slowcrm/pause", " \r\n\t", "paused", 0, "api"}, // JSON's white space alone is no body
		{"/providers/slowcrm/rate", `{"rate": 5, "by": "alice"}`, "draining", 5, "alice"},
		{"/providers/slowcrm/rate?rate=600/m&by=carol", "", "draining", 10, "carol"},
		{"/providers/slowcrm/pause", `{"by":"bob"}`, "paused", 0, "bob"},
		{"/providers/slowcrm/resume?by=dan", "", "running", 0, "dan"},
		{"/providers/stripe/rate", `{"rate": 2.5}`, "draining", 2.5, "api"},
		{"/providers/stripe/rate?rate=0", "", "running", 0, "api"},
	} {
		w := do(h, "POST", c.path, auth, c.body)
		var v settings.View
		if err := json.Unmarshal(w.Body.Bytes(), &v); w.Code != 200 || err != nil || v.State != c.state || v.Rate != c.rate || v.By != c.by || v.At == nil {
			t.Fatalf("POST %s %s: %d %s; want %s at %v by %s", c.path, c.body, w.Code, w.Body, c.state, c.rate, c.by)
		}
		// The answer comes once the setting was read back: a GET shows it.
		if g := getProviders(t, h)[v.Provider]; g.State != c.state || g.Rate != c.rate || g.By != c.by {
			t.Fatalf("GET /providers after POST %s: %+v", c.path, g)
		}
	}
	do(h, "POST", "/providers/slowcrm/pause", auth, "")
	do(h, "POST", "/providers/stripe/rate?rate=7", auth, "")
	hasMetrics(t, h, []string{
		`hookline_dlq_provider_paused{provider="slowcrm"} 1`, `hookline_dlq_provider_paused{provider="stripe"} 0`,
		`hookline_dlq_provider_rate{provider="slowcrm"} 0`, `hookline_dlq_provider_rate{provider="stripe"} 7`,
	})

	refused(t, h, []refusal{
		{"/providers/nosuch/pause", "", 404, "slowcrm, stripe"},
		{"/providers/nosuch/rate?rate=5", "", 404, "unknown provider"},
		{"/providers/slowcrm/rate", "", 400, "rate is required"},
		{"/providers/slowcrm/rate", `{"by":"x"}`, 400, "rate is required"},
		{"/providers/slowcrm/rate", `{"rate": -1}`, 400, "from 0 to"},
		{"/providers/slowcrm/rate", `{"rate": 2000000}`, 400, "from 0 to"},
		{"/providers/slowcrm/rate?rate=fast", "", 400, "want a number"},
		{"/providers/slowcrm/rate?rate=5/d", "", 400, "unit"},
		{"/providers/slowcrm/rate?rate=5", `{"rate": 5}`, 400, "twice"},
		{"/providers/slowcrm/rate", `{"rate": "5"}`, 400, "body"},
		{"/providers/slowcrm/pause?rate=5", "", 400, "/rate"},
		{"/providers/slowcrm/resume", `{"rate": 1}`, 400, "/rate"},
		{"/providers/slowcrm/pause", `not json`, 400, "body"},
		{"/providers/slowcrm/pause", "\x0c", 400, "body"},    // a form feed is not JSON white space
		{"/providers/slowcrm/resume", "\u00a0", 400, "body"}, // nor a no-break space
		{"/providers/slowcrm/drain", "", 404, "no such route"},
	})
	if g := getProviders(t, h); !g["slowcrm"].Paused || g["stripe"].Rate != 7 {
		t.Errorf("refused requests changed a setting: %+v", g)
	}
}

func TestProviderRoutesWithoutFile(t *testing.T) {
	h := providerServer(t, "", nil)
	auth := "Bearer " + token
	if got := getProviders(t, h); len(got) != 0 {
		t.Fatalf("GET /providers without a file or settings: %+v", got)
	}
	if w := do(h, "POST", "/providers/newcrm/pause", auth, ""); w.Code != 200 {
		t.Fatalf("pause of any name without a providers file: %d %s", w.Code, w.Body)
	}
	if got := getProviders(t, h); !got["newcrm"].Paused {
		t.Fatalf("GET /providers: %+v", got)
	}
	if w := do(h, "POST", "/providers/a:b/pause", auth, ""); w.Code != 400 || !strings.Contains(w.Body.String(), "bad_request") {
		t.Errorf("a name no setting may carry: %d %s", w.Code, w.Body)
	}
}

func TestProviderRouteKafkaFailure(t *testing.T) {
	h := providerServer(t, testProviders, func(context.Context, control.Setting) error { return errors.New("webhooks.control: broker down") })
	w := do(h, "POST", "/providers/slowcrm/pause", "Bearer "+token, "")
	if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `"error":"kafka"`) || !strings.Contains(w.Body.String(), "broker down") {
		t.Fatalf("a failed write: %d %s, want 502 kafka", w.Code, w.Body)
	}
}

// getRoutes is GET /routes once the control topic was read to its end.
func getRoutes(t *testing.T, h http.Handler) map[string]settings.View {
	t.Helper()
	return getSettings(t, h, "/routes")
}

// TestRouteSettingRoutes: POST /routes/{provider}/{route}/... answers as
// /providers/{name}/... does (the same handler): the token first, the
// setting's view with its route once read back, GET /routes showing it
// and GET /providers not; 404 for a route the providers file lacks, 400
// for a bad name or rate; the route gauges.
func TestRouteSettingRoutes(t *testing.T) {
	h := providerServer(t, testProviders, nil)
	auth := "Bearer " + token
	for _, p := range []string{"/routes", "/routes/stripe/crm/pause"} {
		method := "POST"
		if p == "/routes" {
			method = "GET"
		}
		if w := do(h, method, p, "Bearer nope", ""); w.Code != http.StatusUnauthorized {
			t.Errorf("%s %s with a wrong token: %d", method, p, w.Code)
		}
	}
	if got := getRoutes(t, h); len(got) != 3 || got["stripe/crm"].State != "running" || got["stripe/crm"].Route != "crm" || got["slowcrm/default"].Route != "default" {
		t.Fatalf("GET /routes before any setting: %+v", got)
	}
	for _, c := range []struct {
		path, body string
		state      string
		rate       float64
		by         string
	}{
		{"/routes/stripe/crm/pause", `{"by":"alice"}`, "paused", 0, "alice"},
		{"/routes/slowcrm/default/rate?rate=300/m", "", "draining", 5, "api"},
		{"/routes/stripe/crm/resume?by=bob", "", "running", 0, "bob"},
		{"/routes/stripe/crm/pause", "", "paused", 0, "api"},
	} {
		w := do(h, "POST", c.path, auth, c.body)
		var v settings.View
		if err := json.Unmarshal(w.Body.Bytes(), &v); w.Code != 200 || err != nil || v.Route == "" || v.State != c.state || v.Rate != c.rate || v.By != c.by {
			t.Fatalf("POST %s %s: %d %s; want %s at %v by %s", c.path, c.body, w.Code, w.Body, c.state, c.rate, c.by)
		}
		if g := getRoutes(t, h)[v.Name()]; g.State != c.state || g.Rate != c.rate || g.By != c.by {
			t.Fatalf("GET /routes after POST %s: %+v", c.path, g)
		}
	}
	if g := getProviders(t, h); g["stripe"].State != "running" || g["slowcrm"].State != "running" || len(g) != 2 {
		t.Errorf("a route's setting shows on GET /providers: %+v", g)
	}
	hasMetrics(t, h, []string{
		`hookline_dlq_route_paused{provider="stripe",route="crm"} 1`, `hookline_dlq_route_paused{provider="stripe",route="billing"} 0`,
		`hookline_dlq_route_rate{provider="slowcrm",route="default"} 5`,
		`hookline_dlq_provider_paused{provider="stripe"} 0`,
	})
	refused(t, h, []refusal{
		{"/routes/stripe/default/pause", "", 404, `unknown route "stripe/default"`},
		{"/routes/nosuch/default/pause", "", 404, "unknown provider"},
		{"/routes/stripe/Bill.ing/pause", "", 400, "want a route name"},
		{"/routes/stripe/crm/rate", "", 400, "rate is required"},
		{"/routes/stripe/crm/pause?rate=5", "", 400, "POST /routes/stripe/crm/rate"},
		{"/routes/stripe/crm/pause", "\x0c", 400, "body"},
		{"/routes/stripe/crm/drain", "", 404, "no such route"},
		{"/routes/stripe/pause", "", 404, "no such route"},
	})
	// Without a providers file any valid route goes.
	h = providerServer(t, "", nil)
	if w := do(h, "POST", "/routes/stripe/billing/rate", auth, `{"rate":2}`); w.Code != 200 {
		t.Fatalf("a route of any name without a providers file: %d %s", w.Code, w.Body)
	}
	if g := getRoutes(t, h); len(g) != 1 || g["stripe/billing"].Rate != 2 {
		t.Errorf("GET /routes without a file: %+v", g)
	}
}
