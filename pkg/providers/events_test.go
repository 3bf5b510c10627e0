package providers

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/hookline/hookline/pkg/providers/keys"
)

type keyType struct{ Key, Type string }

func TestEvents(t *testing.T) {
	r := testRegistry(t)
	bigID := strings.Repeat("a", keys.MaxLen-len("github:"))
	cases := []struct {
		name     string
		provider string
		headers  map[string]string
		body     string
		want     []keyType // nil with wantErr
		wantErr  bool
		says     string // with wantErr: part of the message, if set
	}{
		{name: "stripe", provider: "stripe",
			body: `{"id":"evt_1Nx","object":"event","type":"charge.succeeded"}`,
			want: []keyType{{"stripe:evt_1Nx", "charge.succeeded"}}},
		{name: "stripe without type", provider: "stripe", body: `{"id":"evt_1"}`,
			want: []keyType{{"stripe:evt_1", ""}}},
		{name: "stripe id matched exactly, not case-folded", provider: "stripe", body: `{"ID":"evt_x"}`, wantErr: true},
		{name: "stripe without id", provider: "stripe", body: `{"type":"x"}`, wantErr: true},
		{name: "stripe id not a string", provider: "stripe", body: `{"id":{"a":1}}`, wantErr: true},
		{name: "stripe malformed JSON", provider: "stripe", body: `{"id":"evt_1"`, wantErr: true},
		{name: "stripe array body", provider: "stripe", body: `[{"id":"evt_1"}]`, wantErr: true},
		{name: "stripe null body", provider: "stripe", body: `null`, wantErr: true},

		{name: "github", provider: "github",
			headers: map[string]string{"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event": "push"},
			body:    "payload=%7B%7D",
			want:    []keyType{{"github:72d3162e-cc78-11e3-81ab-4c9367dc0958", "push"}}},
		{name: "github without delivery", provider: "github", headers: map[string]string{"X-GitHub-Event": "push"}, body: "{}", wantErr: true},
		{name: "github key of exactly 512 bytes", provider: "github",
			headers: map[string]string{"X-GitHub-Delivery": bigID}, body: "{}",
			want: []keyType{{"github:" + bigID, ""}}},
		{name: "github key over 512 bytes", provider: "github",
			headers: map[string]string{"X-GitHub-Delivery": bigID + "a"}, body: "{}", wantErr: true},
		{name: "github key with a control character", provider: "github",
			headers: map[string]string{"X-GitHub-Delivery": "abc\x01def"}, body: "{}", wantErr: true},
		{name: "github key with DEL", provider: "github",
			headers: map[string]string{"X-GitHub-Delivery": "abc\x7f"}, body: "{}", wantErr: true},

		{name: "shopify", provider: "shopify",
			headers: map[string]string{"X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "X-Shopify-Topic": "orders/create"},
			body:    `{"id":820982911946154508}`,
			want:    []keyType{{"shopify:b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create"}}},
		{name: "shopify without webhook id", provider: "shopify", body: `{}`, wantErr: true},

		{name: "standard with JSON type", provider: "standard",
			headers: map[string]string{"Webhook-Id": "msg_2Lh9"}, body: `{"type":"invoice.paid","data":{}}`,
			want: []keyType{{"standard:msg_2Lh9", "invoice.paid"}}},
		{name: "standard, body not JSON", provider: "standard",
			headers: map[string]string{"Webhook-Id": "msg_2Lh9"}, body: `plain text`,
			want: []keyType{{"standard:msg_2Lh9", ""}}},
		{name: "standard, svix-id", provider: "standard",
			headers: map[string]string{"Svix-Id": "msg_svix", "Svix-Signature": "v1,x"}, body: `{}`,
			want: []keyType{{"standard:msg_svix", ""}}},
		{name: "standard without id", provider: "standard", body: `{}`, wantErr: true},

		{name: "slack event_callback", provider: "slack",
			body: `{"token":"x","type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"hi"}}`,
			want: []keyType{{"slack:Ev08MFMKH6", "app_mention"}}},
		{name: "slack without event.type", provider: "slack",
			body: `{"type":"app_rate_limited","event_id":"Ev1"}`,
			want: []keyType{{"slack:Ev1", "app_rate_limited"}}},
		{name: "slack without event_id", provider: "slack", body: `{"type":"block_actions"}`,
			want: []keyType{{"slack:" + keys.BodyHash([]byte(`{"type":"block_actions"}`)), "block_actions"}}},
		{name: "slack url_verification without challenge", provider: "slack", body: `{"type":"url_verification"}`, wantErr: true},

		{name: "calcom booking", provider: "calcom",
			body: `{"triggerEvent":"BOOKING_CREATED","createdAt":"2026-03-01T12:00:00Z","payload":{"uid":"bk_1","title":"x"}}`,
			want: []keyType{{"calcom:BOOKING_CREATED:bk_1", "BOOKING_CREATED"}}},
		{name: "calcom reschedule", provider: "calcom",
			body: `{"triggerEvent":"BOOKING_RESCHEDULED","payload":{"uid":"bk_2","rescheduleUid":"bk_1"}}`,
			want: []keyType{{"calcom:BOOKING_RESCHEDULED:bk_2:bk_1", "BOOKING_RESCHEDULED"}}},
		{name: "calcom empty rescheduleUid", provider: "calcom",
			body: `{"triggerEvent":"BOOKING_CREATED","payload":{"uid":"bk_2","rescheduleUid":""}}`,
			want: []keyType{{"calcom:BOOKING_CREATED:bk_2", "BOOKING_CREATED"}}},
		{name: "calcom no-show uses bookingUid", provider: "calcom",
			body: `{"triggerEvent":"BOOKING_NO_SHOW_UPDATED","payload":{"bookingUid":"bk_3","message":"x"}}`,
			want: []keyType{{"calcom:BOOKING_NO_SHOW_UPDATED:bk_3", "BOOKING_NO_SHOW_UPDATED"}}},
		{name: "calcom ping falls back to the body hash", provider: "calcom",
			body: `{"triggerEvent":"PING","payload":{"type":"Test"}}`,
			want: []keyType{{"calcom:PING:" + keys.BodyHash([]byte(`{"triggerEvent":"PING","payload":{"type":"Test"}}`)), "PING"}}},
		{name: "calcom without triggerEvent", provider: "calcom", body: `{"payload":{"uid":"bk_1"}}`, wantErr: true},
		{name: "calcom not JSON", provider: "calcom", body: `triggerEvent=X`, wantErr: true},

		{name: "gocardless without events", provider: "gocardless", body: `{"meta":{}}`, wantErr: true},
		{name: "gocardless empty events", provider: "gocardless", body: `{"events":[]}`, wantErr: true},
		{name: "gocardless events not an array", provider: "gocardless", body: `{"events":{"id":"EV1"}}`, wantErr: true},
		{name: "gocardless event without id", provider: "gocardless", body: `{"events":[{"id":"EV1"},{"action":"paid"}]}`, wantErr: true},
		{name: "gocardless event not an object", provider: "gocardless", body: `{"events":[1]}`, wantErr: true},
		{name: "gocardless two events members", provider: "gocardless", body: `{"events":[{"id":"EV1"}],"events":[{"id":"EV2"}]}`, wantErr: true},
		{name: "gocardless data after the object", provider: "gocardless", body: `{"events":[{"id":"EV1"}]} {}`, wantErr: true},
		{name: "gocardless malformed JSON", provider: "gocardless", body: `{"events":[{"id":"EV1"}`, wantErr: true},
		{name: "gocardless type with only resource_type", provider: "gocardless", body: `{"events":[{"id":"EV1","resource_type":"payments"}]}`,
			want: []keyType{{"gocardless:EV1", "payments"}}},

		// Event types: at most 256 bytes, printable (issue 25).
		{name: "stripe type of 256 bytes", provider: "stripe", body: `{"id":"evt_1","type":"` + strings.Repeat("t", 256) + `"}`,
			want: []keyType{{"stripe:evt_1", strings.Repeat("t", 256)}}},
		{name: "stripe type of 257 bytes", provider: "stripe", body: `{"id":"evt_1","type":"` + strings.Repeat("t", 257) + `"}`,
			wantErr: true, says: "event type is 257 bytes, over the limit of 256"},
		{name: "stripe type of 655,000 bytes", provider: "stripe", body: `{"id":"evt_1","type":"` + strings.Repeat("t", 655_000) + `"}`,
			wantErr: true, says: "event type is 655000 bytes"},
		{name: "stripe type with CRLF", provider: "stripe", body: `{"id":"evt_1","type":"invoice.paid\r\nX: 1"}`,
			wantErr: true, says: "non-printable"},
		{name: "github type with ESC", provider: "github", headers: map[string]string{"X-GitHub-Delivery": "d1", "X-GitHub-Event": "push\x1b[2J"},
			body: "payload=%7B%7D", wantErr: true, says: "non-printable"},
		{name: "gocardless event type too long", provider: "gocardless",
			body:    `{"events":[{"id":"EV1","resource_type":"payments"},{"id":"EV2","resource_type":"` + strings.Repeat("p", 300) + `"}]}`,
			wantErr: true, says: "events[1]: event type is 300 bytes"},
		{name: "gocardless batch of 1000", provider: "gocardless", body: gocardlessBatch(1000), want: gocardlessKeys(1000)},
		{name: "gocardless batch of 1001", provider: "gocardless", body: gocardlessBatch(1001),
			wantErr: true, says: "events has more than 1000 elements"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustGet(t, r, tc.provider)
			h := http.Header{}
			for k, v := range tc.headers {
				h[http.CanonicalHeaderKey(k)] = []string{v} // as sent, control characters included
			}
			d, err := p.Events(h, []byte(tc.body))
			if tc.wantErr {
				var me *MalformedError
				if !errors.As(err, &me) {
					t.Fatalf("Events error = %v, want a *MalformedError", err)
				}
				if !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Events error = %v, want one saying %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatalf("Events: %v", err)
			}
			if got := keysOf(d); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events = %+v, want %+v", got, tc.want)
			}
			if tc.provider != "gocardless" && !bytes.Equal(d.Events[0].Body, []byte(tc.body)) {
				t.Fatalf("body = %q, want the request body", d.Events[0].Body)
			}
		})
	}
}

