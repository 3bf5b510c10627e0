package providers

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/keys"
)

// keyCase is a delivery and the key it must get ("" with wantErr: the
// MalformedError's message must contain wantErr).
type keyCase struct {
	name     string
	headers  map[string]string
	body     string
	want     string
	wantType string
	wantErr  string
}

func runKeyCases(t *testing.T, p *Provider, cases []keyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := events(p, tc.headers, tc.body)
			if tc.wantErr != "" {
				var me *MalformedError
				if !errors.As(err, &me) || !strings.Contains(me.Msg, tc.wantErr) {
					t.Fatalf("error = %v, want a MalformedError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Events) != 1 || d.Events[0].Key != tc.want || d.Events[0].Type != tc.wantType {
				t.Fatalf("events = %+v, want key %s, type %q", d.Events, tc.want, tc.wantType)
			}
		})
	}
}

// TestRetellKeys: the retell preset keys as seed 000's
// IdempotencyKeyGenerator::generateRetellKey does (the event; call.call_id,
// else call_id; call.end_timestamp for call_ended only), with the body's
// hash where there is no call id, from the seed's own payloads.
func TestRetellKeys(t *testing.T) {
	p := mustGet(t, testRegistry(t), "retell")
	inbound := `{"event":"call_inbound","call_inbound":{"agent_id":"ag_1","from_number":"+4930123","to_number":"+4940456"}}`
	runKeyCases(t, p, []keyCase{
		{name: "call_started", body: `{"event":"call_started","call":{"call_id":"c_1","start_timestamp":1700000000000}}`,
			want: "retell:call_started:c_1", wantType: "call_started"},
		{name: "call_ended of the same call", body: `{"event":"call_ended","call":{"call_id":"c_1","start_timestamp":1700000000000,"end_timestamp":1700000060000}}`,
			want: "retell:call_ended:c_1:1700000060000", wantType: "call_ended"},
		{name: "call_analyzed of the same call (its end_timestamp is not in the key)", body: `{"event":"call_analyzed","call":{"call_id":"c_1","end_timestamp":1700000060000}}`,
			want: "retell:call_analyzed:c_1", wantType: "call_analyzed"},
		{name: "call_ended without end_timestamp (seed 5.2's test)", body: `{"event":"call_ended","call_id":"test-123"}`,
			want: "retell:call_ended:test-123:", wantType: "call_ended"},
		{name: "top-level call_id (seed 5.3's load test)", body: `{"event":"call_ended","call_id":"load-test-duplicate","timestamp":1234567890}`,
			want: "retell:call_ended:load-test-duplicate:", wantType: "call_ended"},
		{name: "call.call_id wins over call_id", body: `{"event":"call_started","call_id":"outer","call":{"call_id":"inner"}}`,
			want: "retell:call_started:inner", wantType: "call_started"},
		{name: "null call.call_id falls to call_id", body: `{"event":"call_started","call_id":"outer","call":{"call_id":null}}`,
			want: "retell:call_started:outer", wantType: "call_started"},
		{name: "call_inbound has no call id: the body's hash", body: inbound,
			want: "retell:call_inbound:" + strings.ReplaceAll(keys.BodyHash([]byte(inbound)), ":", "%3A"), wantType: "call_inbound"},
		{name: "no event", body: `{"call":{"call_id":"c_1"}}`, wantErr: "idempotency key part missing or empty: json /event"},
		{name: "not JSON", body: `event=call_ended`, wantErr: "not valid JSON"},
	})
	// One call's three events get three keys.
	seen := map[string]string{}
	for _, ev := range []string{"call_started", "call_ended", "call_analyzed"} {
		d, err := events(p, nil, `{"event":"`+ev+`","call":{"call_id":"c_9","end_timestamp":1700000060000}}`)
		if err != nil {
			t.Fatal(err)
		}
		k := d.Events[0].Key
		if other, ok := seen[k]; ok {
			t.Fatalf("%s and %s share the key %s", ev, other, k)
		}
		seen[k] = ev
	}
}

