package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var now = time.Unix(1_700_000_000, 0)

// TestSchemes: every scheme verifies what it signs, with any one of
// several secrets, and refuses another body, another secret and a
// timestamp outside the tolerance with the reason that says so.
func TestSchemes(t *testing.T) {
	key, other := []byte("k1"), []byte("k2")
	for name, s := range map[string]*Scheme{
		"stripe": Stripe(), "slack": Slack(), "retell": Retell(), "standard": Standard(),
		"single hex": Single("X-Sig", "sha1=", sha1.New, Hex), "single base64": Single("X-Sig", "", sha1.New, Base64),
	} {
		t.Run(name, func(t *testing.T) {
			body := []byte(`{"id":1}`)
			h := http.Header{}
			s.Sign(key, body, now, h)
			check := func(what string, secrets []Secret, body []byte, at time.Time, want string) {
				t.Helper()
				err := s.Verify(secrets, h, body, at, DefaultTolerance)
				var se *Error
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v", what, err)
				case want != "" && (!errors.As(err, &se) || se.Reason != want):
					t.Errorf("%s: %v, want reason %s", what, err, want)
				}
				// Precheck then VerifyParsed: Verify's verdict and message.
				p, perr := s.Precheck(h, at, DefaultTolerance)
				if perr == nil {
					perr = s.VerifyParsed(secrets, p, body)
				}
				if fmt.Sprint(perr) != fmt.Sprint(err) {
					t.Errorf("%s: Precheck and VerifyParsed: %v, Verify: %v", what, perr, err)
				}
			}
			check("signed", []Secret{key}, body, now, "")
			check("rotation", []Secret{other, key}, body, now, "")
			check("other body", []Secret{key}, []byte(`{"id":2}`), now, ReasonMismatch)
			check("other secret", []Secret{other}, body, now, ReasonMismatch)
			if s.Timestamped() {
				check("late", []Secret{key}, body, now.Add(DefaultTolerance+time.Second), ReasonStale)
				if _, err := s.Precheck(h, now.Add(-DefaultTolerance-time.Second), DefaultTolerance); err == nil {
					t.Error("Precheck took an early timestamp")
				}
			}
			if _, err := s.Precheck(http.Header{}, now, DefaultTolerance); err == nil {
				t.Error("Precheck took a request without signature headers")
			}
			if len(s.Headers()) == 0 || !s.Headers()[0].Required {
				t.Errorf("Headers = %v, want the signature header first, required", s.Headers())
			}
		})
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		c   Config
		err string // "" for a good block
	}{
		{Config{Header: "X-Sig"}, ""},
		{Config{Header: "X-Sig", Algorithm: "hmac-sha512", Encoding: "base64", Prefix: "v1="}, ""},
		{Config{None: true}, ""},
		{Config{None: true, Header: "X-Sig"}, "none: true cannot be combined"},
		{Config{}, "signature.header: required"},
		{Config{Header: "X Sig"}, "not a valid HTTP header name"},
		{Config{Header: "X-Sig", Algorithm: "md5"}, "signature.algorithm"},
		{Config{Header: "X-Sig", Encoding: "base32"}, "signature.encoding"},
	} {
		_, err := tc.c.Scheme()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: Scheme() = %v, want %q", tc.c, err, tc.err)
		}
	}
}

func TestSecretRedacted(t *testing.T) {
	s := Secret("hunter2")
	j, _ := json.Marshal(s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%#v %x %q", s, s, s), string(j)} {
		if strings.Contains(out, "hunter2") || strings.Contains(out, "68756e74") {
			t.Errorf("%q shows the secret", out)
		}
	}
}

func TestDecodeStandardSecret(t *testing.T) {
	if k, err := DecodeStandardSecret([]byte("whsec_dGVzdA==")); err != nil || string(k) != "test" {
		t.Errorf("whsec_: %q %v", k, err)
	}
	for _, bad := range []string{"whsec_***", "whsec_", ""} {
		if _, err := DecodeStandardSecret([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// TestReusedMACs: the HMACs a scheme keeps per key give the same answers
// when reused, for keys taking turns, and for more keys than it keeps
// (maxMacKeys), against the HMAC made anew.
func TestReusedMACs(t *testing.T) {
	s := Stripe()
	body := []byte(`{"id":"evt_1"}`)
	var keys []Secret
	for i := range maxMacKeys + 4 {
		keys = append(keys, Secret(fmt.Sprintf("key-%d", i)))
	}
	for round := range 3 {
		for i, key := range keys {
			h := http.Header{}
			s.Sign(key, body, now, h)
			fresh := hmac.New(sha256.New, key)
			fresh.Write([]byte(strconv.FormatInt(now.Unix(), 10) + "."))
			fresh.Write(body)
			if want := "t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=" + hex.EncodeToString(fresh.Sum(nil)); h.Get("Stripe-Signature") != want {
				t.Fatalf("round %d key %d: signed %q, want %q", round, i, h.Get("Stripe-Signature"), want)
			}
			if err := s.Verify([]Secret{keys[(i+1)%len(keys)], key}, h, body, now, DefaultTolerance); err != nil {
				t.Fatalf("round %d key %d: %v", round, i, err)
			}
			if err := s.Verify([]Secret{keys[(i+1)%len(keys)]}, h, body, now, DefaultTolerance); err == nil {
				t.Fatalf("round %d key %d: verified with another key", round, i)
			}
		}
	}
}
