package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

const token = "unit-test-token-0123456789"

// server is the admin handler over a kfake cluster holding one DLQ entry.
func server(t *testing.T) http.Handler {
	t.Helper()
	gin.SetMode(gin.TestMode)
	names := topics.NewNames("", nil)
	addrs := kafkatest.Fake(t, kfake.SeedTopics(2, names.Raw, names.DLQ, names.DLQStatus))
	cl := kafkatest.Client(t, addrs)
	r := &kgo.Record{Topic: names.DLQ, Key: []byte("stripe:evt_1"), Value: []byte(`{"id":"evt_1"}`)}
	headers.Set(r, headers.Provider, "stripe")
	headers.Set(r, headers.DeadReason, headers.DeadPermanent)
	if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Config{Names: names, Client: cl, NewClient: kafkatest.NewClient(addrs)})
	return New(Config{Store: st, Replayer: replay.New(cl), Token: token, Hosts: []string{"example.com"}}).Handler() // httptest's Host
}

func do(h http.Handler, method, path, auth, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestAuth(t *testing.T) {
	h := server(t)
	for _, path := range []string{"/dlq", "/dlq/stats", "/dlq/0:0", "/dlq/zz", "/anything"} {
		for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer nope", "Bearer " + token[:len(token)-1], "Bearer " + token + token, token, "Basic " + token} {
			w := do(h, "GET", path, auth, "")
			if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %q: %d, want 401", path, auth, w.Code)
			}
			var e errorBody
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error != "unauthorized" {
				t.Errorf("401 body %s", w.Body)
			}
		}
	}
	for _, path := range []string{"/dlq/replay", "/dlq/0:0/resolve"} {
		if w := do(h, "POST", path, "Bearer x", `{"refs":["0:0"],"by":"m","resolution":"ignored","note":"n"}`); w.Code != 401 {
			t.Errorf("POST %s with a wrong token: %d", path, w.Code)
		}
	}
	for _, auth := range []string{"Bearer " + token, "bearer " + token, "BEARER  " + token + " "} {
		if w := do(h, "GET", "/dlq/stats", auth, ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"total":1`) {
			t.Errorf("GET /dlq/stats with %q: %d %s", auth, w.Code, w.Body)
		}
	}
	if w := do(h, "GET", "/anything", "Bearer "+token, ""); w.Code != 404 {
		t.Errorf("unknown route with the token: %d", w.Code)
	}
}

func TestPageAndHeaders(t *testing.T) {
	h := server(t)
	for path, ctype := range map[string]string{"/ui/": "text/html", "/ui/app.js": "text/javascript", "/ui/style.css": "text/css"} {
		w := do(h, "GET", path, "", "")
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) || w.Body.Len() == 0 {
			t.Errorf("GET %s: %d %s", path, w.Code, w.Header().Get("Content-Type"))
		}
		for _, hd := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
			if w.Header().Get(hd) == "" {
				t.Errorf("GET %s lacks %s", path, hd)
			}
		}
	}
	if w := do(h, "GET", "/", "", ""); w.Code != http.StatusFound || w.Header().Get("Location") != "/ui/" {
		t.Errorf("GET /: %d %s", w.Code, w.Header().Get("Location"))
	}
	// The page puts data in the DOM as text only.
	js := do(h, "GET", "/ui/app.js", "", "").Body.String()
	// It opens on the overview (GET /status, with each provider's and
	// route's setting and their Pause, Resume and Drain controls), with the
	// dead letters (with a route filter), the trace by key and by route,
	// and what waits (GET /parked) as the other views; a route row says
	// what is held behind its ordered entities' heads (issue 24).
	page := do(h, "GET", "/ui/", "", "").Body.String()
	for _, want := range []string{"<title>hookline console</title>", `id="v-overview"`, `id="ov-table"`, `id="v-dlq"`, `id="v-trace"`, `id="trace-form"`,
		`id="v-waiting"`, `<th>Route</th>`, `name="route"`, `id="t-routes"`, `id="auth-state"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, want := range []string{"api('GET', '/status')", "api('GET', '/providers')", "api('GET', '/routes')", "api('GET', '/parked?limit=100')",
		"'/providers/' + encodeURIComponent(p.provider)", "'/routes/' + encodeURIComponent(p.provider) + '/' + encodeURIComponent(r.route)",
		"path + '/' + verb", "button('pause', 'Pause')", "button('resume', 'Resume')", "button('drain', 'Drain')", "'rate', r)",
		"'provider', 'route', 'reason'", "e.route", "t.routes", "Token required", "Token refused", "heldText(r.held)", "r.concurrency_limit", "r.answering_again"} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks %s", want)
		}
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}

