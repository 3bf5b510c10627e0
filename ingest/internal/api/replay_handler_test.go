package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// replayServer is mustServer with the replay cache's cap given.
func replayServer(tb testing.TB, pub Publisher, entries int) (http.Handler, *providers.Registry) {
	tb.Helper()
	s, reg := testServer(tb, pub, func(c *Config) { c.ReplayCacheEntries = entries })
	return s.Handler(), reg
}

// resend posts a copy of req: the same body and every header as captured.
func resend(tb testing.TB, h http.Handler, req *http.Request, body []byte, set map[string]string) (int, accepted) {
	tb.Helper()
	r := httptest.NewRequest(req.Method, req.URL.Path, strings.NewReader(string(body)))
	r.Header = req.Header.Clone()
	for k, v := range set {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var a accepted
	if w.Code == http.StatusAccepted {
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			tb.Fatalf("202 body %s: %v", w.Body, err)
		}
	}
	return w.Code, a
}

// TestReplayRecognised: a captured github delivery sent again with new
// delivery ids is answered 202 duplicate and produces nothing; a different
// body is a new delivery; a provider that signs a timestamp and keys on the
// body (stripe) is left to the processor's dedup; with recognition off,
// every replay is produced.
func TestReplayRecognised(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := replayServer(t, pub, DefaultReplayCacheEntries)
	now := time.Now()
	body := []byte(`{"action":"opened","issue":{"number":1}}`)
	captured := signed(t, reg, "github", "application/json", body, now, map[string]string{"X-GitHub-Delivery": "d-0", "X-GitHub-Event": "issues"})

	if code, a := resend(t, h, captured, body, nil); code != 202 || a.Status != statusAccepted || a.IdempotencyKey != "github:d-0" {
		t.Fatalf("first delivery: %d %+v", code, a)
	}
	for i := 1; i <= 20; i++ {
		code, a := resend(t, h, captured, body, map[string]string{"X-GitHub-Delivery": fmt.Sprint("d-", i), "X-GitHub-Event": "ping"})
		if code != 202 || a.Status != statusDuplicate || a.IdempotencyKey != fmt.Sprint("github:d-", i) {
			t.Fatalf("replay %d: %d %+v, want 202 duplicate naming its key", i, code, a)
		}
	}
	if n := pub.count(); n != 1 {
		t.Fatalf("%d records produced for one delivery and 20 replays, want 1", n)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{`hookline_ingest_replays_total{provider="github"} 20`, "hookline_ingest_replay_cache_entries 1", "hookline_ingest_replay_cache_evictions_total 0"} {
		if !strings.Contains(w.Body.String(), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	other := []byte(`{"action":"closed","issue":{"number":1}}`)
	if code, a := resend(t, h, signed(t, reg, "github", "application/json", other, now, map[string]string{"X-GitHub-Delivery": "d-new"}), other, nil); code != 202 || a.Status != statusAccepted {
		t.Fatalf("a different body: %d %+v, want accepted", code, a)
	}
	stripe := []byte(`{"id":"evt_r","type":"x"}`)
	st := signed(t, reg, "stripe", "application/json", stripe, now, nil)
	for range 2 {
		if code, a := resend(t, h, st, stripe, nil); code != 202 || a.Status != statusAccepted {
			t.Fatalf("stripe sent again: %d %+v, want accepted (the processor drops it)", code, a)
		}
	}
	if n := pub.count(); n != 4 {
		t.Fatalf("%d records, want 4", n)
	}

	off := &fakePublisher{}
	hOff, _ := replayServer(t, off, 0)
	for i := range 3 {
		if code, a := resend(t, hOff, captured, body, map[string]string{"X-GitHub-Delivery": fmt.Sprint("off-", i)}); code != 202 || a.Status != statusAccepted {
			t.Fatalf("recognition off: %d %+v", code, a)
		}
	}
	if off.count() != 3 {
		t.Fatalf("recognition off: %d records, want 3", off.count())
	}
}

// TestReplayAfterFailedProduce: a delivery whose produce failed is not
// remembered, so the provider's retry of it is accepted and produced.
func TestReplayAfterFailedProduce(t *testing.T) {
	pub := &fakePublisher{err: publish.ErrDeadline}
	h, reg := replayServer(t, pub, DefaultReplayCacheEntries)
	body := []byte(`{"events":[{"id":"EVf1","action":"created"},{"id":"EVf2","action":"paid"}]}`)
	req := signed(t, reg, "gocardless", "application/json", body, time.Now(), nil)
	if code, _ := resend(t, h, req, body, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("produce fails: %d, want 503", code)
	}
	pub.mu.Lock()
	pub.err = nil
	pub.mu.Unlock()
	if code, a := resend(t, h, req, body, nil); code != 202 || a.Status != statusAccepted {
		t.Fatalf("retry after a failed produce: %d %+v, want accepted", code, a)
	}
	if code, a := resend(t, h, req, body, nil); code != 202 || a.Status != statusDuplicate || len(a.IdempotencyKeys) != 2 {
		t.Fatalf("the same batch once more: %d %+v, want duplicate with both keys", code, a)
	}
	if n := pub.count(); n != 2 {
		t.Fatalf("%d records, want the batch's 2 once", n)
	}
}

// TestReplaySparesRateLimit: replays take no token of the provider's rate
// limit, so a flood of them leaves the real deliveries their rate.
func TestReplaySparesRateLimit(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := replayServer(t, pub, DefaultReplayCacheEntries)
	now := time.Now()
	first := []byte(`{"n":"first"}`)
	req := signed(t, reg, "limited", "application/json", first, now, nil)
	codes := map[string]int{}
	for range 50 {
		code, a := resend(t, h, req, first, nil)
		codes[fmt.Sprint(code, a.Status)]++
	}
	if codes["202accepted"] != 1 || codes["202duplicate"] != 49 {
		t.Fatalf("one delivery and 49 replays to a 1/s burst 2 provider: %v", codes)
	}
	second := []byte(`{"n":"second"}`) // the burst's second token is still there
	if code, a := resend(t, h, signed(t, reg, "limited", "application/json", second, now, nil), second, nil); code != 202 || a.Status != statusAccepted {
		t.Fatalf("a real delivery after 49 replays: %d %+v, want accepted", code, a)
	}
}

// TestReplayFailedProduceRealBroker: the produce of a delivery fails for
// real (its topic does not exist yet, as before ingest has ensured its
// topics); once the topic exists the provider's retry of the same signed
// delivery is accepted and lands in raw once, and a replay after that
// adds nothing.
func TestReplayFailedProduceRealBroker(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Prefix(t) + "webhooks.raw"
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(2*time.Second))
	s, reg := testServer(t, publish.New(cl, 2*time.Second), func(c *Config) { c.Topic = topic })
	h := s.Handler()
	body := []byte(`{"action":"opened","issue":{"number":42}}`)
	req := signed(t, reg, "github", "application/json", body, time.Now(), map[string]string{"X-GitHub-Delivery": "retry-1", "X-GitHub-Event": "issues"})
	if code, _ := resend(t, h, req, body, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("produce to a missing topic: %d, want 503", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// A topic created a moment ago may not be in the producer's metadata
	// yet: the provider's retries go on until one is accepted or the
	// deadline passes.
	var code int
	var a accepted
	tries := 0
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		tries++
		if code, a = resend(t, h, req, body, nil); code == 202 || time.Now().After(deadline) {
			break
		}
	}
	if code != 202 || a.Status != statusAccepted {
		t.Fatalf("the provider's retry after the failed produce: %d %+v after %d tries in 30s, want accepted", code, a, tries)
	}
	if code, a := resend(t, h, req, body, map[string]string{"X-GitHub-Delivery": "retry-2"}); code != 202 || a.Status != statusDuplicate {
		t.Fatalf("a replay after it: %d %+v, want duplicate", code, a)
	}
	if n := kafkatest.EndOffsets(t, brokers, topic); n != 1 {
		t.Fatalf("raw holds %d records, want 1", n)
	}
	if r := kafkatest.ReadN(t, brokers, topic, 1, 20*time.Second)[0]; string(r.Key) != "github:retry-1" || string(r.Value) != string(body) {
		t.Fatalf("raw's record: key %s value %s", r.Key, r.Value)
	}
}
