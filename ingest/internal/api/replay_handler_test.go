package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/schemas"
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
// delivery ids is answered 202 replay naming the first key, produces
// nothing on raw, and gets a suppressed outcome under its own key (the
// first maxTracedReplays of them); sent again under its own id it is a
// duplicate; a different body is a new delivery; a provider that signs a
// timestamp and keys on the body (stripe) is left to the processor's
// dedup; with recognition off, every replay is produced.
func TestReplayRecognised(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := replayServer(t, pub, DefaultReplayCacheEntries)
	now := time.Now()
	body := []byte(`{"action":"opened","issue":{"number":1}}`)
	captured := signed(t, reg, "github", "application/json", body, now, map[string]string{"X-GitHub-Delivery": "d-0", "X-GitHub-Event": "issues"})

	if code, a := resend(t, h, captured, body, nil); code != 202 || a.Status != statusAccepted || a.IdempotencyKey != "github:d-0" {
		t.Fatalf("first delivery: %d %+v", code, a)
	}
	const replays = 20
	for i := 1; i <= replays; i++ {
		code, a := resend(t, h, captured, body, map[string]string{"X-GitHub-Delivery": fmt.Sprint("d-", i), "X-GitHub-Event": "ping"})
		if code != 202 || a.Status != statusReplay || a.IdempotencyKey != fmt.Sprint("github:d-", i) || a.ReplayOf != "github:d-0" {
			t.Fatalf("replay %d: %d %+v, want 202 replay naming its key and github:d-0", i, code, a)
		}
	}
	if code, a := resend(t, h, captured, body, nil); code != 202 || a.Status != statusDuplicate || a.IdempotencyKey != "github:d-0" || a.ReplayOf != "" {
		t.Fatalf("sent again under its own id: %d %+v, want 202 duplicate", code, a)
	}
	if n := len(pub.on("webhooks.raw")); n != 1 {
		t.Fatalf("%d records produced for one delivery and %d replays, want 1", n, replays)
	}
	traced := pub.on("webhooks.outcomes")
	if len(traced) != maxTracedReplays {
		t.Fatalf("%d suppressed outcomes for %d replays, want the first %d", len(traced), replays, maxTracedReplays)
	}
	for i, r := range traced {
		o, err := outcome.Decode(r.Value)
		want := fmt.Sprint("github:d-", i+1)
		if err != nil || string(r.Key) != want || o.Key != want || o.Status != outcome.StatusSuppressed || o.ReplayOf != "github:d-0" || o.Provider != "github" || o.EventType != "ping" {
			t.Errorf("suppressed outcome %d: key %s %+v %v; want key %s, suppressed, replay of github:d-0", i, r.Key, o, err, want)
		}
		if err := schemas.Validate(schemas.Outcome, r.Value); err != nil {
			t.Errorf("suppressed outcome %d fails the outcome schema: %v\n%s", i, err, r.Value)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		fmt.Sprintf(`hookline_ingest_replays_total{provider="github"} %d`, replays+1),
		fmt.Sprintf(`hookline_ingest_replays_suppressed_total{provider="github"} %d`, replays),
		"hookline_ingest_replay_cache_entries 1", "hookline_ingest_replay_cache_evictions_total 0",
	} {
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
	if n := len(pub.on("webhooks.raw")); n != 4 {
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
	topic, outcomes := kafkatest.Prefix(t)+"webhooks.raw", kafkatest.Prefix(t)+"webhooks.outcomes"
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(2*time.Second))
	s, reg := testServer(t, publish.New(cl, 2*time.Second), func(c *Config) { c.Topic, c.OutcomesTopic = topic, outcomes })
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
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, outcomes); err != nil {
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
	if code, a := resend(t, h, req, body, nil); code != 202 || a.Status != statusDuplicate {
		t.Fatalf("sent again: %d %+v, want duplicate", code, a)
	}
	if code, a := resend(t, h, req, body, map[string]string{"X-GitHub-Delivery": "retry-2"}); code != 202 || a.Status != statusReplay || a.ReplayOf != "github:retry-1" {
		t.Fatalf("a replay after it: %d %+v, want replay of github:retry-1", code, a)
	}
	if o := kafkatest.ReadN(t, brokers, outcomes, 1, 20*time.Second)[0]; string(o.Key) != "github:retry-2" || !strings.Contains(string(o.Value), `"replay_of":"github:retry-1"`) {
		t.Fatalf("the replay's outcome: key %s value %s", o.Key, o.Value)
	}
	if n := kafkatest.EndOffsets(t, brokers, topic); n != 1 {
		t.Fatalf("raw holds %d records, want 1", n)
	}
	if r := kafkatest.ReadN(t, brokers, topic, 1, 20*time.Second)[0]; string(r.Key) != "github:retry-1" || string(r.Value) != string(body) {
		t.Fatalf("raw's record: key %s value %s", r.Key, r.Value)
	}
}

// TestIdenticalGitHubPairs (issue 32): GitHub's own example payloads that
// its examples package lists twice, byte for byte (the vendored corpus,
// corpus.GitHubPairs: org_block blocked, membership removed, organization
// member_added, sponsorship created, github_app_authorization revoked),
// posted under their two delivery ids as two real events would be. Within
// the provider's replay_window the second is suppressed: answered 202
// replay naming the first, counted, and given a suppressed outcome under
// its own key; further apart than the window, or with replay_window 0,
// both are produced. The clock is the server's (Config.Now), so the gaps
// are exact.
func TestIdenticalGitHubPairs(t *testing.T) {
	pairs := corpus.GitHubPairs(corpus.GitHub(t))
	if len(pairs) != 5 {
		t.Fatalf("the corpus holds %d identical pairs, want 5", len(pairs))
	}
	reg, err := providers.Parse([]byte(`
providers:
  gh-hour: {preset: github, secret_env: [HL_TEST_SECRET]}
  gh-ms: {preset: github, secret_env: [HL_TEST_SECRET], replay_window: 1ms}
  gh-off: {preset: github, secret_env: [HL_TEST_SECRET], replay_window: "0"}
`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		provider string
		gap      time.Duration
		replay   bool // the second is suppressed
	}{
		{"gh-hour", 0, true},
		{"gh-hour", 59 * time.Minute, true},
		{"gh-hour", time.Hour, false}, // the window is over: a new event
		{"gh-ms", 500 * time.Microsecond, true},
		{"gh-ms", 2 * time.Millisecond, false},
		{"gh-off", 0, false},
	} {
		t.Run(fmt.Sprintf("%s+%s", tc.provider, tc.gap), func(t *testing.T) {
			pub := &fakePublisher{}
			now := t0
			s, _ := testServer(t, pub, func(c *Config) { c.Providers, c.Now = reg, func() time.Time { return now } })
			h := s.Handler()
			var wantRaw, wantSuppressed []string
			replayOf := map[string]string{}
			for _, pair := range pairs {
				f, g := pair[0], pair[1]
				first, second := tc.provider+":"+f.Delivery, tc.provider+":"+g.Delivery
				req := signed(t, reg, tc.provider, "application/json", f.Body, now, map[string]string{"X-GitHub-Event": f.Event})
				now = t0
				if code, a := resend(t, h, req, f.Body, map[string]string{"X-GitHub-Delivery": f.Delivery}); code != 202 || a.Status != statusAccepted || a.IdempotencyKey != first {
					t.Fatalf("%s: %d %+v, want accepted", f.ID(), code, a)
				}
				now = t0.Add(tc.gap)
				code, a := resend(t, h, req, g.Body, map[string]string{"X-GitHub-Delivery": g.Delivery})
				wantRaw = append(wantRaw, first)
				switch {
				case tc.replay && (code != 202 || a.Status != statusReplay || a.IdempotencyKey != second || a.ReplayOf != first):
					t.Fatalf("%s within the window: %d %+v, want 202 replay of %s", g.ID(), code, a, first)
				case !tc.replay && (code != 202 || a.Status != statusAccepted || a.IdempotencyKey != second):
					t.Fatalf("%s: %d %+v, want accepted", g.ID(), code, a)
				case tc.replay:
					wantSuppressed = append(wantSuppressed, second)
					replayOf[second] = first
				default:
					wantRaw = append(wantRaw, second)
				}
			}
			keys := func(recs []*kgo.Record) []string {
				var out []string
				for _, r := range recs {
					out = append(out, string(r.Key))
				}
				return out
			}
			if got := keys(pub.on("webhooks.raw")); !slices.Equal(got, wantRaw) {
				t.Errorf("raw got %v, want %v", got, wantRaw)
			}
			sup := pub.on("webhooks.outcomes")
			if got := keys(sup); !slices.Equal(got, wantSuppressed) {
				t.Errorf("suppressed outcomes for %v, want %v", got, wantSuppressed)
			}
			for _, r := range sup {
				o, err := outcome.Decode(r.Value)
				if err != nil || o.Status != outcome.StatusSuppressed || o.ReplayOf != replayOf[o.Key] || o.Provider != tc.provider {
					t.Errorf("suppressed outcome %s: %+v %v; want a replay of %s", r.Key, o, err, replayOf[o.Key])
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			want := fmt.Sprintf(`hookline_ingest_replays_suppressed_total{provider=%q} %d`, tc.provider, len(wantSuppressed))
			if got := strings.Contains(w.Body.String(), want+"\n"); got != tc.replay {
				t.Errorf("/metrics holds %q: %t, want %t", want, got, tc.replay)
			}
		})
	}
}

// TestSuppressedOutcomeUnacknowledged: a replay whose suppressed outcome
// Kafka did not acknowledge is answered 503 (its trace is not guaranteed)
// and not counted; sent again once Kafka is back, it is answered replay.
func TestSuppressedOutcomeUnacknowledged(t *testing.T) {
	pub := &fakePublisher{}
	h, reg := replayServer(t, pub, DefaultReplayCacheEntries)
	body := []byte(`{"action":"blocked","blocked_user":{"login":"x"}}`)
	req := signed(t, reg, "github", "application/json", body, time.Now(), map[string]string{"X-GitHub-Delivery": "u-1", "X-GitHub-Event": "org_block"})
	if code, a := resend(t, h, req, body, nil); code != 202 || a.Status != statusAccepted {
		t.Fatalf("first: %d %+v", code, a)
	}
	pub.mu.Lock()
	pub.err = publish.ErrDeadline
	pub.mu.Unlock()
	if code, _ := resend(t, h, req, body, map[string]string{"X-GitHub-Delivery": "u-2"}); code != http.StatusServiceUnavailable {
		t.Fatalf("replay while Kafka does not acknowledge: %d, want 503", code)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if strings.Contains(w.Body.String(), `hookline_ingest_replays_suppressed_total{provider="github"}`) {
		t.Error("a replay answered 503 is counted as suppressed")
	}
	pub.mu.Lock()
	pub.err = nil
	pub.mu.Unlock()
	if code, a := resend(t, h, req, body, map[string]string{"X-GitHub-Delivery": "u-2"}); code != 202 || a.Status != statusReplay || a.ReplayOf != "github:u-1" {
		t.Fatalf("sent again: %d %+v, want replay of github:u-1", code, a)
	}
	if n := len(pub.on("webhooks.outcomes")); n != 1 {
		t.Fatalf("%d suppressed outcomes, want 1", n)
	}
}
