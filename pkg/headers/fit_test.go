package headers

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCheckEventType(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		says string // "" = accepted
	}{
		{"", ""},
		{"invoice.paid", ""},
		{"café.créé", ""},
		{strings.Repeat("a", MaxEventTypeBytes), ""},
		{strings.Repeat("a", MaxEventTypeBytes+1), "257 bytes, over the limit of 256"},
		{strings.Repeat("a", 655_000), "655000 bytes"},
		{"invoice.paid\r\nX-Injected: 1", `non-printable character ("\r") at byte 12`},
		{"a\x1b[31m", `non-printable character ("\x1b")`},
		{"a\x00", "non-printable"},
		{"a\u200b", "non-printable"},
		{"\xff", "not UTF-8"},
	} {
		err := CheckEventType(tc.typ)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%.40q: %v, want accepted", tc.typ, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%.40q: %v, want an error saying %q", tc.typ, err, tc.says)
		}
	}
}

func TestFit(t *testing.T) {
	body := []byte(strings.Repeat("b", 1000))
	mk := func() *kgo.Record {
		r := &kgo.Record{Key: []byte("stripe:evt_1"), Value: body}
		Set(r, Provider, "stripe")
		Set(r, EventType, strings.Repeat("t", 5000))
		Set(r, Errors, strings.Repeat("e", 3000))
		return r
	}

	r := mk()
	if !Fit(r, Size(r)) || Value(r, HeadersCut) != "" {
		t.Fatalf("a record that fits was changed: cut %q", Value(r, HeadersCut))
	}

	// Room for the body and the short headers, and one long header cut:
	// the longest (the event type) goes first, the other stays whole.
	r = mk()
	limit := Size(r) - 5000 + CutHeaderBytes + 100
	if !Fit(r, limit) {
		t.Fatalf("Fit(%d) = false, size %d", limit, Size(r))
	}
	if got := Value(r, HeadersCut); got != EventType {
		t.Errorf("headers cut %q, want only %s", got, EventType)
	}
	if len(Value(r, EventType)) != CutHeaderBytes || len(Value(r, Errors)) != 3000 || Value(r, Provider) != "stripe" || string(r.Value) != string(body) {
		t.Errorf("after Fit: event type %d bytes, errors %d, provider %q, body kept %t",
			len(Value(r, EventType)), len(Value(r, Errors)), Value(r, Provider), string(r.Value) == string(body))
	}

	// Limit 0: every long header is cut; the record cannot fit.
	r = mk()
	if Fit(r, 0) {
		t.Fatal("Fit(0) = true")
	}
	if got := Value(r, HeadersCut); got != EventType+","+Errors {
		t.Errorf("headers cut %q, want both long ones", got)
	}

	// A second cut adds to the list, without repeating it.
	Set(r, EventType, strings.Repeat("u", 900))
	Fit(r, 0)
	if got := Value(r, HeadersCut); got != EventType+","+Errors {
		t.Errorf("headers cut after a second Fit %q", got)
	}
}
