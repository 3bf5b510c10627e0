package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	m.Run()
}

// TestEnv holds the secrets testdata/providers.yaml names.
var TestEnv = map[string]string{
	"HL_TEST_SECRET":          "test-secret",
	"HL_TEST_OLD_SECRET":      "old-rotated-secret",
	"HL_TEST_STANDARD_SECRET": "whsec_dGVzdC1zZWNyZXQtc3RhbmRhcmQtMDEyMzQ1Njc4OQ==",
}

func lookup(k string) (string, bool) { v, ok := TestEnv[k]; return v, ok }

// fakePublisher records what would have been produced.
type fakePublisher struct {
	mu      sync.Mutex
	err     error
	records []*kgo.Record
}

func (f *fakePublisher) Publish(_ context.Context, recs []*kgo.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.records = append(f.records, recs...)
	return nil
}

func (f *fakePublisher) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.records) }

// on returns the records published to topic.
func (f *fakePublisher) on(topic string) []*kgo.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*kgo.Record
	for _, r := range f.records {
		if r.Topic == topic {
			out = append(out, r)
		}
	}
	return out
}

const testLimit = 4096

func mustServer(tb testing.TB, pub Publisher) (http.Handler, *providers.Registry) {
	tb.Helper()
	s, reg := testServer(tb, pub, nil)
	return s.Handler(), reg
}

// testServer is the real server over testdata/providers.yaml, as ingest
// runs it (replay recognition on), with set, when not nil, changing its
// Config first.
func testServer(tb testing.TB, pub Publisher, set func(*Config)) (*Server, *providers.Registry) {
	tb.Helper()
	reg, err := providers.Load("testdata/providers.yaml", lookup)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{
		Providers: reg, Publisher: pub, Topic: "webhooks.raw", OutcomesTopic: "webhooks.outcomes", MaxBodyBytes: testLimit,
		RetryAfter: 5 * time.Second, Health: obs.NewHealth(), Registry: obs.NewRegistry(),
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		ReplayCacheEntries: DefaultReplayCacheEntries,
	}
	if set != nil {
		set(&cfg)
	}
	return New(cfg), reg
}

// signed builds a POST signed the way provider's preset signs.
func signed(tb testing.TB, reg *providers.Registry, provider, contentType string, body []byte, now time.Time, extra map[string]string) *http.Request {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+provider, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	if p, ok := reg.Get(provider); ok {
		if err := p.Sign(body, now, req.Header); err != nil {
			tb.Fatal(err)
		}
	}
	return req
}

