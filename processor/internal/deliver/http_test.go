package deliver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/retry"
)

func TestNewHTTPValidates(t *testing.T) {
	tests := []struct {
		name string
		o    HTTPOptions
		want []string // substrings of the error; nil: valid
	}{
		{name: "valid", o: HTTPOptions{URL: "https://billing.internal/hooks"}},
		{name: "no URL", o: HTTPOptions{}, want: []string{"URL: required"}},
		{name: "relative URL", o: HTTPOptions{URL: "/hooks"}, want: []string{"URL", "scheme must be http or https"}},
		{name: "ftp", o: HTTPOptions{URL: "ftp://x/y"}, want: []string{"scheme must be http or https"}},
		{name: "no host", o: HTTPOptions{URL: "http:///y"}, want: []string{"no host"}},
		{name: "unparsable", o: HTTPOptions{URL: "http://x/%zz"}, want: []string{"URL", "invalid URL escape"}},
		{name: "password not echoed", o: HTTPOptions{URL: "ftp://u:secret@x/"}, want: []string{"u:xxxxx@x"}},
		{name: "password not echoed by parse", o: HTTPOptions{URL: "http://u:secret@x/%zz"}, want: []string{"invalid URL escape"}},
		{name: "negative timeout", o: HTTPOptions{URL: "http://x", Timeout: -time.Second}, want: []string{"Timeout: -1s is negative"}},
		{name: "negative rate", o: HTTPOptions{URL: "http://x", RatePerSecond: -1}, want: []string{"RatePerSecond"}},
		{name: "NaN rate", o: HTTPOptions{URL: "http://x", RatePerSecond: nan()}, want: []string{"RatePerSecond"}},
		{name: "negative burst", o: HTTPOptions{URL: "http://x", Burst: -1}, want: []string{"Burst: -1 is negative"}},
		{name: "negative cooldown", o: HTTPOptions{URL: "http://x", BreakerCooldown: -time.Second}, want: []string{"BreakerCooldown"}},
		{name: "signing", o: HTTPOptions{URL: "http://x", SigningSecrets: [][]byte{[]byte("k1"), []byte("k2")}}},
		{name: "empty signing secret", o: HTTPOptions{URL: "http://x", SigningSecrets: [][]byte{[]byte("key-value"), {}, nil}},
			want: []string{"SigningSecrets[1]: empty", "SigningSecrets[2]: empty"}},
		{name: "all reported", o: HTTPOptions{Timeout: -1, Burst: -1}, want: []string{"URL: required", "Timeout", "Burst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewHTTP(tt.o)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewHTTP: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("NewHTTP: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "key-value") {
				t.Errorf("error %q shows the password or a signing secret", err)
			}
		})
	}
}

func nan() float64 { var z float64; return z / z }

func TestNewHTTPDefaults(t *testing.T) {
	h := mustHTTP(t, HTTPOptions{URL: "http://x/y?token=secret", RatePerSecond: 20})
	if h.timeout != DefaultTimeout {
		t.Errorf("timeout = %s, want %s", h.timeout, DefaultTimeout)
	}
	if h.limiter == nil || h.limiter.Burst() != 1 || h.limiter.Limit() != 20 {
		t.Errorf("limiter = %+v, want 20/s burst 1", h.limiter)
	}
	if h.breaker == nil || h.breaker.threshold != DefaultBreakerFailures || h.breaker.cooldown != DefaultBreakerCooldown {
		t.Errorf("breaker = %+v, want %d failures, %s", h.breaker, DefaultBreakerFailures, DefaultBreakerCooldown)
	}
	tr, ok := h.client.Transport.(*http.Transport)
	if !ok || tr.MaxIdleConnsPerHost < 64 {
		t.Errorf("transport = %T %+v, want a pool of at least 64 per host", h.client.Transport, tr)
	}
	if h.label != "http://x/y" {
		t.Errorf("label = %q, want the URL without its query", h.label)
	}
	if h := mustHTTP(t, HTTPOptions{URL: "http://x", BreakerFailures: -1}); h.breaker != nil || h.BreakerOpen() {
		t.Error("BreakerFailures -1 did not disable the breaker")
	}
}

