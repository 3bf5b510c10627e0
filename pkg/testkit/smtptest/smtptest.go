// Package smtptest is a real SMTP server for tests, on 127.0.0.1: it
// speaks enough of RFC 5321 (EHLO, optional STARTTLS and AUTH PLAIN, MAIL,
// RCPT, DATA, RSET, NOOP, QUIT) for a client to deliver to it, and keeps
// every message it accepts. Written over net/textproto, so no package is
// installed to run it.
package smtptest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"math/big"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options choose what the server offers.
type Options struct {
	// StartTLS offers STARTTLS with a certificate for 127.0.0.1 made for
	// this server (Sink.ClientTLS trusts it).
	StartTLS bool
	// Users are the accepted AUTH PLAIN logins, user to password; none
	// offers no AUTH.
	Users map[string]string
}

// Received is one accepted message.
type Received struct {
	From string
	To   []string
	// Data is the message as sent after DATA, dot-unstuffed, CRLF line
	// ends kept.
	Data []byte
	// User is who logged in ("" for nobody); TLS says the session was
	// encrypted when the message was sent.
	User string
	TLS  bool
}

// Sink is a running server.
type Sink struct {
	Addr string
	// ClientTLS trusts the server's certificate (nil without StartTLS).
	ClientTLS *tls.Config

	opts   Options
	ln     net.Listener
	server *tls.Config
	mu     sync.Mutex
	got    []Received
	cmds   []string
	wg     sync.WaitGroup
}

// Start runs a server until the test ends.
func Start(tb testing.TB, o Options) *Sink {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Sink{Addr: ln.Addr().String(), opts: o, ln: ln}
	if o.StartTLS {
		s.server, s.ClientTLS = certificate(tb)
	}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

// Messages are the messages accepted so far.
func (s *Sink) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.got...)
}

// Commands are the command verbs the server was sent, in order, every
// session.
func (s *Sink) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cmds...)
}

// Wait waits until n messages were accepted, for up to d, and fails the
// test saying what came if they do not.
func (s *Sink) Wait(tb testing.TB, n int, d time.Duration) []Received {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		if got := s.Messages(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("SMTP sink: %d messages in %s, want %d (commands %v)", len(s.Messages()), d, n, s.Commands())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Sink) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			s.session(c)
		}()
	}
}

// session serves one connection.
func (s *Sink) session(c net.Conn) {
	tp := textproto.NewConn(c)
	encrypted := false
	var user, from string
	var to []string
	reply := func(code int, msg string) bool { return tp.PrintfLine("%d %s", code, msg) == nil }
	if !reply(220, "127.0.0.1 smtptest") {
		return
	}
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		verb = strings.ToUpper(verb)
		s.mu.Lock()
		s.cmds = append(s.cmds, verb)
		s.mu.Unlock()
		switch verb {
		case "EHLO", "HELO":
			ext := []string{"250-127.0.0.1", "250-8BITMIME"}
			if s.server != nil && !encrypted {
				ext = append(ext, "250-STARTTLS")
			}
			if len(s.opts.Users) > 0 {
				ext = append(ext, "250-AUTH PLAIN")
			}
			ext = append(ext, "250 SIZE 10485760")
			for _, l := range ext {
				if tp.PrintfLine("%s", l) != nil {
					return
				}
			}
		case "STARTTLS":
			if s.server == nil || encrypted {
				reply(502, "no STARTTLS")
				continue
			}
			reply(220, "go ahead")
			tc := tls.Server(c, s.server)
			if tc.Handshake() != nil {
				return
			}
			c, tp, encrypted = tc, textproto.NewConn(tc), true
			user, from, to = "", "", nil
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			if !strings.EqualFold(mech, "PLAIN") || len(s.opts.Users) == 0 {
				reply(504, "unknown mechanism")
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(resp)
			parts := strings.Split(string(raw), "\x00")
			if err != nil || len(parts) != 3 || s.opts.Users[parts[1]] != parts[2] || parts[1] == "" {
				reply(535, "authentication failed")
				continue
			}
			user = parts[1]
			reply(235, "ok")
		case "MAIL":
			from, to = address(arg, "FROM:"), nil
			reply(250, "ok")
		case "RCPT":
			to = append(to, address(arg, "TO:"))
			reply(250, "ok")
		case "DATA":
			if from == "" || len(to) == 0 {
				reply(503, "MAIL and RCPT first")
				continue
			}
			reply(354, "end with .")
			data, err := readData(tp.Reader.R)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got = append(s.got, Received{From: from, To: to, Data: data, User: user, TLS: encrypted})
			s.mu.Unlock()
			from, to = "", nil
			reply(250, "queued")
		case "RSET":
			from, to = "", nil
			reply(250, "ok")
		case "NOOP":
			reply(250, "ok")
		case "QUIT":
			reply(221, "bye")
			return
		default:
			reply(500, "unknown command")
		}
	}
}

// address is the path of a MAIL FROM:<a> or RCPT TO:<a> argument, its
// parameters (BODY=8BITMIME) left out.
func address(arg, prefix string) string {
	if len(arg) >= len(prefix) && strings.EqualFold(arg[:len(prefix)], prefix) {
		arg = arg[len(prefix):]
	}
	arg, _, _ = strings.Cut(strings.TrimSpace(arg), " ")
	return strings.Trim(arg, "<>")
}

// readData reads a DATA body up to the line ".", undoing dot-stuffing and
// keeping CRLF line ends.
func readData(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == ".\r\n" {
			return out, nil
		}
		out = append(out, strings.TrimPrefix(line, ".")...)
	}
}

// certificate makes a self-signed certificate for 127.0.0.1: the server's
// configuration, and a client's that trusts it.
func certificate(tb testing.TB) (server, client *tls.Config) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "smtptest"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}

// String says where the sink listens.
func (s *Sink) String() string { return fmt.Sprintf("smtptest at %s", s.Addr) }