type errAnswer struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func TestErrorAnswers(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := mustServer(t, pub)
	now := time.Now()
	stripeBody := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)

	cases := []struct {
		name       string
		req        func() *http.Request
		status     int
		code       string
		retryAfter bool
	}{
		{"unknown provider", func() *http.Request {
			return signed(t, reg, "nope", "application/json", stripeBody, now, nil)
		}, 404, CodeUnknownProvider, false},
		{"unknown route", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/hooks/stripe", nil)
		}, 404, CodeNotFound, false},
		{"wrong method", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "/webhooks/stripe", nil)
		}, 405, CodeMethod, false},
		{"missing signature", func() *http.Request {
			req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(stripeBody))
			req.Header.Set("Content-Type", "application/json")
			return req
		}, 401, CodeBadSignature, false},
		{"tampered body", func() *http.Request {
			req := signed(t, reg, "stripe", "application/json", stripeBody, now, nil)
			req.Body = io.NopCloser(strings.NewReader(`{"id":"evt_2","type":"charge.succeeded"}`))
			return req
		}, 401, CodeBadSignature, false},
		{"stale signature", func() *http.Request {
			return signed(t, reg, "stripe", "application/json", stripeBody, now.Add(-10*time.Minute), nil)
		}, 401, CodeBadSignature, false},
		{"malformed json", func() *http.Request {
			return signed(t, reg, "stripe", "application/json", []byte(`{"id":`), now, nil)
		}, 400, CodeMalformed, false},
		{"no key derivable", func() *http.Request {
			return signed(t, reg, "stripe", "application/json", []byte(`{"type":"x"}`), now, nil)
		}, 400, CodeMalformed, false},
		{"wrong content type", func() *http.Request {
			return signed(t, reg, "stripe", "text/plain", stripeBody, now, nil)
		}, 415, CodeContentType, false},
		{"declared length over limit", func() *http.Request {
			return signed(t, reg, "acme", "application/json", bytes.Repeat([]byte("a"), testLimit+1), now, map[string]string{"X-Acme-Delivery": "d1"})
		}, 413, CodeTooLarge, false},
		{"chunked body over limit", func() *http.Request {
			req := signed(t, reg, "acme", "application/json", bytes.Repeat([]byte("a"), testLimit+1), now, map[string]string{"X-Acme-Delivery": "d1"})
			req.ContentLength = -1 // as a chunked request arrives
			return req
		}, 413, CodeTooLarge, false},
		{"event type over 256 bytes", func() *http.Request {
			return signed(t, reg, "stripe", "application/json", []byte(`{"id":"evt_1","type":"`+strings.Repeat("t", 257)+`"}`), now, nil)
		}, 400, CodeMalformed, false},
		{"event type with a control character", func() *http.Request {
			return signed(t, reg, "stripe", "application/json", []byte(`{"id":"evt_1","type":"a\r\nb"}`), now, nil)
		}, 400, CodeMalformed, false},
		{"kafka refused the record as too large", func() *http.Request {
			pub.err = fmt.Errorf("produce webhooks.raw: %w (uncompressed_bytes=1311246)", kerr.MessageTooLarge)
			return signed(t, reg, "stripe", "application/json", stripeBody, now, nil)
		}, 413, CodeTooLarge, false},
		{"kafka did not acknowledge", func() *http.Request {
			pub.err = publish.ErrDeadline
			return signed(t, reg, "stripe", "application/json", stripeBody, now, nil)
		}, 503, CodeKafkaUnavailable, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, tc.req())
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			var a errAnswer
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, w.Body)
			}
			if a.Error != tc.code || a.Message == "" {
				t.Fatalf("answer %+v, want code %s and a message", a, tc.code)
			}
			if got := w.Header().Get("Retry-After"); (got != "") != tc.retryAfter {
				t.Fatalf("Retry-After %q, want present=%t", got, tc.retryAfter)
			}
			if n := pub.count(); n != 0 {
				t.Fatalf("%d records published for a refused request", n)
			}
		})
	}
}

func TestBodyAtLimitAccepted(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := mustServer(t, pub)
	head, tail := `{"type":"t","pad":"`, `"}`
	body := []byte(head + strings.Repeat("x", testLimit-len(head)-len(tail)) + tail)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signed(t, reg, "acme", "application/json", body, time.Now(), map[string]string{"X-Acme-Delivery": "d-limit"}))
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d for a body of exactly the limit: %s", w.Code, w.Body)
	}
	if pub.count() != 1 || !bytes.Equal(pub.records[0].Value, body) {
		t.Fatalf("want the body published byte for byte")
	}
}

// TestUnsignedFloodSparesRateLimit: requests that fail the signature are
// refused without spending the provider's rate limit, so its signed
// deliveries keep their whole rate under an unsigned flood (issue 25).
func TestUnsignedFloodSparesRateLimit(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := mustServer(t, pub)
	now := time.Now()
	codes := map[int]int{}
	for i := range 50 {
		req := signed(t, reg, "limited", "application/json", []byte(fmt.Sprintf(`{"n":%d}`, i)), now, nil)
		for k := range req.Header {
			if k != "Content-Type" {
				req.Header.Set(k, "forged") // every signature header wrong
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		codes[w.Code]++
	}
	if codes[401] != 50 {
		t.Fatalf("unsigned flood answered %v, want 50×401", codes)
	}
	// burst 2 at 1/s: both signed deliveries pass, the flood spent nothing.
	for i := range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, reg, "limited", "application/json", []byte(fmt.Sprintf(`{"signed":%d}`, i)), now, nil))
		if w.Code != http.StatusAccepted {
			t.Fatalf("signed delivery %d after the flood: %d %s, want 202", i, w.Code, w.Body)
		}
	}
}

func TestRateLimit(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := mustServer(t, pub)
	now := time.Now()
	codes := map[int]int{}
	var retryAfter string
	for i := 0; i < 5; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, reg, "limited", "application/json", []byte(`{"n":`+string(rune('0'+i))+`}`), now, nil))
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests {
			retryAfter = w.Header().Get("Retry-After")
		}
	}
	// burst 2 at 1/s: two pass at once, the rest wait about a second.
	if codes[202] != 2 || codes[429] != 3 {
		t.Fatalf("codes %v, want 2×202 and 3×429", codes)
	}
	if retryAfter != "1" {
		t.Fatalf("Retry-After %q, want 1", retryAfter)
	}
	if pub.count() != 2 {
		t.Fatalf("%d published, want 2", pub.count())
	}
}