// TestHandleStatus covers every status class and its classification.
func TestHandleStatus(t *testing.T) {
	clock := newFakeClock()
	date := func(d time.Duration) string { return clock.Now().Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name      string
		code      int
		hdr       map[string]string
		body      string
		ok        bool          // success: nil error
		retryable bool          // otherwise: permanent
		after     time.Duration // Classify(err).After
		msg       string        // the error's text after "destination <url>: "
	}{
		{name: "200", code: 200, body: "thanks", ok: true},
		{name: "204", code: 204, ok: true},
		{name: "301 not followed", code: 301, hdr: map[string]string{"Location": "/moved"},
			msg: "HTTP 301 redirect not followed (Location: /moved)"},
		{name: "400", code: 400, body: `{"error":"bad payload"}`, msg: `HTTP 400: {"error":"bad payload"}`},
		{name: "404 without body", code: 404, msg: "HTTP 404 Not Found"},
		{name: "408", code: 408, retryable: true, msg: "HTTP 408 Request Timeout"},
		{name: "409", code: 409, body: "conflict", msg: "HTTP 409: conflict"},
		{name: "429", code: 429, retryable: true, msg: "HTTP 429 Too Many Requests"},
		{name: "429 Retry-After seconds", code: 429, hdr: map[string]string{"Retry-After": "120"}, retryable: true,
			after: 120 * time.Second, msg: "HTTP 429 Too Many Requests (retry after 2m0s)"},
		{name: "429 Retry-After date", code: 429, hdr: map[string]string{"Retry-After": date(90 * time.Second)}, retryable: true,
			after: 90 * time.Second, msg: "HTTP 429 Too Many Requests (retry after 1m30s)"},
		{name: "429 Retry-After date passed", code: 429, hdr: map[string]string{"Retry-After": date(-time.Hour)}, retryable: true,
			msg: "HTTP 429 Too Many Requests"},
		{name: "429 Retry-After garbage", code: 429, hdr: map[string]string{"Retry-After": "soon"}, retryable: true,
			msg: "HTTP 429 Too Many Requests"},
		{name: "500", code: 500, body: "boom\n", retryable: true, msg: "HTTP 500: boom"},
		{name: "502", code: 502, retryable: true, msg: "HTTP 502 Bad Gateway"},
		{name: "502 Retry-After ignored", code: 502, hdr: map[string]string{"Retry-After": "60"}, retryable: true,
			msg: "HTTP 502 Bad Gateway"},
		{name: "503 Retry-After seconds", code: 503, hdr: map[string]string{"Retry-After": "7"}, body: "overloaded",
			retryable: true, after: 7 * time.Second, msg: "HTTP 503: overloaded (retry after 7s)"},
		{name: "503 Retry-After date", code: 503, hdr: map[string]string{"Retry-After": date(10 * time.Minute)},
			retryable: true, after: 10 * time.Minute, msg: "HTTP 503 Service Unavailable (retry after 10m0s)"},
		{name: "429 Retry-After a day, capped", code: 429, hdr: map[string]string{"Retry-After": "86400"}, retryable: true,
			after: DefaultMaxRetryAfter, msg: "HTTP 429 Too Many Requests (retry after 1h0m0s)"},
		{name: "503 Retry-After date in a week, capped", code: 503, hdr: map[string]string{"Retry-After": date(7 * 24 * time.Hour)},
			retryable: true, after: DefaultMaxRetryAfter, msg: "HTTP 503 Service Unavailable (retry after 1h0m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var elsewhere atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/hook", status(tt.code, tt.hdr, tt.body))
			mux.HandleFunc("/moved", func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) })
			srv := mustServer(t, mux.ServeHTTP)
			h := mustHTTP(t, HTTPOptions{URL: srv.URL + "/hook", Now: clock.Now})

			err := h.Handle(t.Context(), testDelivery())
			if tt.ok {
				if err != nil {
					t.Fatalf("Handle: %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Handle: nil, want an error")
			}
			if d := retry.Classify(err); d.Retryable != tt.retryable || d.After != tt.after {
				t.Errorf("Classify = %+v, want retryable %v after %s", d, tt.retryable, tt.after)
			}
			if want := "destination " + srv.URL + "/hook: " + tt.msg; err.Error() != want {
				t.Errorf("error\n got %q\nwant %q", err, want)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tt.code {
				t.Errorf("errors.As StatusError = %+v, want code %d", se, tt.code)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("redirect followed %d times", n)
			}
		})
	}
}