func TestAPIOnFake(t *testing.T) {
	h := server(t)
	auth := "Bearer " + token
	w := do(h, "GET", "/dlq?provider=stripe&since=1h&unresolved=true", auth, "")
	var page listPage
	if err := json.Unmarshal(w.Body.Bytes(), &page); w.Code != 200 || err != nil || page.Total != 1 || page.Entries[0].Ref != "0:0" && page.Entries[0].Ref != "1:0" {
		t.Fatalf("GET /dlq: %d %s", w.Code, w.Body)
	}
	ref := page.Entries[0].Ref
	if w := do(h, "GET", "/dlq/"+ref, auth, ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"body":"{\"id\":\"evt_1\"}"`) {
		t.Fatalf("GET /dlq/%s: %d %s", ref, w.Code, w.Body)
	}
	w = do(h, "POST", "/dlq/replay", auth, `{"provider":"stripe","by":"alice"}`)
	var ans replayAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &ans); w.Code != 200 || err != nil || ans.Sent != 1 || !ans.Results[0].Resolved {
		t.Fatalf("POST /dlq/replay: %d %s", w.Code, w.Body)
	}
	// Resolved now: a selection skips it, so nothing is sent.
	if w := do(h, "POST", "/dlq/replay", auth, `{"all":true,"by":"alice"}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"sent":0`) {
		t.Fatalf("second POST /dlq/replay: %d %s", w.Code, w.Body)
	}
	if w := do(h, "POST", "/dlq/"+ref+"/resolve", auth, `{"resolution":"manual_fix","note":"done by hand","by":"bob"}`); w.Code != 200 {
		t.Fatalf("resolve: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/dlq/stats", auth, ""); !strings.Contains(w.Body.String(), `"by_resolution":{"manual_fix":1}`) {
		t.Fatalf("stats after resolve: %s", w.Body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/dlq/replay", `not json`},
		{"POST", "/dlq/replay", `{"refs":["0:0"],"by":"a","since":"1h"}`},
		{"POST", "/dlq/replay", `{"all":true,"since":"soon","by":"a"}`},
		{"POST", "/dlq/0:0/resolve", `{"resolution":"ignored","note":"x"}`},
		{"GET", "/dlq?offset=-1", ""},
		{"POST", "/dlq/replay", `{"refs":["0:0"],"by":"a","note":"` + strings.Repeat("x", 70<<10) + `"}`},
	} {
		if w := do(h, c.method, c.path, auth, c.body); w.Code != 400 {
			t.Errorf("%s %s %.40s: %d %s, want 400", c.method, c.path, c.body, w.Code, w.Body)
		}
	}
	if w := do(h, "GET", "/dlq/5:0", auth, ""); w.Code != 404 {
		t.Errorf("GET of a partition that does not exist: %d", w.Code)
	}
}

// TestHostChecked: a request naming a host the server was not given (a
// DNS-rebinding page's own name) is answered 421 before anything else, the
// unauthenticated /metrics and page included; IP addresses, localhost and
// the names in Config.Hosts are answered as usual (issue 25).
func TestHostChecked(t *testing.T) {
	h := New(Config{Store: &store.Store{}, Token: token, Hosts: []string{"dlq.internal"},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })}).Handler()
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:8081", 200},
		{"[::1]:8081", 200},
		{"localhost:8081", 200},
		{"LOCALHOST", 200},
		{"10.1.2.3", 200},
		{"dlq.internal:8081", 200},
		{"Dlq.Internal", 200},
		{"attacker.example:8081", 421},
		{"dlq.internal.attacker.example", 421},
		{"", 421},
	} {
		for _, path := range []string{"/metrics", "/ui/"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = tc.host
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Errorf("GET %s with Host %q: %d %s, want %d", path, tc.host, w.Code, w.Body, tc.want)
			}
			if tc.want == 421 && !strings.Contains(w.Body.String(), `"error":"misdirected"`) {
				t.Errorf("GET %s with Host %q: body %s, want error misdirected", path, tc.host, w.Body)
			}
		}
	}
}

// TestTraceURLInPage: the console's page carries HOOKLINE_TRACE_URL in its
// hookline-trace-url meta tag (escaped), empty without it, and app.js
// links each step's trace id there.
func TestTraceURLInPage(t *testing.T) {
	gin.SetMode(gin.TestMode)
	for _, tc := range []struct{ url, want string }{
		{"", `<meta name="hookline-trace-url" content="">`},
		{`http://jaeger:16686/trace/{trace_id}?a=1&b="2"`, `<meta name="hookline-trace-url" content="http://jaeger:16686/trace/{trace_id}?a=1&amp;b=&#34;2&#34;">`},
	} {
		h := New(Config{Token: token, TraceURL: tc.url, Hosts: []string{"example.com"}}).Handler() // httptest's Host
		if page := do(h, "GET", "/ui/", "", "").Body.String(); !strings.Contains(page, tc.want) {
			t.Errorf("TraceURL %q: the page lacks %s", tc.url, tc.want)
		}
	}
	js := do(server(t), "GET", "/ui/app.js", "", "").Body.String()
	for _, want := range []string{`meta[name="hookline-trace-url"]`, "traceIDLink(s.trace_id)", "url.replace('{trace_id}', encodeURIComponent(id))"} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks %s", want)
		}
	}
}
