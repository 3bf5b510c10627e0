package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookline/hookline/ingest/internal/selftest"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
)

// fakeTester answers a fixed report.
type fakeTester struct{ rep selftest.Report }

func (f fakeTester) Run(context.Context) selftest.Report { return f.rep }

// TestSelftestRoute: a passing report is 200 with the report alone; a
// failing one is 503 with the report plus error selftest_failed and a
// message naming the failed check; no tester, no route.
func TestSelftestRoute(t *testing.T) {
	reg, err := providers.Load("testdata/providers.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(st SelfTester) *httptest.ResponseRecorder {
		s := New(Config{Providers: reg, Publisher: &fakePublisher{}, Topic: "webhooks.raw", MaxBodyBytes: testLimit,
			RetryAfter: 5 * time.Second, Health: obs.NewHealth(), Registry: obs.NewRegistry(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Selftest: st})
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/selftest", nil))
		return w
	}
	pass := selftest.Report{Status: selftest.Pass, Version: "v1"}
	pass.Checks.Kafka.Status, pass.Checks.Topics.Status = selftest.Pass, selftest.Pass
	fail := pass
	fail.Status, fail.Failed = selftest.Fail, []string{selftest.CheckKafka}
	fail.Checks.Kafka.Status, fail.Checks.Kafka.Error = selftest.Fail, "produce to webhooks.selftest: no acknowledgement within 5s"

	var body map[string]any
	w := serve(fakeTester{pass})
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 200 || body["status"] != "pass" || body["version"] != "v1" {
		t.Fatalf("passing: %d %s", w.Code, w.Body)
	}
	if _, ok := body["error"]; ok {
		t.Fatalf("passing report carries an error: %s", w.Body)
	}
	body = nil
	w = serve(fakeTester{fail})
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 503 || body["status"] != "fail" || body["error"] != CodeSelftestFailed ||
		body["message"] != "self-test failed: kafka: produce to webhooks.selftest: no acknowledgement within 5s" {
		t.Fatalf("failing: %d %s", w.Code, w.Body)
	}
	if failed, _ := body["failed"].([]any); len(failed) != 1 || failed[0] != "kafka" {
		t.Fatalf("failed = %v, want [kafka]", body["failed"])
	}
	if w = serve(nil); w.Code != 404 {
		t.Fatalf("no tester: %d, want 404", w.Code)
	}
}
