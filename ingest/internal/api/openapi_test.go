package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/ingest/internal/selftest"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/schemas"
)

// panicPublisher stands for a bug below the handler.
type panicPublisher struct{}

func (panicPublisher) Publish(context.Context, []*kgo.Record) error { panic("publisher bug") }

// brokenBody fails the read half-way, as a client that goes away does.
type brokenBody struct{ n int }

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.n > 0 {
		b.n = 0
		return copy(p, `{"id":`), nil
	}
	return 0, errors.New("connection reset by peer")
}

// unreachablePublisher is the real producer pointed at a closed port, with
// a short produce deadline: Kafka never acknowledges.
func unreachablePublisher(t *testing.T) Publisher {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cl, err := kafkatest.NewClient([]string{addr})(kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return publish.New(cl, 300*time.Millisecond)
}

// selftester is the real self-test over a kfake cluster holding the topics
// it checks, ingest's producer among them. With missing, it also checks a
// topic the cluster lacks, so that its report fails.
func selftester(t *testing.T, reg *providers.Registry, missing bool) SelfTester {
	t.Helper()
	specs := []topics.Spec{{Name: "webhooks.raw", Partitions: 2}, {Name: "webhooks.selftest", Partitions: 1}}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, specs[0].Name), kfake.SeedTopics(1, specs[1].Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if missing {
		specs = append(specs, topics.Spec{Name: "webhooks.missing", Partitions: 1})
	}
	newClient := kafkatest.NewClient(c.ListenAddrs())
	cl, err := newClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return selftest.New(selftest.Config{Providers: reg, Topics: specs, SelftestTopic: specs[1].Name, Producer: cl,
		NewClient: newClient, Timeout: 10 * time.Second, Version: selftest.Version()})
}

// TestOpenAPI drives the real handlers through every answer that
// schemas/ingest.openapi.yaml lists and checks each against the document:
// its status is listed for the route, its required headers (X-Request-Id,
// Retry-After) are there, its Content-Type is listed and its JSON body
// validates. Each listed answer must be produced at least once. Each
// answer is also checked against the document GET /openapi.yaml serves.
func TestOpenAPI(t *testing.T) {
	doc, err := schemas.LoadAPI(schemas.IngestAPI)
	if err != nil {
		t.Fatal(err)
	}
	cov := doc.NewCoverage()
	reg, err := providers.Load("testdata/providers.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tester := selftester(t, reg, false)
	// Every answer conforms to the document GET /openapi.yaml serves too
	// (per-IP limit on, so that 429 is every provider's).
	raw, err := openAPIDocument(reg, true)
	if err != nil {
		t.Fatal(err)
	}
	served, err := schemas.ParseAPI("ingest.served.openapi.yaml", raw)
	if err != nil {
		t.Fatal(err)
	}
	server := func(pub Publisher, health *obs.Health) http.Handler {
		return New(Config{
			Providers: reg, Publisher: pub, Topic: "webhooks.raw", MaxBodyBytes: testLimit,
			RetryAfter: 5 * time.Second, Health: health, Registry: obs.NewRegistry(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Selftest: tester,
			ReplayCacheEntries: DefaultReplayCacheEntries,
		}).Handler()
	}
	ready := obs.NewHealth("kafka")
	ready.Set("kafka", nil)
	ok := server(&fakePublisher{}, ready)
	failing := New(Config{
		Providers: reg, Publisher: &fakePublisher{}, Topic: "webhooks.raw", MaxBodyBytes: testLimit,
		RetryAfter: 5 * time.Second, Health: ready, Registry: obs.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Selftest: selftester(t, reg, true),
	}).Handler()
	now := time.Now()
	stripe := []byte(`{"id":"evt_oa","object":"event","type":"invoice.paid"}`)
	unsigned := func(method, path, ct string, body []byte) *http.Request {
		r := httptest.NewRequest(method, path, bytes.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		return r
	}
	drained := obs.NewHealth("kafka")
	drained.Set("kafka", nil)
	drained.Drain()

	type openapiCase struct {
		name   string
		h      http.Handler
		req    func() *http.Request
		status int
	}
	cases := []openapiCase{
		{"stripe", ok, func() *http.Request { return signed(t, reg, "stripe", "application/json", stripe, now, nil) }, 202},
		{"gocardless batch", ok, func() *http.Request {
			return signed(t, reg, "gocardless", "application/json", []byte(`{"events":[{"id":"EV1","action":"created"},{"id":"EV2","action":"paid"}]}`), now, nil)
		}, 202},
		{"gocardless batch of one", ok, func() *http.Request {
			return signed(t, reg, "gocardless", "application/json", []byte(`{"events":[{"id":"EV3","action":"created"}]}`), now, nil)
		}, 202},
		{"slack challenge", ok, func() *http.Request {
			return signed(t, reg, "slack", "application/json", []byte(`{"type":"url_verification","challenge":"c-oa","token":"t"}`), now, nil)
		}, 200},
		{"slack form", ok, func() *http.Request {
			return signed(t, reg, "slack", "application/x-www-form-urlencoded", []byte(`command=%2Fdeploy&text=now`), now, nil)
		}, 202},
		{"malformed body", ok, func() *http.Request { return signed(t, reg, "stripe", "application/json", []byte(`{"id":`), now, nil) }, 400},
		{"no key", ok, func() *http.Request {
			return signed(t, reg, "stripe", "application/json", []byte(`{"type":"x"}`), now, nil)
		}, 400},
		{"body read fails", ok, func() *http.Request {
			r := signed(t, reg, "acme", "application/json", nil, now, nil)
			r.Body, r.ContentLength = io.NopCloser(&brokenBody{n: 1}), -1
			return r
		}, 400},
		{"no signature", ok, func() *http.Request { return unsigned("POST", "/webhooks/stripe", "application/json", stripe) }, 401},
		{"bad signature", ok, func() *http.Request {
			r := unsigned("POST", "/webhooks/stripe", "application/json", stripe)
			r.Header.Set("Stripe-Signature", "t=1,v1=00")
			return r
		}, 401},
		{"unknown provider", ok, func() *http.Request { return unsigned("POST", "/webhooks/nope", "application/json", stripe) }, 404},
		{"declared length over the limit", ok, func() *http.Request {
			return signed(t, reg, "stripe", "application/json", bytes.Repeat([]byte("x"), testLimit+1), now, nil)
		}, 413},
		{"chunked body over the limit", ok, func() *http.Request {
			r := signed(t, reg, "stripe", "application/json", bytes.Repeat([]byte("x"), testLimit+1), now, nil)
			r.ContentLength = -1
			return r
		}, 413},
		{"invalid payload, on_invalid: reject", ok, func() *http.Request {
			return signed(t, reg, "shop", "application/json", []byte(`{"id":"evt_oa","type":"order.created","data":{}}`), now, nil)
		}, 422},
		{"invalid payload, on_invalid: dlq", ok, func() *http.Request {
			return signed(t, reg, "shop-dlq", "application/json", []byte(`{"id":"evt_oa","type":"order.created","data":{}}`), now, nil)
		}, 202},
		{"content type", ok, func() *http.Request { return signed(t, reg, "stripe", "application/xml", stripe, now, nil) }, 415},
		{"no content type", ok, func() *http.Request { return signed(t, reg, "stripe", "", stripe, now, nil) }, 415},
		{"kafka does not acknowledge", server(unreachablePublisher(t), ready), func() *http.Request {
			return signed(t, reg, "stripe", "application/json", stripe, now, nil)
		}, 503},
		{"panic", server(panicPublisher{}, ready), func() *http.Request {
			return signed(t, reg, "stripe", "application/json", stripe, now, nil)
		}, 500},
		{"openapi", ok, func() *http.Request { return unsigned("GET", "/openapi.yaml", "", nil) }, 200},
		{"healthz", ok, func() *http.Request { return unsigned("GET", "/healthz", "", nil) }, 200},
		{"ready", ok, func() *http.Request { return unsigned("GET", "/readyz", "", nil) }, 200},
		{"not checked yet", server(&fakePublisher{}, obs.NewHealth("kafka")), func() *http.Request { return unsigned("GET", "/readyz", "", nil) }, 503},
		{"draining", server(&fakePublisher{}, drained), func() *http.Request { return unsigned("GET", "/readyz", "", nil) }, 503},
		{"metrics", ok, func() *http.Request { return unsigned("GET", "/metrics", "", nil) }, 200},
		{"selftest", ok, func() *http.Request { return unsigned("GET", "/selftest", "", nil) }, 200},
		{"selftest fails", failing, func() *http.Request { return unsigned("GET", "/selftest", "", nil) }, 503},
		{"POST selftest", ok, func() *http.Request { return unsigned("POST", "/selftest", "", nil) }, 405},
		{"no route", ok, func() *http.Request { return unsigned("POST", "/hooks/stripe", "application/json", stripe) }, 404},
		{"no provider segment", ok, func() *http.Request { return unsigned("POST", "/webhooks/", "application/json", stripe) }, 404},
		{"GET a webhook", ok, func() *http.Request { return unsigned("GET", "/webhooks/stripe", "", nil) }, 405},
		{"POST healthz", ok, func() *http.Request { return unsigned("POST", "/healthz", "", nil) }, 405},
		{"HEAD healthz", ok, func() *http.Request { return unsigned("HEAD", "/healthz", "", nil) }, 405},
		{"trailing slash GET", ok, func() *http.Request { return unsigned("GET", "/healthz/", "", nil) }, 301},
		{"trailing slash POST", ok, func() *http.Request { return unsigned("POST", "/webhooks/stripe/", "application/json", stripe) }, 307},
	}
	limited := server(&fakePublisher{}, ready) // burst 2 at 1/s: the third at once is refused
	for i := range 3 {
		want := 202
		if i == 2 {
			want = 429
		}
		cases = append(cases, openapiCase{"rate limit", limited, func() *http.Request {
			return signed(t, reg, "limited", "application/json", fmt.Appendf(nil, `{"n":%d}`, i), now, nil)
		}, want})
	}
	// A github delivery replayed with a new delivery id: 202 replay.
	ghBody := []byte(`{"action":"opened","issue":{"number":1}}`)
	for i := range 2 {
		cases = append(cases, openapiCase{"replay", ok, func() *http.Request {
			return signed(t, reg, "github", "application/json", ghBody, now, map[string]string{"X-GitHub-Delivery": fmt.Sprint("oa-", i), "X-GitHub-Event": "issues"})
		}, 202})
	}
	// The per-IP limit, 1/1: the second request from one address is refused.
	ipLimited := New(Config{
		Providers: reg, Publisher: &fakePublisher{}, Topic: "webhooks.raw", MaxBodyBytes: testLimit,
		RetryAfter: 5 * time.Second, Health: ready, Registry: obs.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), IPLimit: &IPLimit{PerSecond: 1, Burst: 1},
	}).Handler()
	for i, want := range []int{202, 429} {
		cases = append(cases, openapiCase{"per-IP limit", ipLimited, func() *http.Request {
			return signed(t, reg, "stripe", "application/json", []byte(fmt.Sprintf(`{"id":"evt_ip%d","object":"event"}`, i)), now, nil)
		}, want})
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		req := c.req()
		method, path := req.Method, req.URL.Path // gin rewrites the path of a redirect
		c.h.ServeHTTP(w, req)
		if w.Code != c.status {
			t.Errorf("%s: %s %s answered %d %s, want %d", c.name, method, path, w.Code, w.Body, c.status)
			continue
		}
		if err := cov.Check(method, path, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if _, err := served.Check(method, path, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if missing := cov.Missing(); len(missing) > 0 {
		t.Errorf("answers the document lists that no case produced: %v", missing)
	}
	t.Logf("%d answers checked against %s", cov.Seen(), schemas.IngestAPI)

	// The self-tests above ran for real: the passing one read its record
	// back; the failing one names the topic the cluster lacks.
	for _, c := range []struct {
		h      http.Handler
		failed []string
		want   string
	}{{ok, nil, `"round_trip_ms"`}, {failing, []string{"topics"}, "webhooks.missing missing"}} {
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, unsigned("GET", "/selftest", "", nil))
		var rep selftest.Report
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil || !slices.Equal(rep.Failed, c.failed) || rep.Checks.Kafka.Status != selftest.Pass || rep.Checks.Kafka.Offset < 0 || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("GET /selftest: %d %s; want failed %v, the round trip passed, and %s", w.Code, w.Body, c.failed, c.want)
		}
	}

	// A request id the caller sends comes back when it is acceptable.
	w := httptest.NewRecorder()
	ok.ServeHTTP(w, signed(t, reg, "stripe", "application/json", stripe, now, map[string]string{"X-Request-Id": "req-openapi-1"}))
	if got := w.Header().Get("X-Request-Id"); got != "req-openapi-1" || !strings.Contains(w.Body.String(), `"request_id":"req-openapi-1"`) {
		t.Errorf("X-Request-Id %q, body %s", got, w.Body)
	}
}
