package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
	"unicode"
	"unsafe"

	"github.com/hookline/hookline/pkg/providers/keys"
	"github.com/hookline/hookline/pkg/providers/signature"
)

// fuzzSigHeaders are every signature header of testYAML's providers; the
// fuzzer's sig value goes into all of them at once.
var fuzzSigHeaders = []string{
	"Stripe-Signature", "X-Hub-Signature-256", "X-Shopify-Hmac-Sha256", "X-Slack-Signature",
	"Webhook-Signature", "X-Cal-Signature-256", "X-Acme-Signature",
}

// fuzzVerifyHeaders spreads the fuzzer's values over the headers the
// schemes read. Values go into the map as they are, so control characters
// and empty strings reach the parsers.
func fuzzVerifyHeaders(sig, ts, id string, svix bool) http.Header {
	h := http.Header{}
	for _, name := range fuzzSigHeaders {
		h[name] = []string{sig}
	}
	h["X-Slack-Request-Timestamp"] = []string{ts}
	prefix := "Webhook-"
	if svix {
		prefix = "Svix-"
		h["Svix-Signature"] = []string{sig}
		delete(h, "Webhook-Signature")
	}
	h[prefix+"Id"] = []string{id}
	h[prefix+"Timestamp"] = []string{ts}
	return h
}

// FuzzVerify: Verify over arbitrary signature headers and bodies, for every
// preset, never panics, and refuses only with a *signature.Error of a known
// reason.
func FuzzVerify(f *testing.F) {
	r := testRegistry(f)
	body := []byte(`{"id":"evt_1","type":"x"}`)
	for _, sp := range signedPresets {
		h := http.Header{}
		if err := mustGet(f, r, sp.provider).Sign(body, testNow, h); err != nil {
			f.Fatal(err)
		}
		ts := h.Get("Webhook-Timestamp") + h.Get("X-Slack-Request-Timestamp")
		f.Add(h.Get(sp.sigHeader), ts, h.Get("Webhook-Id"), body, testNow.Unix(), false)
		f.Add(h.Get(sp.sigHeader), ts, h.Get("Webhook-Id"), body, testNow.Unix(), true)
	}
	for _, sig := range []string{
		"", ",", "=", "t=", "t=1,v1=", "t=1,v1=zz,v1=00", "t=99999999999999999999,v1=00", "v0=", "sha256=",
		"v1,", "v1, v1,@@ v2,x", "v1,====", "\x00", "t=-9223372036854775808,v1=ab",
	} {
		f.Add(sig, "-1", "msg_1", []byte{}, int64(0), false)
	}
	f.Add("t=1614265330,v1=00", "1614265330", "", []byte("x"), int64(-1<<63), false)
	f.Add("v0=00", "9223372036854775807", "id", []byte("x"), int64(1<<62), false)

	names := r.Names()
	f.Fuzz(func(t *testing.T, sig, ts, id string, body []byte, nowUnix int64, svix bool) {
		h := fuzzVerifyHeaders(sig, ts, id, svix)
		now := time.Unix(nowUnix, 0)
		for _, name := range names {
			err := mustGet(t, r, name).Verify(h, body, now)
			if err == nil {
				continue
			}
			var se *signature.Error
			if !errors.As(err, &se) {
				t.Fatalf("%s: Verify error %T %v, want *signature.Error", name, err, err)
			}
			switch se.Reason {
			case signature.ReasonMissing, signature.ReasonMalformed, signature.ReasonMismatch, signature.ReasonStale:
			default:
				t.Fatalf("%s: unknown reason %q", name, se.Reason)
			}
		}
	})
}

