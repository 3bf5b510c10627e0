package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// secrets are what internal/api/testdata/providers.yaml names.
var secrets = map[string]string{
	"HL_TEST_SECRET":          "test-secret",
	"HL_TEST_OLD_SECRET":      "old-rotated-secret",
	"HL_TEST_STANDARD_SECRET": "whsec_dGVzdC1zZWNyZXQtc3RhbmRhcmQtMDEyMzQ1Njc4OQ==",
}

const providersFile = "internal/api/testdata/providers.yaml"

// testEnv is the environment of one ingest under test: a real broker, topics
// of its own.
type testEnv struct {
	brokers []string
	prefix  string
	vars    map[string]string
	reg     *providers.Registry
}

func newEnv(tb testing.TB) *testEnv {
	tb.Helper()
	e := &testEnv{brokers: kafkatest.Brokers(tb), prefix: kafkatest.Prefix(tb)}
	e.vars = map[string]string{
		"KAFKA_BROKERS":             strings.Join(e.brokers, ","),
		"HOOKLINE_TOPIC_PREFIX":     e.prefix,
		"HOOKLINE_PARTITIONS":       "3",
		"HOOKLINE_RETRY_TIERS":      "1s",
		"HOOKLINE_INGEST_ADDR":      "127.0.0.1:0",
		"HOOKLINE_PROVIDERS":        providersFile,
		"HOOKLINE_PRODUCE_DEADLINE": "3s",
		"HOOKLINE_LOG_LEVEL":        "warn",
	}
	for k, v := range secrets {
		e.vars[k] = v
	}
	reg, err := providers.Load(providersFile, e.lookup)
	if err != nil {
		tb.Fatal(err)
	}
	e.reg = reg
	return e
}

func (e *testEnv) lookup(k string) (string, bool) { v, ok := e.vars[k]; return v, ok }

func (e *testEnv) raw() string { return e.prefix + "webhooks.raw" }

// start runs ingest in this process and returns its base URL; the test's
// cleanup stops it and checks it stopped cleanly.
func (e *testEnv) start(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, e.lookup, io.Discard, ready, false) }()
	select {
	case addr := <-ready:
		tb.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("ingest stopped with: %v", err)
			}
		})
		// Ready means Kafka has the raw topic with a leader for every
		// partition: a topic created a moment ago may not be there yet.
		e2e.WaitHTTP(tb, "http://"+addr+"/readyz", 60*time.Second)
		return "http://" + addr
	case err := <-done:
		cancel()
		tb.Fatalf("ingest did not start: %v", err)
	case <-time.After(90 * time.Second):
		cancel()
		tb.Fatal("ingest did not start within 90s")
	}
	return ""
}

