package mail

import (
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/smtptest"
)

// body has what a status report has: long table lines, a line starting
// with a dot (dot-stuffed on the wire), non-ASCII.
const body = "HEALTHY at 2026-03-01T12:00:00Z\n" +
	"PROVIDER  ROUTE    PRIORITY  ACCEPTED/S  DONE  COMPLETED  RETRYING  PARKED  DUE NOW  SCHEDULED  OLDEST WAITING  DLQ  OLDEST DLQ  STATE    BREAKER\n" +
	".leading dot\n" +
	"stripe    billing  critical  0.00        3     12         0         0       0        0          -               0    -           running  closed — ok\n"

// read parses a received message: its headers and its decoded body.
func read(t *testing.T, data []byte) (mail.Header, string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the sink's message does not parse: %v\n%s", err, data)
	}
	if m.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Fatalf("Content-Transfer-Encoding %q", m.Header.Get("Content-Transfer-Encoding"))
	}
	b, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	return m.Header, strings.ReplaceAll(string(b), "\r\n", "\n")
}

// TestSend: one message, to two recipients, arrives at a real SMTP server
// with its subject, sender, recipients and body intact; over plain SMTP
// when TLS is not required and the server offers none, with STARTTLS and
// a PLAIN login when it offers them; and nothing is sent when TLS is
// required and the server has no STARTTLS.
func TestSend(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	msg := Message{To: []string{"ops@example.com", "Lead <lead@example.com>"}, Subject: "hookline health report: HEALTHY — all routes", Body: body, Date: at}
	check := func(t *testing.T, got []smtptest.Received, user string, tls bool) {
		t.Helper()
		if len(got) != 1 {
			t.Fatalf("%d messages, want 1", len(got))
		}
		r := got[0]
		if r.From != "hookline@example.com" || !slices.Equal(r.To, []string{"ops@example.com", "lead@example.com"}) || r.User != user || r.TLS != tls {
			t.Errorf("envelope from %q to %v, user %q, tls %v: want hookline@example.com to both, user %q, tls %v", r.From, r.To, r.User, r.TLS, user, tls)
		}
		h, b := read(t, r.Data)
		subj, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
		if err != nil || subj != msg.Subject {
			t.Errorf("subject %q (%v), want %q", subj, err, msg.Subject)
		}
		if d, err := h.Date(); err != nil || !d.Equal(at) {
			t.Errorf("date %v %v, want %s", d, err, at)
		}
		if !strings.Contains(h.Get("To"), "lead@example.com") || !strings.Contains(h.Get("From"), "hookline@example.com") {
			t.Errorf("headers From %q To %q", h.Get("From"), h.Get("To"))
		}
		if b != body {
			t.Errorf("body:\n%s\nwant:\n%s", b, body)
		}
	}

	t.Run("plain", func(t *testing.T) {
		sink := smtptest.Start(t, smtptest.Options{})
		if err := Send(t.Context(), Config{Host: sink.Addr, From: "Hookline <hookline@example.com>"}, msg); err != nil {
			t.Fatal(err)
		}
		check(t, sink.Messages(), "", false)
	})
	t.Run("starttls and login", func(t *testing.T) {
		sink := smtptest.Start(t, smtptest.Options{StartTLS: true, Users: map[string]string{"hook": "s3cret"}})
		cfg := Config{Host: sink.Addr, From: "hookline@example.com", Username: "hook", Password: "s3cret", RequireTLS: true, TLS: sink.ClientTLS}
		if err := Send(t.Context(), cfg, msg); err != nil {
			t.Fatal(err)
		}
		check(t, sink.Messages(), "hook", true)
	})
	t.Run("wrong password", func(t *testing.T) {
		sink := smtptest.Start(t, smtptest.Options{StartTLS: true, Users: map[string]string{"hook": "s3cret"}})
		cfg := Config{Host: sink.Addr, From: "hookline@example.com", Username: "hook", Password: "nope", RequireTLS: true, TLS: sink.ClientTLS}
		if err := Send(t.Context(), cfg, msg); err == nil || !strings.Contains(err.Error(), "login as hook") || strings.Contains(err.Error(), "nope") {
			t.Fatalf("a refused login: %v", err)
		}
		if n := len(sink.Messages()); n != 0 {
			t.Errorf("%d messages after a refused login", n)
		}
	})
	t.Run("tls required, none offered", func(t *testing.T) {
		sink := smtptest.Start(t, smtptest.Options{})
		err := Send(t.Context(), Config{Host: sink.Addr, From: "hookline@example.com", RequireTLS: true}, msg)
		if err == nil || !strings.Contains(err.Error(), "no STARTTLS") {
			t.Fatalf("want a refusal naming STARTTLS, got %v", err)
		}
		if slices.Contains(sink.Commands(), "MAIL") || len(sink.Messages()) != 0 {
			t.Errorf("commands %v: nothing may be sent unencrypted", sink.Commands())
		}
	})
}
