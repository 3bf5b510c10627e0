package deliver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/retry"
)

// received is what a test destination got: the last request's headers and
// body.
type received struct {
	mu   sync.Mutex
	hdr  http.Header
	body []byte
}

func (r *received) last() (http.Header, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hdr, r.body
}

// mustRecorder starts a destination answering 204 that keeps the last
// request.
func mustRecorder(tb testing.TB) (string, *received) {
	tb.Helper()
	rec := &received{}
	srv := mustServer(tb, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.hdr, rec.body = r.Header, b
		rec.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return srv.URL, rec
}

// mustDecode decodes a whsec_ secret's base64, as a caller of NewHTTP does.
func mustDecode(tb testing.TB, whsec string) []byte {
	tb.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whsec, "whsec_"))
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// TestSignSpecVector signs the Standard Webhooks test vector and checks the
// published signature. The spec (spec/standard-webhooks.md) shows a
// signature without its secret; the vector with its secret is the one every
// reference library tests against, in github.com/standard-webhooks/
// standard-webhooks: libraries/python/tests/test_webhooks.py
// (test_sign_function) and libraries/go/webhook_test.go (TestWebhookSign).
func TestSignSpecVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		msgID  = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = 1614265330
		body   = `{"test": 2432232314}`
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	url, rec := mustRecorder(t)
	clock := &fakeClock{t: time.Unix(ts, 0)}
	key := mustDecode(t, secret)
	h := mustHTTP(t, HTTPOptions{URL: url, Now: clock.Now, SigningSecrets: [][]byte{key}})
	key[0] ^= 0xff // NewHTTP keeps a copy

	d := testDelivery()
	d.Key, d.Body = msgID, []byte(body)
	if err := h.Handle(t.Context(), d); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	hdr, _ := rec.last()
	for name, want := range map[string]string{
		HeaderWebhookID:        msgID,
		HeaderWebhookTimestamp: strconv.Itoa(ts),
		HeaderWebhookSignature: want,
	} {
		if got := hdr[name]; !slices.Equal(got, []string{want}) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// hmacV1 is an independent computation of one v1 signature.
func hmacV1(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, ts)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestSignEachAttempt: every secret signs, in order; each attempt is signed
// at its own time.
func TestSignEachAttempt(t *testing.T) {
	url, rec := mustRecorder(t)
	clock := newFakeClock()
	keys := [][]byte{[]byte("current-key-0123456789abcdef"), []byte("old-key-0123456789abcdef")}
	h := mustHTTP(t, HTTPOptions{URL: url, Now: clock.Now, SigningSecrets: keys})
	d := testDelivery()
	for attempt := 1; attempt <= 2; attempt++ {
		d.Attempt = attempt
		if err := h.Handle(t.Context(), d); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		hdr, body := rec.last()
		ts := strconv.FormatInt(clock.Now().Unix(), 10)
		want := hmacV1(keys[0], d.Key, ts, body) + " " + hmacV1(keys[1], d.Key, ts, body)
		if got := hdr.Get(HeaderWebhookTimestamp); got != ts {
			t.Errorf("attempt %d: timestamp %q, want %q", attempt, got, ts)
		}
		if got := hdr.Get(HeaderWebhookSignature); got != want {
			t.Errorf("attempt %d: signature\n got %q\nwant %q", attempt, got, want)
		}
		clock.Advance(90 * time.Second)
	}
}

// TestSignConcurrent: calls signed at once with different keys and bodies
// each carry their own signature (the pooled state is not shared).
func TestSignConcurrent(t *testing.T) {
	keys := [][]byte{[]byte("k1-0123456789abcdef0123"), []byte("k2-0123456789abcdef0123")}
	var bad atomic.Int32
	srv := mustServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get(HeaderWebhookID), r.Header.Get(HeaderWebhookTimestamp)
		if r.Header.Get(HeaderWebhookSignature) != hmacV1(keys[0], id, ts, b)+" "+hmacV1(keys[1], id, ts, b) {
			bad.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, SigningSecrets: keys})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				d := testDelivery()
				d.Key = fmt.Sprintf("stripe:evt_%d_%d", g, i)
				d.Body = bytes.Repeat([]byte{byte('a' + g)}, 100*i)
				if err := h.Handle(t.Context(), d); err != nil {
					t.Errorf("Handle: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Errorf("%d of 160 calls had a wrong signature", n)
	}
}

// TestSignReplacesForwarded: a Standard Webhooks provider's own webhook-*
// headers are forwarded as they are without signing, and replaced (one
// value each) with it.
func TestSignReplacesForwarded(t *testing.T) {
	forwarded := []kgo.RecordHeader{
		{Key: "webhook-id", Value: []byte("msg_provider")},
		{Key: "webhook-timestamp", Value: []byte("1614265330")},
		{Key: "webhook-signature", Value: []byte("v1,provider-signature=")},
		{Key: "Webhook-Signature", Value: []byte("v1,second=")},
	}
	key := []byte("route-key-0123456789abcdef")
	tests := []struct {
		name string
		keys [][]byte
		want func(body []byte, ts string) map[string][]string
	}{
		{"unsigned", nil, func([]byte, string) map[string][]string {
			return map[string][]string{
				HeaderWebhookID:        {"msg_provider"},
				HeaderWebhookTimestamp: {"1614265330"},
				HeaderWebhookSignature: {"v1,provider-signature=", "v1,second="},
			}
		}},
		{"signed", [][]byte{key}, func(body []byte, ts string) map[string][]string {
			return map[string][]string{
				HeaderWebhookID:        {"stripe:evt_1"},
				HeaderWebhookTimestamp: {ts},
				HeaderWebhookSignature: {hmacV1(key, "stripe:evt_1", ts, body)},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, rec := mustRecorder(t)
			clock := newFakeClock()
			h := mustHTTP(t, HTTPOptions{URL: url, Now: clock.Now, SigningSecrets: tt.keys})
			d := testDelivery()
			d.Headers = append(d.Headers, forwarded...)
			if err := h.Handle(t.Context(), d); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			hdr, body := rec.last()
			for name, want := range tt.want(body, strconv.FormatInt(clock.Now().Unix(), 10)) {
				if got := hdr[name]; !slices.Equal(got, want) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if got := hdr.Get("Stripe-Signature"); got != "t=1,v1=abc" {
				t.Errorf("Stripe-Signature = %q, want it forwarded", got)
			}
		})
	}
}

func TestSignNoKeyIsPermanent(t *testing.T) {
	var calls atomic.Int32
	srv := mustServer(t, func(http.ResponseWriter, *http.Request) { calls.Add(1) })
	h := mustHTTP(t, HTTPOptions{URL: srv.URL, SigningSecrets: [][]byte{[]byte("k")}})
	d := testDelivery()
	d.Key = ""
	err := h.Handle(t.Context(), d)
	if err == nil || retry.Classify(err).Retryable || !strings.Contains(err.Error(), HeaderWebhookID) {
		t.Errorf("Handle = %v, want a permanent error naming %s", err, HeaderWebhookID)
	}
	if calls.Load() != 0 {
		t.Error("the destination was called")
	}
}

// verifyScript verifies, with the Standard Webhooks reference library, the
// request on stdin ({"body": base64, "headers": {...}, "secrets": [...]})
// with each secret in turn, one line each: "ok" or "fail: <why>".
const verifyScript = `
import base64, json, sys
import standardwebhooks
req = json.load(sys.stdin)
body = base64.b64decode(req["body"])
for secret in req["secrets"]:
    try:
        standardwebhooks.Webhook(secret).verify(body, req["headers"])
        print("ok")
    except standardwebhooks.WebhookVerificationError as e:
        print("fail:", e)
`

// TestSignReferenceLibrary checks that the Standard Webhooks reference
// Python library (PyPI standardwebhooks, pinned in .ci/run) verifies what a
// destination receives, with either of two secrets, and refuses it with a
// third.
func TestSignReferenceLibrary(t *testing.T) {
	python := referencePython(t)
	secrets := []string{
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("current-secret-0123456789abcdef")),
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("previous-secret-0123456789abcd")),
	}
	wrong := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another-secret-0123456789abcde"))
	url, rec := mustRecorder(t)
	h := mustHTTP(t, HTTPOptions{URL: url, SigningSecrets: [][]byte{mustDecode(t, secrets[0]), mustDecode(t, secrets[1])}})
	d := testDelivery()
	d.Body = []byte(`{"id":"evt_1","type":"invoice.paid","data":{"amount":4200,"note":"é ✓"}}`)
	if err := h.Handle(t.Context(), d); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	hdr, body := rec.last()
	flat := map[string]string{}
	for name, values := range hdr {
		flat[name] = strings.Join(values, ", ")
	}
	in, err := json.Marshal(map[string]any{"body": body, "headers": flat, "secrets": append(secrets, wrong)})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), python, "-c", verifyScript)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", python, err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != 3 || got[0] != "ok" || got[1] != "ok" || !strings.HasPrefix(got[2], "fail:") {
		t.Errorf("standardwebhooks verify with the current, the previous and a wrong secret:\n%s\nwant ok, ok, fail", out)
	}
}

// referencePython is the repository's .venv/bin/python with the
// standardwebhooks module, as .ci/run installs it. Where either is missing
// the test skips, and fails under CI=true.
func referencePython(t *testing.T) string {
	t.Helper()
	const install = "python3 -m venv .venv && .venv/bin/pip install standardwebhooks==<version pinned in .ci/run>, from the repository root, as .ci/run does"
	missing := func(what string) {
		msg := what + " (" + install + "): signatures are not checked against the Standard Webhooks reference library"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	python := filepath.Join(dir, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		missing(python + " is missing")
	}
	if out, err := exec.CommandContext(t.Context(), python, "-c", "import standardwebhooks").CombinedOutput(); err != nil {
		out = bytes.TrimSpace(out)
		out = out[bytes.LastIndexByte(out, '\n')+1:] // the traceback's last line
		missing(fmt.Sprintf("%s cannot import standardwebhooks: %v: %s", python, err, out))
	}
	return python
}
