package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// BenchmarkWebhook is the CPU cost of one signed 1 KiB Stripe delivery
// through the HTTP surface with a publisher that does nothing, against a bare
// gin handler that reads the body and answers 202 (the same baseline as make
// bench-ingest, without the network).
func BenchmarkWebhook(b *testing.B) {
	h, reg := mustServer(b, &fakePublisher{})
	body := []byte(`{"id":"evt_bench","type":"invoice.paid","pad":"` + strings.Repeat("x", 1024-45) + `"}`)
	sig := signed(b, reg, "stripe", "application/json", body, time.Now(), nil).Header.Get("Stripe-Signature")
	bare := gin.New()
	bare.POST("/webhooks/:provider", func(c *gin.Context) {
		_, _ = c.GetRawData()
		c.JSON(http.StatusAccepted, gin.H{"status": "accepted"})
	})
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"ingest", h}, {"bare", bare}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Stripe-Signature", sig)
				w := httptest.NewRecorder()
				tc.h.ServeHTTP(w, req)
				if w.Code != http.StatusAccepted {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
