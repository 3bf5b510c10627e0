// Package mail sends one plain-text e-mail over SMTP with the settings
// `make observe` gives Alertmanager's e-mail receiver
// (HOOKLINE_ALERT_SMTP_HOST, _USERNAME, _PASSWORD, _REQUIRE_TLS,
// HOOKLINE_ALERT_EMAIL_FROM), read the way Alertmanager reads them: port
// 465 is TLS from the first byte; any other port upgrades with STARTTLS
// when the server offers it, and refuses to go on without it when
// RequireTLS is set; a username logs in with PLAIN (over TLS only, or to
// a server on loopback).
package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"time"
)

// Config is where and as whom a message is sent.
type Config struct {
	// Host is the server, host:port.
	Host string
	// From is the sender address (the envelope's and the From header's).
	From string
	// Username and Password log in when Username is set.
	Username, Password string
	// RequireTLS refuses to send over a connection that is not encrypted.
	RequireTLS bool
	// TLS is the client's TLS configuration (nil: the system's roots,
	// ServerName the host of Host).
	TLS *tls.Config
}

// Message is one e-mail.
type Message struct {
	To      []string
	Subject string
	// Body is plain UTF-8 text; it is sent quoted-printable, so no line
	// is too long for SMTP.
	Body string
	Date time.Time
}

// timeout bounds a send when ctx has no deadline.
const timeout = 30 * time.Second

// Send delivers m through the server of cfg. Cost: one connection and one
// SMTP session.
func Send(ctx context.Context, cfg Config, m Message) (err error) {
	if len(m.To) == 0 {
		return errors.New("mail: no recipient")
	}
	host, port, err := net.SplitHostPort(cfg.Host)
	if err != nil {
		return fmt.Errorf("mail: server %q: %w", cfg.Host, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	tc := cfg.TLS
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", cfg.Host)
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	encrypted := port == "465"
	if encrypted {
		conn = tls.Client(conn, tc)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("mail: %s: %w", cfg.Host, err)
	}
	defer func() {
		if cerr := c.Close(); cerr != nil && err == nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("mail: close: %w", cerr)
		}
	}()
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("mail: %s: EHLO: %w", cfg.Host, err)
	}
	if !encrypted {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tc); err != nil {
				return fmt.Errorf("mail: %s: STARTTLS: %w", cfg.Host, err)
			}
			encrypted = true
		} else if cfg.RequireTLS {
			return fmt.Errorf("mail: %s offers no STARTTLS and TLS is required (HOOKLINE_ALERT_SMTP_REQUIRE_TLS)", cfg.Host)
		}
	}
	if cfg.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", cfg.Username, cfg.Password, host)); err != nil {
			return fmt.Errorf("mail: %s: login as %s: %w", cfg.Host, cfg.Username, err)
		}
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return fmt.Errorf("mail: from %q: %w", cfg.From, err)
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("mail: %s: MAIL FROM: %w", cfg.Host, err)
	}
	var to []string
	for _, r := range m.To {
		a, err := mail.ParseAddress(r)
		if err != nil {
			return fmt.Errorf("mail: to %q: %w", r, err)
		}
		if err := c.Rcpt(a.Address); err != nil {
			return fmt.Errorf("mail: %s: RCPT TO %s: %w", cfg.Host, a.Address, err)
		}
		to = append(to, a.String())
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("mail: %s: DATA: %w", cfg.Host, err)
	}
	if _, err := w.Write(compose(from.String(), to, m)); err != nil {
		return fmt.Errorf("mail: %s: write: %w", cfg.Host, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("mail: %s: the server refused the message: %w", cfg.Host, err)
	}
	if err := c.Quit(); err != nil {
		return fmt.Errorf("mail: %s: QUIT: %w", cfg.Host, err)
	}
	return nil
}

// compose is the message's bytes: its headers and its body,
// quoted-printable.
func compose(from string, to []string, m Message) []byte {
	var b bytes.Buffer
	date := m.Date
	if date.IsZero() {
		date = time.Now()
	}
	for _, h := range [][2]string{
		{"From", from},
		{"To", strings.Join(to, ", ")},
		{"Subject", mime.QEncoding.Encode("utf-8", oneLine(m.Subject))},
		{"Date", date.Format(time.RFC1123Z)},
		{"MIME-Version", "1.0"},
		{"Content-Type", "text/plain; charset=utf-8"},
		{"Content-Transfer-Encoding", "quoted-printable"},
	} {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(m.Body, "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}

// oneLine keeps a header value on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
