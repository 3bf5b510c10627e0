package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// TestBrokerUnreachable points a real franz-go producer at a closed port:
// the answer must be 503 with Retry-After within the produce deadline plus
// one second, never a 2xx.
func TestBrokerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	cl, err := kafkatest.NewClient([]string{addr})(kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const deadline = time.Second
	h, reg := mustServer(t, publish.New(cl, deadline))

	for i := 0; i < 3; i++ {
		start := time.Now()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, reg, "stripe", "application/json", []byte(`{"id":"evt_down","type":"x"}`), time.Now(), nil))
		took := time.Since(start)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d with no broker, want 503: %s", w.Code, w.Body)
		}
		if w.Header().Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		if took > deadline+time.Second {
			t.Fatalf("answered after %s, want within the deadline %s plus 1s", took, deadline)
		}
	}
}