// FuzzEvents: Events over arbitrary bodies and id headers, for every preset,
// never panics; it refuses only with a *MalformedError, and every key it
// gives obeys the key rules. A batch's bodies are valid JSON lying inside the
// request body.
func FuzzEvents(f *testing.F) {
	r := testRegistry(f)
	for _, body := range []string{
		stripeDotnetFixture, goCardlessFixture, slackDocBody,
		`{"id":"evt_1","type":"charge.succeeded"}`,
		`{"events":[{"id":"EV1","resource_type":"payments","action":"paid"},{"id":"EV2"},{"id":"EV3"}]}`,
		`{"events":[ {"id":"EV1"} , 1, "x", null ]}`,
		`{"events":[]}`, `{"events":{}}`, `{"meta":1,"events":[{"id":"a"}],"x":[[[]]]}`,
		`{"type":"url_verification","challenge":"abc"}`,
		`{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`,
		`{"triggerEvent":"BOOKING_RESCHEDULED","payload":{"uid":"u1","rescheduleUid":"u0"}}`,
		`{"triggerEvent":"PING","payload":{"oooEntry":{"uuid":"o1"}}}`,
		`{"event":"call_ended","call":{"call_id":"c:1%","end_timestamp":1700000060000}}`,
		`{"event":"call_inbound","call_inbound":{"from_number":"+1"}}`, `{"event":"call_started","call_id":null}`,
		`{"type":"order.paid","data":{"id":"ord_1"}}`, `{"data":{"id":12.5e300}}`, `{"data":{"id":"\u0000"}}`,
		`{"data":[{"id":1}]}`, `[]`, `null`, `"str"`, `12`, ``, `{`, `{"a":"\ud800"}`, "\xff\xfe",
	} {
		f.Add([]byte(body), "delivery-1", "ik-1")
	}
	f.Add([]byte(`{}`), "", "")
	f.Add([]byte(`{}`), "a\x00b", "\x7f")

	names := r.Names()
	f.Fuzz(func(t *testing.T, body []byte, id, idem string) {
		h := http.Header{}
		for _, name := range []string{"X-Github-Delivery", "X-Shopify-Webhook-Id", "Webhook-Id", "Svix-Id", "X-Acme-Delivery"} {
			h[name] = []string{id}
		}
		for _, name := range []string{"Idempotency-Key", "X-Github-Event", "X-Shopify-Topic", "X-Acme-Event"} {
			h[name] = []string{idem}
		}
		for _, name := range names {
			p := mustGet(t, r, name)
			d, err := p.Events(h, body)
			if err != nil {
				var me *MalformedError
				if !errors.As(err, &me) {
					t.Fatalf("%s: Events error %T %v, want *MalformedError", name, err, err)
				}
				continue
			}
			if d.Challenge != nil {
				if p.Preset != PresetSlack || len(d.Events) != 0 || !json.Valid(d.Challenge) {
					t.Fatalf("%s: challenge %q with %d events", name, d.Challenge, len(d.Events))
				}
				continue
			}
			if len(d.Events) == 0 {
				t.Fatalf("%s: no events and no challenge", name)
			}
			for i, ev := range d.Events {
				assertKeyRules(t, name, ev.Key)
				if p.Preset != PresetGoCardless {
					if !bytes.Equal(ev.Body, body) {
						t.Fatalf("%s: body is not the request body", name)
					}
					continue
				}
				if !json.Valid(ev.Body) || !inside(ev.Body, body) {
					t.Fatalf("%s: event %d body %q is not valid JSON inside the request body", name, i, ev.Body)
				}
			}
		}
	})
}

// assertKeyRules restates the key rules independently of keys.Check.
func assertKeyRules(t *testing.T, provider, key string) {
	t.Helper()
	if key == "" || len(key) > keys.MaxLen {
		t.Fatalf("%s: key of %d bytes", provider, len(key))
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || unicode.IsControl(r) {
			t.Fatalf("%s: key %q has a control character", provider, key)
		}
	}
}

// inside reports whether sub is a slice of whole's memory.
func inside(sub, whole []byte) bool {
	if len(sub) == 0 || len(whole) == 0 {
		return false
	}
	s, w := uintptr(unsafe.Pointer(unsafe.SliceData(sub))), uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	return s >= w && s+uintptr(len(sub)) <= w+uintptr(len(whole))
}