// gocardlessBatch is a GoCardless body of n events, EV0 to EV<n-1>.
func gocardlessBatch(n int) string {
	evs := make([]string, n)
	for i := range evs {
		evs[i] = fmt.Sprintf(`{"id":"EV%d"}`, i)
	}
	return `{"events":[` + strings.Join(evs, ",") + `]}`
}

func gocardlessKeys(n int) []keyType {
	out := make([]keyType, n)
	for i := range out {
		out[i] = keyType{fmt.Sprintf("gocardless:EV%d", i), ""}
	}
	return out
}

func keysOf(d Delivery) []keyType {
	var out []keyType
	for _, e := range d.Events {
		out = append(out, keyType{e.Key, e.Type})
	}
	return out
}

// TestGoCardlessBatch: three events give three records whose bodies are the
// exact bytes of each element (odd whitespace and key order kept), sliced
// from the request body rather than copied.
func TestGoCardlessBatch(t *testing.T) {
	p := mustGet(t, testRegistry(t), "gocardless")
	elems := []string{
		`{"id":"EV1","resource_type":"payments","action":"confirmed","links":{"payment":"PM1"}}`,
		"{ \"action\" : \"paid_out\",\n  \"id\":\"EV2\", \"resource_type\":\"payments\", \"details\": {\"x\": [1, 2.50, \"\\u00e9\"]} }",
		`{"resource_type":"mandates","id":"EV3","action":"created","metadata":{}}`,
	}
	body := []byte("{\"meta\": {\"webhook_id\": \"WB1\"},\n \"events\": [\n  " + elems[0] + ",\n  " + elems[1] + " ,\t" + elems[2] + "\n ]\n}\n")
	d, err := p.Events(http.Header{}, body)
	if err != nil {
		t.Fatal(err)
	}
	want := []keyType{
		{"gocardless:EV1", "payments.confirmed"},
		{"gocardless:EV2", "payments.paid_out"},
		{"gocardless:EV3", "mandates.created"},
	}
	if got := keysOf(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i, ev := range d.Events {
		if string(ev.Body) != elems[i] {
			t.Errorf("event %d body = %q, want %q", i, ev.Body, elems[i])
		}
		start := bytes.Index(body, []byte(elems[i]))
		if unsafe.SliceData(ev.Body) != &body[start] {
			t.Errorf("event %d body is a copy, want a slice of the request body", i)
		}
		if cap(ev.Body) != len(ev.Body) {
			t.Errorf("event %d body has spare capacity into the request body", i)
		}
	}
}

func TestSlackChallenge(t *testing.T) {
	p := mustGet(t, testRegistry(t), "slack")
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	d, err := p.Events(http.Header{}, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Events) != 0 {
		t.Fatalf("events = %+v, want none", d.Events)
	}
	if string(d.Challenge) != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` || d.ChallengeContentType != "application/json" {
		t.Fatalf("challenge = %q (%s)", d.Challenge, d.ChallengeContentType)
	}
}

// TestGenericKeyPrecedence: configured rule, then Idempotency-Key, then
// sha256 of the body; each prefixed with the provider name.
func TestGenericKeyPrecedence(t *testing.T) {
	r := testRegistry(t)
	body := `{"type":"order.paid","data":{"id":"ord_7"}}`
	hash := keys.BodyHash([]byte(body))
	cases := []struct {
		name, provider string
		headers        map[string]string
		body           string
		want           keyType
	}{
		{"header rule wins", "acme", map[string]string{"X-Acme-Delivery": "d-1", "Idempotency-Key": "ik-1"}, body, keyType{"acme:d-1", "order.paid"}},
		{"then Idempotency-Key", "acme", map[string]string{"Idempotency-Key": "ik-1"}, body, keyType{"acme:ik-1", "order.paid"}},
		{"then the body hash", "acme", nil, body, keyType{"acme:" + hash, "order.paid"}},
		{"json rule wins", "acme-json", map[string]string{"Idempotency-Key": "ik-1", "X-Acme-Event": "evt"}, body, keyType{"acme-json:ord_7", "evt"}},
		{"json rule absent, Idempotency-Key", "acme-json", map[string]string{"Idempotency-Key": "ik-1"}, `{"data":{}}`, keyType{"acme-json:ik-1", ""}},
		{"json rule null, body hash", "acme-json", nil, `{"data":{"id":null}}`, keyType{"acme-json:" + keys.BodyHash([]byte(`{"data":{"id":null}}`)), ""}},
		{"json rule number", "acme-json", nil, `{"data":{"id":12345678901234567890}}`, keyType{"acme-json:12345678901234567890", ""}},
		{"json rule empty string falls through", "acme-json", map[string]string{"Idempotency-Key": "ik-2"}, `{"data":{"id":""}}`, keyType{"acme-json:ik-2", ""}},
		{"no rule: Idempotency-Key", "open", map[string]string{"Idempotency-Key": "ik-3"}, "not json", keyType{"open:ik-3", ""}},
		{"no rule: body hash", "open", nil, "not json", keyType{"open:" + keys.BodyHash([]byte("not json")), ""}},
		{"type rule on a body without it", "acme", map[string]string{"X-Acme-Delivery": "d-1"}, `{"kind":"x"}`, keyType{"acme:d-1", ""}},
		{"type rule on an object value", "acme", map[string]string{"X-Acme-Delivery": "d-1"}, `{"type":{"a":1}}`, keyType{"acme:d-1", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := events(mustGet(t, r, tc.provider), tc.headers, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := keysOf(d); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("events = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestKeysNamespacedByName: two providers of one preset, and two generic
// providers falling back to the body hash, never share a key for the same
// delivery: every key starts with the provider's name, not its preset's.
func TestKeysNamespacedByName(t *testing.T) {
	r := mustParse(t, `
providers:
  stripe:    {preset: stripe, secret_env: [S1]}
  stripe-eu: {preset: stripe, secret_env: [S1]}
  gh-a:      {preset: github, secret_env: [S1]}
  gh-b:      {preset: github, secret_env: [S1]}
  cal-b:     {preset: calcom, secret_env: [S1]}
  slack-b:   {preset: slack,  secret_env: [S1]}
  gc-b:      {preset: gocardless, secret_env: [S1]}
  std-b:     {preset: standard, secret_env: [STD1]}
  shop-b:    {preset: shopify, secret_env: [S1]}
  open-a:    {preset: generic, signature: {none: true}}
  open-b:    {preset: generic, signature: {none: true}}
`, testEnv())
	hash := keys.BodyHash([]byte(`{"x":1}`))
	cases := []struct {
		provider string
		headers  map[string]string
		body     string
		want     string
	}{
		{"stripe", nil, `{"id":"evt_1"}`, "stripe:evt_1"}, // name = preset: the key it always had
		{"stripe-eu", nil, `{"id":"evt_1"}`, "stripe-eu:evt_1"},
		{"gh-a", map[string]string{"X-GitHub-Delivery": "d1"}, `{}`, "gh-a:d1"},
		{"gh-b", map[string]string{"X-GitHub-Delivery": "d1"}, `{}`, "gh-b:d1"},
		{"shop-b", map[string]string{"X-Shopify-Webhook-Id": "w1"}, `{}`, "shop-b:w1"},
		{"std-b", map[string]string{"Webhook-Id": "msg_1"}, `{}`, "std-b:msg_1"},
		{"cal-b", nil, `{"triggerEvent":"BOOKING_CREATED","payload":{"uid":"bk"}}`, "cal-b:BOOKING_CREATED:bk"},
		{"slack-b", nil, `{"type":"event_callback","event_id":"Ev1"}`, "slack-b:Ev1"},
		{"gc-b", nil, `{"events":[{"id":"EV1"}]}`, "gc-b:EV1"},
		{"open-a", nil, `{"x":1}`, "open-a:" + hash},
		{"open-b", nil, `{"x":1}`, "open-b:" + hash},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			d, err := events(mustGet(t, r, tc.provider), tc.headers, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Events) != 1 || d.Events[0].Key != tc.want {
				t.Fatalf("keys = %+v, want %s", keysOf(d), tc.want)
			}
		})
	}
}

func TestGenericMalformed(t *testing.T) {
	r := testRegistry(t)
	cases := []struct {
		name, provider, body string
	}{
		{"json rule over a body that is not JSON", "acme-json", `{"data":`},
		{"json rule over text", "acme-json", `hello`},
		{"json rule value is an object", "acme-json", `{"data":{"id":{"x":1}}}`},
		{"json rule value is a boolean", "acme-json", `{"data":{"id":true}}`},
		{"json type rule over a body that is not JSON", "acme", `{"type":`},
		{"json rule value has a control character", "acme-json", `{"data":{"id":"a\nb"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Acme-Delivery", "d-1")
			_, err := mustGet(t, r, tc.provider).Events(h, []byte(tc.body))
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v, want *MalformedError", err)
			}
		})
	}
}

// TestCompositeKey: a generic provider's idempotency_key of several JSON
// pointers and headers gives <name>:<part>:<part>, every part required (no
// fallback to Idempotency-Key or the body hash); a missing part is a
// MalformedError that names it.
func TestCompositeKey(t *testing.T) {
	r := mustParse(t, `
providers:
  retell:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: [/call/call_id, /call/end_timestamp]}
  mixed:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id, header: [X-Event, X-Shard]}
`, nil)
	call := func(id, end string) string {
		return `{"event":"call_ended","call":{"call_id":` + id + `,"end_timestamp":` + end + `}}`
	}
	cases := []struct {
		name, provider string
		headers        map[string]string
		body           string
		want           string // "" with wantMissing
		wantMissing    []string
	}{
		{name: "both parts", provider: "retell", body: call(`"call_1"`, `1700000000123`), want: "retell:call_1:1700000000123"},
		{name: "same call, other end", provider: "retell", body: call(`"call_1"`, `1700000000999`), want: "retell:call_1:1700000000999"},
		{name: "Idempotency-Key does not stand in for a part", provider: "retell",
			headers: map[string]string{"Idempotency-Key": "ik"}, body: `{"call":{"call_id":"call_1"}}`, wantMissing: []string{"json /call/end_timestamp"}},
		{name: "null part", provider: "retell", body: call(`"call_1"`, `null`), wantMissing: []string{"json /call/end_timestamp"}},
		{name: "empty part", provider: "retell", body: call(`""`, `1`), wantMissing: []string{"json /call/call_id"}},
		{name: "both missing", provider: "retell", body: `{"call":{}}`, wantMissing: []string{"json /call/call_id", "json /call/end_timestamp"}},
		{name: "colons and percents are escaped", provider: "retell", body: call(`"a:b%"`, `"c"`), want: "retell:a%3Ab%25:c"},
		{name: "the other split of the same characters", provider: "retell", body: call(`"a"`, `"b%:c"`), want: "retell:a:b%25%3Ac"},
		{name: "json and headers, pointers first", provider: "mixed",
			headers: map[string]string{"X-Event": "order.paid", "X-Shard": "7"}, body: `{"id":"ord_1"}`, want: "mixed:ord_1:order.paid:7"},
		{name: "header part missing", provider: "mixed",
			headers: map[string]string{"X-Event": "order.paid"}, body: `{"id":"ord_1"}`, wantMissing: []string{"header X-Shard"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := events(mustGet(t, r, tc.provider), tc.headers, tc.body)
			if tc.wantMissing != nil {
				var me *MalformedError
				if !errors.As(err, &me) {
					t.Fatalf("error = %v, want *MalformedError", err)
				}
				if want := "idempotency key part missing or empty: " + strings.Join(tc.wantMissing, ", "); me.Msg != want {
					t.Fatalf("message %q, want %q", me.Msg, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Events) != 1 || d.Events[0].Key != tc.want {
				t.Fatalf("keys = %+v, want %s", keysOf(d), tc.want)
			}
		})
	}
	for _, bad := range []string{`not json`, call(`{"a":1}`, `1`), call(`"x"`, `true`)} {
		t.Run("malformed "+bad, func(t *testing.T) {
			var me *MalformedError
			if _, err := mustGet(t, r, "retell").Events(http.Header{}, []byte(bad)); !errors.As(err, &me) {
				t.Fatalf("error = %v, want *MalformedError", err)
			}
		})
	}
	t.Run("a key over the length limit", func(t *testing.T) {
		var me *MalformedError
		if _, err := mustGet(t, r, "retell").Events(http.Header{}, []byte(call(`"`+strings.Repeat("a", keys.MaxLen)+`"`, `1`))); !errors.As(err, &me) {
			t.Fatalf("error = %v, want *MalformedError", err)
		}
	})
	t.Run("headers forwarded, JSON required", func(t *testing.T) {
		p := mustGet(t, r, "mixed")
		h := http.Header{"X-Event": {"e"}, "X-Shard": {"1"}}
		if got := p.ForwardHeaders(h); len(got) != 2 || got[0].Name != "x-event" || got[1].Name != "x-shard" {
			t.Fatalf("forwarded %+v, want x-event and x-shard", got)
		}
		if err := p.CheckContentType("text/plain"); err == nil {
			t.Fatal("text/plain accepted by a provider keyed on a JSON pointer")
		}
	})
}