// whatsappYAML is docs/providers.md's example of seed 003's rule.
const whatsappYAML = `
providers:
  whatsapp:
    preset: generic
    signature: {none: true}
    event_type: {json: /event}
    idempotency_key:
      parts:
        - {json: /instance}
        - {json: /data/key/id, body_hash: true}
        - {json: /data/key/remoteJid, optional: true}
        - {json: /data/messageTimestamp, optional: true}
`

// TestWhatsAppKeys: seed 003's gerar_idempotency_key (instance, message id
// else a hash of the payload, remoteJid, messageTimestamp; empty parts
// allowed) written as parts.
func TestWhatsAppKeys(t *testing.T) {
	p := mustGet(t, mustParse(t, whatsappYAML, nil), "whatsapp")
	noID := `{"event":"connection.update","instance":"julia-1","data":{"state":"open"}}`
	noID2 := `{"event":"connection.update","instance":"julia-1","data":{"state":"close"}}`
	hashOf := func(b string) string { return strings.ReplaceAll(keys.BodyHash([]byte(b)), ":", "%3A") }
	runKeyCases(t, p, []keyCase{
		{name: "message with id", body: `{"event":"messages.upsert","instance":"julia-1","data":{"key":{"remoteJid":"5511999999999@s.whatsapp.net","fromMe":false,"id":"3EB0C767D26A1D8A"},"messageTimestamp":1717000000}}`,
			want: "whatsapp:julia-1:3EB0C767D26A1D8A:5511999999999@s.whatsapp.net:1717000000", wantType: "messages.upsert"},
		{name: "message with id, no remoteJid", body: `{"event":"messages.upsert","instance":"julia-1","data":{"key":{"id":"3EB0C767D26A1D8A"},"messageTimestamp":1717000000}}`,
			want: "whatsapp:julia-1:3EB0C767D26A1D8A::1717000000", wantType: "messages.upsert"},
		{name: "message with id only", body: `{"event":"messages.upsert","instance":"julia-1","data":{"key":{"id":"3EB0C767D26A1D8A"}}}`,
			want: "whatsapp:julia-1:3EB0C767D26A1D8A::", wantType: "messages.upsert"},
		{name: "no message id: the body's hash", body: noID, want: "whatsapp:julia-1:" + hashOf(noID) + "::", wantType: "connection.update"},
		{name: "another body without message id", body: noID2, want: "whatsapp:julia-1:" + hashOf(noID2) + "::", wantType: "connection.update"},
		{name: "no instance", body: `{"event":"messages.upsert","data":{"key":{"id":"X"}}}`, wantErr: "json /instance"},
	})
}