func TestSlackChallengeProducesNothing(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := mustServer(t, pub)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signed(t, reg, "slack", "application/json", []byte(`{"type":"url_verification","challenge":"c-123","token":"t"}`), time.Now(), nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "c-123") {
		t.Fatalf("status %d body %s, want 200 echoing the challenge", w.Code, w.Body)
	}
	if pub.count() != 0 {
		t.Fatal("a url_verification challenge was published")
	}
}

func TestRequestID(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := mustServer(t, pub)
	body := []byte(`{"id":"evt_rid","type":"x"}`)
	for _, tc := range []struct{ in, want string }{{"req-abc", "req-abc"}, {"", ""}, {"bad id with spaces", ""}} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, reg, "stripe", "application/json", body, time.Now(), map[string]string{"X-Request-Id": tc.in}))
		var a accepted
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != 202 {
			t.Fatalf("status %d body %s", w.Code, w.Body)
		}
		if tc.want != "" && a.RequestID != tc.want {
			t.Fatalf("request id %q, want %q", a.RequestID, tc.want)
		}
		if tc.want == "" && len(a.RequestID) != 32 {
			t.Fatalf("request id %q, want a new 32-hex id", a.RequestID)
		}
		if w.Header().Get("X-Request-Id") != a.RequestID {
			t.Fatal("X-Request-Id header differs from the body's request_id")
		}
	}
}

// TestBatchAnswerShape: a GoCardless batch answers idempotency_keys, even
// when it holds one event; a single delivery answers idempotency_key.
func TestBatchAnswerShape(t *testing.T) {
	h, reg := mustServer(t, &fakePublisher{})
	now := time.Now()
	for _, c := range []struct {
		provider, body, want string
	}{
		{"gocardless", `{"events":[{"id":"EV1","action":"created"}]}`, `"idempotency_keys":["gocardless:EV1"]`},
		{"gocardless", `{"events":[{"id":"EV2"},{"id":"EV3"}]}`, `"idempotency_keys":["gocardless:EV2","gocardless:EV3"]`},
		{"stripe", `{"id":"evt_shape","object":"event","type":"x"}`, `"idempotency_key":"stripe:evt_shape"`},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, reg, c.provider, "application/json", []byte(c.body), now, nil))
		if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s %s: %d %s, want 202 with %s", c.provider, c.body, w.Code, w.Body, c.want)
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(w.Body.Bytes(), &keys)
		if _, ok1 := keys["idempotency_key"]; ok1 == (keys["idempotency_keys"] != nil) {
			t.Errorf("%s: %s has both shapes or neither", c.provider, w.Body)
		}
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestBadSignatureHeaderBodyNotRead: a request whose signature header is
// missing, malformed or stale is refused 401 before its body is read (no
// body read, no HMAC: an unsigned 1 MiB body cost 2.4-3.2 ms of CPU);
// one with a well-formed, fresh but wrong signature is read and refused.
func TestBadSignatureHeaderBodyNotRead(t *testing.T) {
	h, _ := mustServer(t, &fakePublisher{})
	now := time.Now()
	body := []byte(`{"id":"evt_1","type":"charge.succeeded","pad":"` + strings.Repeat("x", testLimit-80) + `"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	for _, tc := range []struct {
		name, header string
		read         bool
	}{
		{"missing", "", false},
		{"malformed", "garbage", false},
		{"stale", "t=" + strconv.FormatInt(now.Add(-time.Hour).Unix(), 10) + ",v1=" + strings.Repeat("0", 64), false},
		{"fresh but wrong", "t=" + ts + ",v1=" + strings.Repeat("0", 64), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: bytes.NewReader(body)}
			req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", cr)
			req.Header.Set("Content-Type", "application/json")
			if tc.header != "" {
				req.Header.Set("Stripe-Signature", tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("status %d %s, want 401", w.Code, w.Body)
			}
			if got := cr.n > 0; got != tc.read {
				t.Fatalf("%d body bytes read, want read=%t", cr.n, tc.read)
			}
		})
	}
}
