package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// capture signs body as provider once, with hdr set, and returns the
// headers as an attacker who captured the delivery holds them.
func (e *testEnv) capture(tb testing.TB, provider string, body []byte, hdr map[string]string) http.Header {
	tb.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	for k, v := range hdr {
		h.Set(k, v)
	}
	p, ok := e.reg.Get(provider)
	if !ok {
		tb.Fatalf("no provider %s", provider)
	}
	if err := p.Sign(body, time.Now(), h); err != nil {
		tb.Fatal(err)
	}
	return h
}

// replay posts body with exactly the headers h (plus set) and decodes the
// answer.
func replay(tb testing.TB, cl *http.Client, base, provider string, body []byte, h http.Header, set map[string]string) (int, answer) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = h.Clone()
	for k, v := range set {
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		tb.Fatalf("answer %d %q: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, a
}

// rawRecords returns every record of raw, read_committed; the count is
// checked against the topic's end offsets, so nothing is left unread.
func rawRecords(tb testing.TB, e *testEnv) map[string]int {
	tb.Helper()
	n := kafkatest.EndOffsets(tb, e.brokers, e.raw())
	byKey := map[string]int{}
	if n == 0 {
		return byKey
	}
	for _, r := range kafkatest.ReadN(tb, e.brokers, e.raw(), int(n), 30*time.Second) {
		byKey[string(r.Key)]++
	}
	return byKey
}

// TestReplayGitHub2000 (issue 25, acceptance): one captured GitHub delivery
// replayed 2,000 times with new delivery ids and chosen event types, 16 at
// a time, reaches raw once; every replay is answered 202 replay (issue 32:
// under another key than the one accepted), counted, and the first 16 get
// a suppressed outcome, no more. A different body is still a new delivery.
func TestReplayGitHub2000(t *testing.T) {
	e := newEnv(t)
	base := e.start(t)
	body := []byte(`{"action":"opened","issue":{"number":2000,"title":"captured"}}`)
	captured := e.capture(t, "github", body, map[string]string{"X-GitHub-Event": "issues"})

	const replays, workers = 2000, 16
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	ids := make(chan int)
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range ids {
				code, a := replay(t, cl, base, "github", body, captured, map[string]string{
					"X-GitHub-Delivery": fmt.Sprintf("replay-%04d", i), "X-GitHub-Event": fmt.Sprint("chosen-", i),
				})
				mu.Lock()
				answers[fmt.Sprint(code, " ", a.Status, a.Error)]++
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for i := range replays {
		ids <- i
	}
	close(ids)
	wg.Wait()
	t.Logf("%d requests in %s: %v", replays, time.Since(start).Round(time.Millisecond), answers)
	if answers["202 accepted"] != 1 || answers["202 replay"] != replays-1 {
		t.Fatalf("answers %v, want 1 accepted and %d replay", answers, replays-1)
	}
	got := rawRecords(t, e)
	if len(got) != 1 {
		t.Fatalf("raw holds %v, want one record", got)
	}
	for k, n := range got {
		if n != 1 || !strings.HasPrefix(k, "github:replay-") {
			t.Fatalf("raw holds %v, want one record of one of the replays' keys", got)
		}
	}

	other := []byte(`{"action":"closed","issue":{"number":2000}}`)
	if code, a := replay(t, cl, base, "github", other, e.capture(t, "github", other, map[string]string{"X-GitHub-Delivery": "new-event", "X-GitHub-Event": "issues"}), nil); code != 202 || a.Status != "accepted" {
		t.Fatalf("a different body: %d %+v, want accepted", code, a)
	}
	if got := rawRecords(t, e); len(got) != 2 || got["github:new-event"] != 1 {
		t.Fatalf("raw holds %v, want the new event too", got)
	}
	resp, err := cl.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`hookline_ingest_replays_total{provider="github"} %d`, replays-1),
		fmt.Sprintf(`hookline_ingest_replays_suppressed_total{provider="github"} %d`, replays-1),
	} {
		if !strings.Contains(string(m), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// 16 suppressed outcomes (maxTracedReplays), each under its own key.
	if n := kafkatest.EndOffsets(t, e.brokers, e.prefix+"webhooks.outcomes"); n != 16 {
		t.Errorf("outcomes holds %d records, want 16 suppressed ones", n)
	}
}

// TestReplayGoCardlessBatch (issue 25, acceptance): a GoCardless batch
// posted, then replayed as it was captured, leaves raw with one record per
// event, not two. A new batch sharing one event with it is a new delivery
// (its shared event is the processor's to drop).
func TestReplayGoCardlessBatch(t *testing.T) {
	e := newEnv(t)
	base := e.start(t)
	var events []string
	for i := range 50 {
		events = append(events, fmt.Sprintf(`{"id":"EVR%03d","resource_type":"payments","action":"confirmed"}`, i))
	}
	body := []byte(`{"events":[` + strings.Join(events, ",") + `]}`)
	captured := e.capture(t, "gocardless", body, nil)
	cl := &http.Client{}
	for i, want := range []string{"accepted", "duplicate", "duplicate"} {
		code, a := replay(t, cl, base, "gocardless", body, captured, nil)
		if code != 202 || a.Status != want || len(a.IdempotencyKeys) != len(events) {
			t.Fatalf("post %d: %d %s with %d keys, want 202 %s with %d", i, code, a.Status, len(a.IdempotencyKeys), want, len(events))
		}
	}
	got := rawRecords(t, e)
	if len(got) != len(events) {
		t.Fatalf("raw holds %d keys, want %d", len(got), len(events))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("raw holds %s %d times, want once", k, n)
		}
	}

	next := []byte(`{"events":[` + events[0] + `,{"id":"EVR999","resource_type":"payments","action":"paid_out"}]}`)
	if code, a := replay(t, cl, base, "gocardless", next, e.capture(t, "gocardless", next, nil), nil); code != 202 || a.Status != "accepted" {
		t.Fatalf("a new batch: %d %+v, want accepted", code, a)
	}
	if got := rawRecords(t, e); len(got) != len(events)+1 || got["gocardless:EVR999"] != 1 || got["gocardless:EVR000"] != 2 {
		t.Fatalf("after a new batch raw holds %d keys (EVR999 %d, EVR000 %d), want %d, 1, 2", len(got), got["gocardless:EVR999"], got["gocardless:EVR000"], len(events)+1)
	}
}