// TestKeyParts: parts' alternatives, optional parts, parts by event type,
// body-hash fallbacks and headers; a rule of required parts gives the keys
// the composite json/header form gives.
func TestKeyParts(t *testing.T) {
	r := mustParse(t, `
providers:
  calls:
    preset: generic
    signature: {none: true}
    event_type: {json: /event}
    idempotency_key:
      parts:
        - {json: /event}
        - {json: [/call/call_id, /call_id], header: X-Call-Id}
        - {json: /call/end_timestamp, events: [call_ended]}
        - {header: X-Attempt, optional: true, events: [call_ended, "call_analy*"]}
  same:
    preset: generic
    signature: {none: true}
    idempotency_key: {parts: [{json: /call/call_id}, {json: /call/end_timestamp}]}
  old:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: [/call/call_id, /call/end_timestamp]}
  hashed:
    preset: generic
    signature: {none: true}
    idempotency_key: {parts: [{body_hash: true}]}
`, nil)
	calls := mustGet(t, r, "calls")
	runKeyCases(t, calls, []keyCase{
		{name: "first alternative", body: `{"event":"call_started","call":{"call_id":"a"},"call_id":"b"}`, headers: map[string]string{"X-Call-Id": "h"},
			want: "calls:call_started:a", wantType: "call_started"},
		{name: "second alternative", body: `{"event":"call_started","call_id":"b"}`, headers: map[string]string{"X-Call-Id": "h"},
			want: "calls:call_started:b", wantType: "call_started"},
		{name: "header alternative last", body: `{"event":"call_started"}`, headers: map[string]string{"X-Call-Id": "h"},
			want: "calls:call_started:h", wantType: "call_started"},
		{name: "no alternative present", body: `{"event":"call_started"}`,
			wantErr: "idempotency key part missing or empty: json /call/call_id or json /call_id or header X-Call-Id"},
		{name: "event part required for its type", body: `{"event":"call_ended","call_id":"b"}`,
			wantErr: "idempotency key part missing or empty: json /call/end_timestamp"},
		{name: "event parts, optional one present", body: `{"event":"call_ended","call_id":"b","call":{"end_timestamp":5}}`, headers: map[string]string{"X-Attempt": "2"},
			want: "calls:call_ended:b:5:2", wantType: "call_ended"},
		{name: "event parts, optional one absent keeps its place", body: `{"event":"call_ended","call_id":"b","call":{"end_timestamp":5}}`,
			want: "calls:call_ended:b:5:", wantType: "call_ended"},
		{name: "glob part only", body: `{"event":"call_analyzed","call_id":"b"}`, headers: map[string]string{"X-Attempt": "2"},
			want: "calls:call_analyzed:b:2", wantType: "call_analyzed"},
		{name: "values escaped", body: `{"event":"a:b","call_id":"50%"}`, want: "calls:a%3Ab:50%25", wantType: "a:b"},
	})
	body := `{"call":{"call_id":"a:b%","end_timestamp":1700000000123}}`
	for _, name := range []string{"same", "old"} {
		d, err := events(mustGet(t, r, name), nil, body)
		if err != nil || d.Events[0].Key != name+":a%3Ab%25:1700000000123" {
			t.Fatalf("%s: %+v, %v", name, d, err)
		}
	}
	runKeyCases(t, mustGet(t, r, "hashed"), []keyCase{
		{name: "body hash alone", body: `anything`, want: "hashed:" + strings.ReplaceAll(keys.BodyHash([]byte("anything")), ":", "%3A")},
	})
}

