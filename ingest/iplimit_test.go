package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// TestIPRateLimitBehindProxy runs ingest with HOOKLINE_IP_RATE_LIMIT=5/5
// behind a trusted proxy (the test, on 127.0.0.1) on the real broker: 50
// requests from one forwarded address are mostly refused 429 with
// Retry-After, a spoofed left part of X-Forwarded-For does not escape the
// limit, and another forwarded address is unaffected. Only the accepted
// requests reach the raw topic.
func TestIPRateLimitBehindProxy(t *testing.T) {
	e := newEnv(t)
	e.vars["HOOKLINE_IP_RATE_LIMIT"] = "5/5"
	e.vars["HOOKLINE_TRUSTED_PROXIES"] = "127.0.0.1"
	base := e.start(t)
	before := kafkatest.EndOffsets(t, e.brokers, e.raw())

	send := func(i int, xff string) *http.Response {
		body := []byte(fmt.Sprintf(`{"id":"evt_ip_%d_%s","object":"event","type":"x"}`, i, xff))
		resp, _ := e.post(t, base, "stripe", "application/json", body, map[string]string{"X-Forwarded-For": xff})
		return resp
	}
	codes := map[int]int{}
	start := time.Now()
	for i := range 50 {
		xff := "198.51.100.7"
		if i%2 == 1 {
			xff = fmt.Sprintf("10.0.0.%d, 198.51.100.7", i) // the client's own claim, left of the proxy's
		}
		resp := send(i, xff)
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After")
		}
	}
	elapsed := time.Since(start)
	// 5 at once and 5 a second after: at most 5 + 5×elapsed accepted.
	maxAccepted := 5 + int(5*elapsed.Seconds())
	t.Logf("50 requests from one address in %s: %v", elapsed.Round(time.Millisecond), codes)
	if codes[202]+codes[429] != 50 || codes[202] > maxAccepted || elapsed <= time.Second && codes[429] < 40 {
		t.Fatalf("codes %v in %s, want at most %d accepted and the rest 429", codes, elapsed, maxAccepted)
	}
	for i := range 5 {
		if resp := send(100+i, "203.0.113.9"); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("another address, request %d: %d", i, resp.StatusCode)
		}
	}
	// A 202 is answered after Kafka acknowledged, so the count is exact now.
	if got, want := kafkatest.EndOffsets(t, e.brokers, e.raw())-before, int64(codes[202]+5); got != want {
		t.Fatalf("raw topic grew by %d records, want %d (the accepted ones)", got, want)
	}
}