// post signs body as provider and posts it.
func (e *testEnv) post(tb testing.TB, base, provider, contentType string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if p, ok := e.reg.Get(provider); ok {
		if err := p.Sign(body, time.Now(), req.Header); err != nil {
			tb.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

type answer struct {
	Status          string   `json:"status"`
	IdempotencyKey  string   `json:"idempotency_key"`
	IdempotencyKeys []string `json:"idempotency_keys"`
	ReplayOf        string   `json:"replay_of"`
	RequestID       string   `json:"request_id"`
	Error           string   `json:"error"`
}

func TestRoundTripEveryPreset(t *testing.T) {
	e := newEnv(t)
	base := e.start(t)
	cases := []struct {
		provider, contentType string
		body                  string
		hdr                   map[string]string
		key, eventType        string
		forwarded             []string // http.* headers the record must carry
	}{
		{"stripe", "application/json", `{"id":"evt_rt1","object":"event","type":"invoice.paid"}`, nil,
			"stripe:evt_rt1", "invoice.paid", []string{"stripe-signature"}},
		{"github", "application/json", `{"action":"opened","number":7}`,
			map[string]string{"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event": "issues"},
			"github:72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", []string{"x-hub-signature-256", "x-github-delivery", "x-github-event"}},
		{"shopify", "application/json", `{"id":820982911946154508,"email":"jon@example.com"}`,
			map[string]string{"X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "X-Shopify-Topic": "orders/create"},
			"shopify:b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create", []string{"x-shopify-hmac-sha256", "x-shopify-webhook-id", "x-shopify-topic"}},
		{"standard", "application/json", `{"type":"invoice.created","data":{"id":1}}`,
			map[string]string{"webhook-id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"},
			"standard:msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "invoice.created", []string{"webhook-id", "webhook-timestamp", "webhook-signature"}},
		{"slack", "application/json", `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`, nil,
			"slack:Ev08MFMKH6", "app_mention", []string{"x-slack-signature", "x-slack-request-timestamp"}},
		{"calcom", "application/json", `{"triggerEvent":"BOOKING_RESCHEDULED","payload":{"uid":"bk_1","rescheduleUid":"bk_0"}}`, nil,
			"calcom:BOOKING_RESCHEDULED:bk_1:bk_0", "BOOKING_RESCHEDULED", []string{"x-cal-signature-256"}},
		{"acme", "application/json", `{"type":"thing.made","id":9}`, map[string]string{"X-Acme-Delivery": "dlv-9"},
			"acme:dlv-9", "thing.made", []string{"x-acme-signature", "x-acme-delivery"}},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			hdr := map[string]string{"X-Request-Id": "rt-" + tc.provider, "Authorization": "Bearer must-not-travel", "Cookie": "c=1"}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			before := time.Now().UTC().Truncate(time.Millisecond)
			resp, b := e.post(t, base, tc.provider, tc.contentType, []byte(tc.body), hdr)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var a answer
			if err := json.Unmarshal(b, &a); err != nil || a.Status != "accepted" || a.IdempotencyKey != tc.key || a.RequestID != "rt-"+tc.provider {
				t.Fatalf("answer %s (err %v), want accepted with key %s", b, err, tc.key)
			}
			r := findRecord(t, e, tc.key)
			if !bytes.Equal(r.Value, []byte(tc.body)) {
				t.Fatalf("value %q, want the body byte for byte", r.Value)
			}
			want := map[string]string{
				headers.Provider: tc.provider, headers.EventType: tc.eventType, headers.IdempotencyKey: tc.key,
				headers.RequestID: "rt-" + tc.provider, headers.ContentType: tc.contentType,
				headers.Origin: headers.OriginIngest, headers.Attempt: "1",
			}
			for k, v := range want {
				if got, ok := headers.Get(r, k); !ok || got != v {
					t.Errorf("header %s = %q (present %t), want %q", k, got, ok, v)
				}
			}
			at, err := headers.GetTime(r, headers.ReceivedAt)
			if err != nil || at.Before(before) || at.After(time.Now()) {
				t.Errorf("received-at %v (%v), want within the request", at, err)
			}
			if v := headers.Value(r, headers.ReceivedAt); !strings.HasSuffix(v, "Z") || len(v) != len("2006-01-02T15:04:05.000Z") {
				t.Errorf("received-at %q is not RFC 3339 UTC with milliseconds", v)
			}
			for _, f := range tc.forwarded {
				if _, ok := headers.Get(r, headers.HTTPName(f)); !ok {
					t.Errorf("provider header %s not on the record", f)
				}
			}
			for _, h := range r.Headers {
				if h.Key == "http.authorization" || h.Key == "http.cookie" {
					t.Errorf("%s travelled onto the record", h.Key)
				}
			}
		})
	}
}

// findRecord reads raw from the start until the record keyed key appears.
func findRecord(tb testing.TB, e *testEnv, key string) *kgo.Record {
	tb.Helper()
	cl := kafkatest.Client(tb, e.brokers, kgo.ConsumeTopics(e.raw()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("record %s not in %s within 20s", key, e.raw())
		}
		for _, r := range fs.Records() {
			if string(r.Key) == key {
				return r
			}
		}
	}
}

func TestGoCardlessBatch(t *testing.T) {
	e := newEnv(t)
	base := e.start(t)
	events := []string{
		`{"id":"EV001","resource_type":"payments","action":"confirmed","links":{"payment":"PM1"}}`,
		`{"id":"EV002","resource_type":"mandates","action":"cancelled"}`,
		`{"id":"EV003", "resource_type":"payouts","action":"paid"}`,
	}
	body := `{"events":[` + strings.Join(events, ", ") + `]}`
	resp, b := e.post(t, base, "gocardless", "application/json", []byte(body), nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	want := []string{"gocardless:EV001", "gocardless:EV002", "gocardless:EV003"}
	if fmt.Sprint(a.IdempotencyKeys) != fmt.Sprint(want) {
		t.Fatalf("answer keys %v, want %v", a.IdempotencyKeys, want)
	}
	recs := kafkatest.ReadN(t, e.brokers, e.raw(), 3, 20*time.Second)
	byKey := map[string]*kgo.Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = r
	}
	for i, k := range want {
		r, ok := byKey[k]
		if !ok {
			t.Fatalf("no record for %s", k)
		}
		if string(r.Value) != events[i] {
			t.Errorf("%s value %q, want the event's exact bytes %q", k, r.Value, events[i])
		}
	}
	if got := headers.Value(byKey["gocardless:EV002"], headers.EventType); got != "mandates.cancelled" {
		t.Errorf("event type %q, want mandates.cancelled", got)
	}

	// A batch of one is still a batch: idempotency_keys, no idempotency_key.
	resp, b = e.post(t, base, "gocardless", "application/json", []byte(`{"events":[{"id":"EV004","action":"paid"}]}`), nil)
	a = answer{}
	if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusAccepted || a.IdempotencyKey != "" || fmt.Sprint(a.IdempotencyKeys) != "[gocardless:EV004]" {
		t.Fatalf("batch of one: %d %s, want 202 with idempotency_keys [gocardless:EV004] only", resp.StatusCode, b)
	}
}

// TestRefusalsLeaveTopicUntouched sends one request for every refusal of
// DESIGN §4 to the real service and checks the raw topic's end offsets did
// not move.
func TestRefusalsLeaveTopicUntouched(t *testing.T) {
	e := newEnv(t)
	base := e.start(t)
	stripeBody := []byte(`{"id":"evt_refuse","type":"x"}`)
	before := kafkatest.EndOffsets(t, e.brokers, e.raw())
	send := func(method, path, ct string, body []byte, sign string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if p, ok := e.reg.Get(sign); ok {
			_ = p.Sign(body, time.Now(), req.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	big := bytes.Repeat([]byte("a"), 1<<20+1)
	cases := []struct {
		name   string
		resp   func() *http.Response
		status int
	}{
		{"400 malformed", func() *http.Response {
			return send("POST", "/webhooks/stripe", "application/json", []byte(`{"id":`), "stripe", nil)
		}, 400},
		{"401 bad signature", func() *http.Response {
			return send("POST", "/webhooks/stripe", "application/json", stripeBody, "", map[string]string{"Stripe-Signature": "t=1,v1=00"})
		}, 401},
		{"404 unknown provider", func() *http.Response {
			return send("POST", "/webhooks/nobody", "application/json", stripeBody, "", nil)
		}, 404},
		{"413 over the limit", func() *http.Response {
			return send("POST", "/webhooks/acme", "application/json", big, "acme", map[string]string{"X-Acme-Delivery": "big"})
		}, 413},
		{"415 content type", func() *http.Response {
			return send("POST", "/webhooks/stripe", "text/plain", stripeBody, "stripe", nil)
		}, 415},
		{"429 rate limited", func() *http.Response {
			var last *http.Response
			for i := range 4 { // burst 2: the third and fourth are refused
				last = send("POST", "/webhooks/limited", "application/json", fmt.Appendf(nil, `{"n":%d}`, i), "limited", nil)
			}
			return last
		}, 429},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.resp().StatusCode; got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
		})
	}
	// Only the two signed deliveries within the rate-limited provider's
	// burst were accepted (its limit is charged after the signature, so
	// a 429 takes signed requests): nothing refused reached the topic.
	if after := kafkatest.EndOffsets(t, e.brokers, e.raw()); after != before+2 {
		t.Fatalf("raw end offsets moved from %d to %d, want +2 (the two accepted): a refused request was produced", before, after)
	}
}

func TestKcatReadsIngestRecord(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	e := newEnv(t)
	base := e.start(t)
	body := `{"id":"evt_kcat","type":"customer.created"}`
	if resp, b := e.post(t, base, "stripe", "application/json", []byte(body), nil); resp.StatusCode != 202 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	// kcat -e stops at the end it sees; a topic created a moment ago may not
	// be in its first metadata yet, so ask again for a few seconds.
	var got string
	for try := 0; try < 20 && !strings.Contains(got, "key=stripe:evt_kcat"); try++ {
		out, err := exec.Command(kcat, "-b", strings.Join(e.brokers, ","), "-C", "-t", e.raw(), "-o", "beginning",
			"-c", "1", "-e", "-q", "-f", "key=%k value=%s headers=%h\n").CombinedOutput()
		got = string(out)
		if err != nil || !strings.Contains(got, "key=stripe:evt_kcat") {
			t.Logf("kcat try %d: %v: %s", try+1, err, got)
			time.Sleep(500 * time.Millisecond)
		}
	}
	for _, want := range []string{"key=stripe:evt_kcat", "value=" + body, "hookline.provider=stripe", "hookline.origin=ingest", "hookline.attempt=1", "http.stripe-signature=t="} {
		if !strings.Contains(got, want) {
			t.Errorf("kcat output lacks %q:\n%s", want, got)
		}
	}
}
