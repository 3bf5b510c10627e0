package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/schemas"
)

// garbage is one bad request: what is sent and the documented refusal.
type garbage struct {
	name     string
	method   string
	path     string
	ct       string
	body     []byte
	sign     string                // provider whose preset signs the body ("" = unsigned)
	signWith func(b []byte) []byte // sign these bytes instead of the body (a replayed or mismatched signature)
	hdr      map[string]string
	status   int
	code     string
}

// TestBadInputCorpus sends more than 50 kinds of bad request to the real
// service: every one must get its documented 4xx with a JSON error body
// that conforms to schemas/ingest.openapi.yaml, nothing may reach
// webhooks.raw, and the service must still answer after.
func TestBadInputCorpus(t *testing.T) {
	e := newEnv(t)
	e.vars["HOOKLINE_MAX_BODY_BYTES"] = "4096"
	base := e.start(t)
	before := kafkatest.EndOffsets(t, e.brokers, e.raw())
	valid := []byte(`{"id":"evt_garbage","type":"x"}`)
	over := []byte(`{"id":"evt_big","pad":"` + strings.Repeat("a", 4096) + `"}`)
	var cases []garbage
	add := func(g garbage) {
		if g.method == "" {
			g.method = http.MethodPost
		}
		if g.path == "" {
			g.path = "/webhooks/stripe"
		}
		if g.ct == "" && g.method == http.MethodPost {
			g.ct = "application/json"
		}
		cases = append(cases, g)
	}
	for i, b := range []string{`{`, `{"id":`, `{"id":"evt_t`, `[`, `{"id":"x",}`, `{"id":"x"}}`, `not json`, `{'id':'x'}`, `""`, `null`, `[]`, `{"id":null}`, `{"id":{"x":1}}`, `{"id":""}`, `{"id":"` + strings.Repeat("k", 600) + `"}`, "{\"id\":\"evt\\u0000x\"}", "{\"id\":\"evt\u007fx\"}", "{\"id\":\"\xff\xfe\"}", ``} {
		add(garbage{name: fmt.Sprintf("malformed body %d", i), body: []byte(b), sign: "stripe", status: 400, code: "malformed_body"})
	}
	for _, ct := range []string{"text/plain", "application/xml", "text/html", "application/octet-stream", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "json", ";;;", "application/jsonx"} {
		add(garbage{name: "content type " + ct, ct: ct, body: valid, sign: "stripe", status: 415, code: "unsupported_content_type"})
	}
	add(garbage{name: "no content type", ct: " ", body: valid, sign: "stripe", status: 415, code: "unsupported_content_type"})
	add(garbage{name: "one byte over the limit", path: "/webhooks/acme", body: over[:4097], sign: "acme", hdr: map[string]string{"X-Acme-Delivery": "big"}, status: 413, code: "body_too_large"})
	add(garbage{name: "far over the limit", path: "/webhooks/acme", body: bytes.Repeat([]byte("b"), 1<<20), sign: "acme", hdr: map[string]string{"X-Acme-Delivery": "big"}, status: 413, code: "body_too_large"})
	add(garbage{name: "missing signature", body: valid, status: 401, code: "bad_signature"})
	add(garbage{name: "empty signature", body: valid, hdr: map[string]string{"Stripe-Signature": ""}, status: 401, code: "bad_signature"})
	for i, sig := range []string{"garbage", "t=", "v1=", "t=abc,v1=00", "t=1,v1=zz", "t=1,v1=" + strings.Repeat("0", 64), "t=99999999999999999999,v1=00", strings.Repeat("t=1,", 2000)} {
		add(garbage{name: fmt.Sprintf("malformed stripe signature %d", i), body: valid, hdr: map[string]string{"Stripe-Signature": sig}, status: 401, code: "bad_signature"})
	}
	add(garbage{name: "signature of another body", body: valid, sign: "stripe", signWith: func([]byte) []byte { return []byte(`{"id":"evt_other"}`) }, status: 401, code: "bad_signature"})
	add(garbage{name: "github wrong secret", path: "/webhooks/github", body: valid, hdr: map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("ab", 32), "X-GitHub-Delivery": "d", "X-GitHub-Event": "push"}, status: 401, code: "bad_signature"})
	add(garbage{name: "github sha1 header only", path: "/webhooks/github", body: valid, hdr: map[string]string{"X-Hub-Signature": "sha1=" + strings.Repeat("ab", 20), "X-GitHub-Delivery": "d"}, status: 401, code: "bad_signature"})
	add(garbage{name: "standard stale timestamp", path: "/webhooks/standard", body: valid, hdr: map[string]string{"webhook-id": "msg_1", "webhook-timestamp": "1000000000", "webhook-signature": "v1,AAAA"}, status: 401, code: "bad_signature"})
	add(garbage{name: "slack replayed signature", path: "/webhooks/slack", body: valid, hdr: map[string]string{"X-Slack-Request-Timestamp": "1531420618", "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}, status: 401, code: "bad_signature"})
	add(garbage{name: "gocardless without events", path: "/webhooks/gocardless", body: []byte(`{"events":[]}`), sign: "gocardless", status: 400, code: "malformed_body"})
	add(garbage{name: "gocardless event without id", path: "/webhooks/gocardless", body: []byte(`{"events":[{"action":"x"}]}`), sign: "gocardless", status: 400, code: "malformed_body"})
	add(garbage{name: "calcom without uid", path: "/webhooks/calcom", body: []byte(`{"payload":{}}`), sign: "calcom", status: 400, code: "malformed_body"})
	for _, p := range []string{"/webhooks/unknown", "/webhooks/STRIPE", "/webhooks/%00"} {
		add(garbage{name: "provider path " + p, path: p, body: valid, status: 404, code: "unknown_provider"})
	}
	for _, p := range []string{"/webhooks/", "/webhooks", "/webhooks/stripe/extra", "/../webhooks/stripe/x", "/", "/webhooks/stripe%2F..", "/webhooks/..%2Fstripe"} {
		add(garbage{name: "route " + p, path: p, body: valid, status: 404, code: "not_found"})
	}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		add(garbage{name: "method " + m, method: m, body: valid, status: 405, code: "method_not_allowed"})
	}
	add(garbage{name: "repeated signature headers", body: valid, hdr: map[string]string{"Stripe-Signature": "t=1,v1=00"}, status: 401, code: "bad_signature"})

	slow := make(chan error, 1)
	go func() { slow <- slowBody(base) }() // takes the server's ReadTimeout: run it alongside
	failures := 0
	for _, g := range cases {
		status, code, err := sendGarbage(e, base, g)
		if err != nil || status != g.status || code != g.code {
			failures++
			t.Errorf("%s: got %d %q (%v), want %d %q", g.name, status, code, err, g.status, g.code)
		}
	}
	// Headers the server must refuse before the handler: too large.
	huge := garbage{name: "huge header", body: valid, sign: "stripe", hdr: map[string]string{"X-Junk": strings.Repeat("j", 100<<10)}}
	if status, _, _ := sendGarbage(e, base, huge); status != http.StatusRequestHeaderFieldsTooLarge {
		failures++
		t.Errorf("huge header: got %d, want 431", status)
	}
	cases = append(cases, huge)
	if err := <-slow; err != nil {
		failures++
		t.Errorf("slow-loris body: %v", err)
	}
	after := kafkatest.EndOffsets(t, e.brokers, e.raw())
	if after != before {
		failures++
		t.Errorf("raw end offsets moved from %d to %d: a bad request was produced", before, after)
	}
	// Still alive and still accepting.
	doc, err := schemas.LoadAPI(schemas.IngestAPI)
	if err != nil {
		t.Fatal(err)
	}
	if resp, b := e.post(t, base, "stripe", "application/json", valid, nil); resp.StatusCode != 202 {
		failures++
		t.Errorf("a good request after the corpus: %d %s", resp.StatusCode, b)
	} else if _, err := doc.Check("POST", "/webhooks/stripe", resp.StatusCode, resp.Header, b); err != nil {
		failures++
		t.Errorf("a good request after the corpus: %v", err)
	}
	fmt.Printf("bad-input corpus: %d cases, %d failures\n", len(cases)+1, failures)
}

// sendGarbage sends g and returns the status and error code of the answer;
// an answer that does not conform to the OpenAPI document is an error.
func sendGarbage(e *testEnv, base string, g garbage) (int, string, error) {
	req, err := http.NewRequest(g.method, base+g.path, bytes.NewReader(g.body))
	if err != nil {
		return 0, "", err
	}
	if strings.Contains(g.path, "%") {
		req.URL.RawPath = g.path
		req.URL.Opaque = g.path
	}
	if g.ct != "" {
		req.Header["Content-Type"] = []string{g.ct}
	}
	if g.sign != "" {
		p, _ := e.reg.Get(g.sign)
		signed := g.body
		if g.signWith != nil {
			signed = g.signWith(g.body)
		}
		if err := p.Sign(signed, time.Now(), req.Header); err != nil {
			return 0, "", err
		}
	}
	for k, v := range g.hdr {
		req.Header[http.CanonicalHeaderKey(k)] = append(req.Header[http.CanonicalHeaderKey(k)], v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
		return resp.StatusCode, "", nil // net/http's own answer, before any route
	}
	// The path the router saw: unescaped, after any redirect.
	path := resp.Request.URL.Path
	if o := resp.Request.URL.Opaque; o != "" {
		path, _ = url.PathUnescape(o)
	}
	doc, err := schemas.LoadAPI(schemas.IngestAPI)
	if err != nil {
		return 0, "", err
	}
	if _, err := doc.Check(g.method, path, resp.StatusCode, resp.Header, b); err != nil {
		return resp.StatusCode, "", err
	}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &eb); err != nil || eb.Message == "" {
			return resp.StatusCode, "", fmt.Errorf("error body is not the JSON error shape: %q", b)
		}
	}
	return resp.StatusCode, eb.Error, nil
}

// slowBody sends headers promising a body and then dribbles it: the server
// must not wait for ever (ReadTimeout) and must produce nothing.
func slowBody(base string) error {
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	_ = conn.SetReadDeadline(time.Now().Add(45 * time.Second))
	start := time.Now()
	buf := make([]byte, 512)
	_, err = conn.Read(buf) // the server gives up: an answer or a closed connection
	if time.Since(start) > 40*time.Second {
		return fmt.Errorf("server still waiting after %s", time.Since(start))
	}
	_ = err
	return nil
}