// TestHandleErrorBodyCut checks that a long, multi-line error body becomes
// one line of at most MaxErrorBody bytes.
func TestHandleErrorBodyCut(t *testing.T) {
	body := strings.Repeat("<p>line\r\n\tnext é</p>\n", 1000) // 22 KiB
	srv := mustServer(t, status(500, nil, body))
	h := mustHTTP(t, HTTPOptions{URL: srv.URL})
	err := h.Handle(t.Context(), testDelivery())
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("Handle: %v, want a StatusError", err)
	}
	if strings.ContainsAny(err.Error(), "\r\n\t") {
		t.Errorf("error is not one line: %q", err)
	}
	if len(se.Body) > MaxErrorBody+len("…") || !strings.HasSuffix(se.Body, "…") {
		t.Errorf("body is %d bytes (%q), want at most %d and cut", len(se.Body), se.Body, MaxErrorBody)
	}
	if !strings.HasPrefix(se.Body, "<p>line next é</p> <p>line") {
		t.Errorf("body = %q", se.Body[:40])
	}
}

// TestHandleRequest checks the exact body and headers the destination gets.
func TestHandleRequest(t *testing.T) {
	body := []byte("{\"id\":\"evt_1\"}\x00\xff binary \r\n")
	var (
		mu  sync.Mutex
		got *http.Request
		raw []byte
	)
	srv := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, raw = r, b
		mu.Unlock()
		w.WriteHeader(204)
	})
	h := mustHTTP(t, HTTPOptions{URL: srv.URL + "/hooks/stripe?token=abc"})
	d := Delivery{
		Key: "stripe:evt_1", Provider: "stripe", EventType: "invoice.paid", Route: "billing", Attempt: 3,
		Body: body, ContentType: "application/json; charset=utf-8",
		Headers: []kgo.RecordHeader{
			{Key: "stripe-signature", Value: []byte("t=1,v1=abc")},
			{Key: "x-multi", Value: []byte("one")},
			{Key: "x-multi", Value: []byte("two")},
			{Key: "authorization", Value: []byte("Bearer provider-token")},
			{Key: "Cookie", Value: []byte("session=1")},
			{Key: "proxy-authorization", Value: []byte("Basic eA==")},
			{Key: "host", Value: []byte("evil.example")},
			{Key: "content-length", Value: []byte("1")},
			{Key: "transfer-encoding", Value: []byte("chunked")},
			{Key: "connection", Value: []byte("x-private, keep-alive")},
			{Key: "x-private", Value: []byte("hop")},
			{Key: "keep-alive", Value: []byte("timeout=5")},
			{Key: "upgrade", Value: []byte("websocket")},
			{Key: "te", Value: []byte("trailers")},
			{Key: "x-bad-value", Value: []byte("a\nb")},
			{Key: "bad name", Value: []byte("x")},
			{Key: "idempotency-key", Value: []byte("spoofed")},
			{Key: "x-hookline-attempt", Value: []byte("99")},
			{Key: "x-hookline-route", Value: []byte("spoofed")},
			{Key: "user-agent", Value: []byte("Stripe/1.0")},
			{Key: "content-type", Value: []byte("text/plain")},
		},
	}
	if err := h.Handle(t.Context(), d); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.Method != http.MethodPost || got.URL.RequestURI() != "/hooks/stripe?token=abc" {
		t.Errorf("request = %s %s", got.Method, got.URL.RequestURI())
	}
	if !bytes.Equal(raw, body) || got.ContentLength != int64(len(body)) || len(got.TransferEncoding) != 0 {
		t.Errorf("body = %q (length %d, %v), want %q with a Content-Length", raw, got.ContentLength, got.TransferEncoding, body)
	}
	if got.Host != srv.Listener.Addr().String() {
		t.Errorf("Host = %q, want the destination's", got.Host)
	}
	want := map[string][]string{
		"Stripe-Signature":      {"t=1,v1=abc"},
		"X-Multi":               {"one", "two"},
		"Idempotency-Key":       {"stripe:evt_1"},
		"X-Hookline-Attempt":    {"3"},
		"X-Hookline-Provider":   {"stripe"},
		"X-Hookline-Event-Type": {"invoice.paid"},
		"X-Hookline-Route":      {"billing"},
		"User-Agent":            {"hookline/1"},
		"Content-Type":          {"application/json; charset=utf-8"},
	}
	for name, values := range want {
		if !slices.Equal(got.Header[name], values) {
			t.Errorf("%s = %q, want %q", name, got.Header[name], values)
		}
	}
	for _, name := range []string{"Authorization", "Cookie", "Proxy-Authorization", "X-Private", "Keep-Alive",
		"Upgrade", "Te", "X-Bad-Value", "Bad Name"} {
		if v, ok := got.Header[name]; ok {
			t.Errorf("%s forwarded: %q", name, v)
		}
	}
}

