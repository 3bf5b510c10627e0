package deliver

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeClock is a settable HTTPOptions.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// mustServer starts an httptest server closed at the end of the test.
func mustServer(tb testing.TB, h http.HandlerFunc) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}

// mustHTTP builds an HTTP destination whose idle connections are closed at
// the end of the test.
func mustHTTP(tb testing.TB, o HTTPOptions) *HTTP {
	tb.Helper()
	h, err := NewHTTP(o)
	if err != nil {
		tb.Fatalf("NewHTTP: %v", err)
	}
	tb.Cleanup(h.client.CloseIdleConnections)
	return h
}

// testDelivery is a delivery as the processor builds it from a Stripe record.
func testDelivery() Delivery {
	return Delivery{
		Key:         "stripe:evt_1",
		Provider:    "stripe",
		EventType:   "invoice.paid",
		Attempt:     1,
		Body:        []byte(`{"id":"evt_1"}`),
		ContentType: "application/json",
		Headers:     []kgo.RecordHeader{{Key: "stripe-signature", Value: []byte("t=1,v1=abc")}},
	}
}

// status answers every request with code, the given headers and body.
func status(code int, hdr map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}