// TestKeyPartErrors: rules refused at start, each error naming the
// provider and the field; among them every rule that lets two events
// share a key only because a part was left out (keys.CheckParts).
func TestKeyPartErrors(t *testing.T) {
	cases := []struct {
		name, block, want string
	}{
		{"parts beside json", `idempotency_key: {json: /id, parts: [{json: /x}]}`,
			`provider "p": idempotency_key: parts and json or header both set`},
		{"empty parts", `idempotency_key: {parts: []}`, `provider "p": idempotency_key.parts: empty`},
		{"empty part", `idempotency_key: {parts: [{}]}`, `provider "p": idempotency_key.parts[0]: give json`},
		{"bad pointer", `idempotency_key: {parts: [{json: [/a, b]}]}`, `provider "p": idempotency_key.parts[0].json: JSON pointer "b" must be empty or start with /`},
		{"bad header", `idempotency_key: {parts: [{header: "a b"}]}`, `provider "p": idempotency_key.parts[0].header: "a b" is not a valid HTTP header name`},
		{"alternative twice", `idempotency_key: {parts: [{json: [/a, /a]}]}`, `provider "p": idempotency_key.parts[0]: json /a is listed twice`},
		{"part twice", `idempotency_key: {parts: [{json: /a}, {json: /a}]}`, `provider "p": idempotency_key.parts[1]: the same part as parts[0]`},
		{"optional and body_hash", `idempotency_key: {parts: [{json: /a, optional: true, body_hash: true}]}`,
			`provider "p": idempotency_key.parts[0]: optional and body_hash both set`},
		{"events empty", "event_type: {json: /event}\n    idempotency_key: {parts: [{json: /event}, {json: /a, events: []}]}",
			`provider "p": idempotency_key.parts[1].events: empty`},
		{"events bad glob", "event_type: {json: /event}\n    idempotency_key: {parts: [{json: /event}, {json: /a, events: [\"a**\"]}]}",
			`provider "p": idempotency_key.parts[1].events: "a**": ** is the same as *`},
		{"events without event_type", `idempotency_key: {parts: [{json: /id}, {json: /a, events: [x]}]}`,
			`provider "p": idempotency_key.parts[1].events: the part applies by event type, but the provider has no event_type`},
		{"events without the type in the key (issue 23's Retell rule)", "event_type: {json: /event}\n    idempotency_key: {parts: [{json: /call/call_id}, {json: /call/end_timestamp, events: [call_ended]}]}",
			`provider "p": idempotency_key.parts[1].events: the part is left out of the key of events of other types, so two of those would share a key whenever the other parts match: add the event type as a part of its own, {json: /event}`},
		{"the type part optional does not count", "event_type: {json: /event}\n    idempotency_key: {parts: [{json: /event, optional: true}, {json: /id}, {json: /a, events: [x]}]}",
			`provider "p": idempotency_key.parts[0].optional: events without json /event would be keyed on the other parts alone`},
		{"the type from elsewhere does not count", "event_type: {header: X-Event}\n    idempotency_key: {parts: [{json: /event}, {json: /id}, {json: /a, events: [x]}]}",
			`provider "p": idempotency_key.parts[2].events: the part is left out of the key of events of other types, so two of those would share a key whenever the other parts match: add the event type as a part of its own, {header: X-Event}`},
		{"optional without type or hash", "event_type: {json: /event}\n    idempotency_key: {parts: [{json: /call/call_id}, {json: /call/end_timestamp, optional: true}]}",
			`provider "p": idempotency_key.parts[1].optional: events without json /call/end_timestamp would be keyed on the other parts alone: add the event type as a part of its own, {json: /event}, or a part with body_hash: true`},
		{"optional without event_type", `idempotency_key: {parts: [{json: /id}, {json: /a, optional: true}]}`,
			`provider "p": idempotency_key.parts[1].optional: events without json /a would be keyed on the other parts alone: add a part with body_hash: true`},
		{"event_type takes no parts", `event_type: {parts: [{json: /x}]}`, `provider "p": event_type.parts: only idempotency_key has parts`},
		{"too many parts", `idempotency_key: {parts: [{json: /a}, {json: /b}, {json: /c}, {json: /d}, {json: /e}, {json: /f}, {json: /g}, {json: /h}, {json: /i}]}`,
			`provider "p": idempotency_key.parts: 9 parts, at most 8`},
		{"unknown part field", `idempotency_key: {parts: [{jsn: /a}]}`, `provider "p": line 5: unknown field jsn`},
		{"preset takes no idempotency_key", "idempotency_key: {parts: [{json: /a}]}", ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			yml := "providers:\n  p:\n    preset: generic\n    signature: {none: true}\n    " + tc.block + "\n"
			if tc.want == "" { // the retell preset has its own rule
				yml = "providers:\n  p:\n    preset: retell\n    secret_env: [S1]\n    " + tc.block + "\n"
				tc.want = `provider "p": idempotency_key: only a generic provider takes idempotency_key (preset retell has its own)`
			}
			_, err := Parse([]byte(yml), testEnv().lookup)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestPresetKeyRulesPassTheCheck: the retell preset's own rule passes
// checkParts, as a file's would have to.
func TestPresetKeyRulesPassTheCheck(t *testing.T) {
	for _, name := range Presets() {
		pre, _ := presetFor(name)
		if pre.keyParts == nil {
			continue
		}
		if err := keys.CheckParts(pre.keyParts, pre.typeRule); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}