func TestHandleEmptyOptionalHeaders(t *testing.T) {
	var got http.Header
	srv := mustServer(t, func(w http.ResponseWriter, r *http.Request) { got = r.Header; w.WriteHeader(204) })
	h := mustHTTP(t, HTTPOptions{URL: srv.URL})
	d := Delivery{Key: "k", Provider: "acme", Attempt: 1,
		Headers: []kgo.RecordHeader{
			{Key: "x-hookline-event-type", Value: []byte("spoofed")},
			{Key: "x-hookline-route", Value: []byte("spoofed")},
		}}
	if err := h.Handle(t.Context(), d); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	for _, name := range []string{"X-Hookline-Event-Type", "X-Hookline-Route", "Content-Type"} {
		if v, ok := got[name]; ok {
			t.Errorf("%s = %q, want none", name, v)
		}
	}
}

func TestHandleUnsendableKeyIsPermanent(t *testing.T) {
	var calls atomic.Int32
	srv := mustServer(t, func(w http.ResponseWriter, _ *http.Request) { calls.Add(1) })
	h := mustHTTP(t, HTTPOptions{URL: srv.URL})
	d := testDelivery()
	d.Key = "generic:a\nb"
	err := h.Handle(t.Context(), d)
	if err == nil || retry.Classify(err).Retryable || !strings.Contains(err.Error(), "Idempotency-Key") {
		t.Errorf("Handle = %v, want a permanent error naming Idempotency-Key", err)
	}
	if calls.Load() != 0 {
		t.Error("the destination was called")
	}
}

func TestHandleTimeout(t *testing.T) {
	srv := mustHangServer(t, nil)
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, Timeout: 50 * time.Millisecond})
	start := time.Now()
	err := h.Handle(t.Context(), testDelivery())
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("returned after %s, before the timeout", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("Handle = %v, want a DeadlineExceeded that is not Canceled", err)
	}
	if !retry.Classify(err).Retryable {
		t.Errorf("timeout %v is not retryable", err)
	}
	if want := "destination " + srv.URL + ": no answer within 50ms: context deadline exceeded"; err.Error() != want {
		t.Errorf("error\n got %q\nwant %q", err, want)
	}
}

// mustHangServer starts a server that reads the request (so it notices the
// client going away), closes arrived when not nil, and answers only when the
// client has gone or the test ends.
func mustHangServer(t *testing.T, arrived chan struct{}) *httptest.Server {
	t.Helper()
	end := make(chan struct{})
	srv := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if arrived != nil {
			close(arrived)
		}
		select {
		case <-r.Context().Done():
		case <-end:
		}
	})
	t.Cleanup(func() { close(end) }) // before srv.Close, which waits for handlers
	return srv
}

func TestHandleConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/hook?token=secret"
	ln.Close()
	h := mustHTTP(t, HTTPOptions{URL: url})
	err = h.Handle(t.Context(), testDelivery())
	if !errors.Is(err, syscall.ECONNREFUSED) || !retry.Classify(err).Retryable {
		t.Errorf("Handle = %v, want a retryable ECONNREFUSED", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "destination http://"+ln.Addr().String()+"/hook: dial tcp") || strings.Contains(msg, "secret") {
		t.Errorf("error = %q", msg)
	}
}

func TestHandleCallerCancel(t *testing.T) {
	arrived := make(chan struct{})
	srv := mustHangServer(t, arrived)
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, BreakerFailures: 1})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-arrived; cancel() }()
	err := h.Handle(ctx, testDelivery())
	if !errors.Is(err, context.Canceled) || !retry.Classify(err).Retryable {
		t.Errorf("Handle = %v, want a retryable context.Canceled", err)
	}
	if h.BreakerOpen() {
		t.Error("a cancelled call opened the breaker")
	}

	// Already cancelled: the destination is not called.
	err = h.Handle(ctx, testDelivery())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Handle with a done ctx = %v, want context.Canceled", err)
	}
}

// TestHandleCancelWhileRateLimited runs in a synctest bubble: the limiter's
// clock is fake and no destination is called.
func TestHandleCancelWhileRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			t.Error("the destination was called")
			return nil, errors.New("unexpected call")
		})}
		h := mustHTTP(t, HTTPOptions{URL: "http://x/", RatePerSecond: 1, Client: client})
		h.limiter.Allow() // take the only token

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- h.Handle(ctx, testDelivery()) }()
		synctest.Wait() // Handle is waiting for a token
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || !retry.Classify(err).Retryable {
			t.Errorf("Handle = %v, want a retryable context.Canceled", err)
		}

		// A deadline shorter than the wait for a token fails at once.
		ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := h.Handle(ctx, testDelivery())
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rate limit") || time.Since(start) != 0 {
			t.Errorf("Handle = %v after %s, want an immediate rate limit DeadlineExceeded", err, time.Since(start))
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHandleRateLimit: with 50/s and a burst of 1, the n-th call of a burst
// does not reach the destination before (n-1)/50 s.
func TestHandleRateLimit(t *testing.T) {
	const n, perSecond = 8, 50
	var (
		mu       sync.Mutex
		arrivals []time.Time
	)
	srv := mustServer(t, func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		w.WriteHeader(204)
	})
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, RatePerSecond: perSecond, Burst: 1})
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := h.Handle(t.Context(), testDelivery()); err != nil {
				t.Errorf("Handle: %v", err)
			}
		})
	}
	wg.Wait()
	slices.SortFunc(arrivals, time.Time.Compare)
	const slack = time.Millisecond // the limiter rounds float seconds to nanoseconds
	for i, at := range arrivals {
		if min := time.Duration(i) * time.Second / perSecond; at.Sub(start) < min-slack {
			t.Errorf("call %d started after %s, want at least %s", i+1, at.Sub(start), min)
		}
	}
	if len(arrivals) != n {
		t.Errorf("%d calls arrived, want %d", len(arrivals), n)
	}
}

func TestHandleUserClientRedirectsOff(t *testing.T) {
	var moved atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", status(307, map[string]string{"Location": "/moved"}, ""))
	mux.HandleFunc("/moved", func(http.ResponseWriter, *http.Request) { moved.Add(1) })
	srv := mustServer(t, mux.ServeHTTP)
	client := &http.Client{}
	h := mustHTTP(t, HTTPOptions{URL: srv.URL + "/hook", Client: client})
	err := h.Handle(t.Context(), testDelivery())
	if err == nil || retry.Classify(err).Retryable || moved.Load() != 0 {
		t.Errorf("Handle = %v (%d calls to /moved), want a permanent error and no redirect", err, moved.Load())
	}
	if client.CheckRedirect != nil {
		t.Error("the caller's client was modified")
	}
}
