package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// blockingPublisher holds every Publish until release is closed.
type blockingPublisher struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingPublisher) Publish(ctx context.Context, _ []*kgo.Record) error {
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRequestsInFlight: hookline_ingest_requests_in_flight counts a
// webhook request while it waits for Kafka's ack, and drops back once it
// is answered.
func TestRequestsInFlight(t *testing.T) {
	pub := &blockingPublisher{entered: make(chan struct{}), release: make(chan struct{})}
	s, reg := testServer(t, pub, nil)
	h := s.Handler()
	gauge := func() float64 {
		t.Helper()
		mfs, err := s.cfg.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "hookline_ingest_requests_in_flight" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("hookline_ingest_requests_in_flight not registered")
		return 0
	}

	body := []byte(`{"id":"evt_inflight","type":"charge.succeeded"}`)
	req := signed(t, reg, "stripe", "application/json", body, time.Now(), nil)
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		done <- w.Code
	}()
	<-pub.entered
	if got := gauge(); got != 1 {
		t.Errorf("while waiting for the ack: %v in flight, want 1", got)
	}
	close(pub.release)
	if code := <-done; code != http.StatusAccepted {
		t.Errorf("answered %d, want 202", code)
	}
	if got := gauge(); got != 0 {
		t.Errorf("after the answer: %v in flight, want 0", got)
	}
}
