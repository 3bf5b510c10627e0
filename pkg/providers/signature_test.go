package providers

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers/signature"
)

// signedPresets describes, per provider of testYAML, the header carrying the
// signature, a value of it that cannot be parsed, and whether the scheme
// signs a timestamp.
var signedPresets = []struct {
	provider    string
	sigHeader   string
	malformed   string
	timestamped bool
	secret2     string // the second secret as it sits in the environment
}{
	{"stripe", "Stripe-Signature", "v1=abc", true, testSecret2},
	{"github", "X-Hub-Signature-256", "sha1=abcdef", false, testSecret2},
	{"shopify", "X-Shopify-Hmac-Sha256", "not base64!", false, testSecret2},
	{"standard", "Webhook-Signature", "v2,abc", true, testStdSecret2},
	{"slack", "X-Slack-Signature", "v0=zz", true, testSecret2},
	{"gocardless", "Webhook-Signature", "xyz", false, testSecret2},
	{"calcom", "X-Cal-Signature-256", "no-secret-provided", false, testSecret2},
	{"retell", "X-Retell-Signature", "v=1700000000000,d=zz", true, testSecret2},
	{"acme", "X-Acme-Signature", "md5=00", false, testSecret2},
	{"acme-json", "X-Acme-Signature", "@@@", false, testSecret2},
	{"acme-sha1", "X-Acme-Signature", "0g", false, testSecret2},
}

// roundTripCase builds a request (headers, body, clock) and names the
// Verify reason it must get.
type roundTripCase struct {
	name   string
	mutate func(t *testing.T) (http.Header, []byte, time.Time)
	want   string
}

// TestRoundTrip signs with (*Provider).Sign and checks Verify's answer for
// each way a request can be wrong.
func TestRoundTrip(t *testing.T) {
	r := testRegistry(t)
	body := []byte(`{"id":"evt_1","type":"x.y","events":[{"id":"EV1"}]}`)
	for _, sp := range signedPresets {
		p := mustGet(t, r, sp.provider)
		sign := func(t *testing.T, at time.Time) http.Header {
			t.Helper()
			h := http.Header{}
			if err := p.Sign(body, at, h); err != nil {
				t.Fatal(err)
			}
			return h
		}
		cases := []roundTripCase{
			{"valid", func(t *testing.T) (http.Header, []byte, time.Time) {
				return sign(t, testNow), body, testNow
			}, ""},
			{"tampered body", func(t *testing.T) (http.Header, []byte, time.Time) {
				return sign(t, testNow), append([]byte(`{"x":1,`), body[1:]...), testNow
			}, signature.ReasonMismatch},
			{"wrong secret", func(t *testing.T) (http.Header, []byte, time.Time) {
				h := http.Header{}
				other := mustProviderWithSecret(t, sp.provider, "a different secret")
				if err := other.Sign(body, testNow, h); err != nil {
					t.Fatal(err)
				}
				return h, body, testNow
			}, signature.ReasonMismatch},
			{"second secret (rotation)", func(t *testing.T) (http.Header, []byte, time.Time) {
				h := http.Header{}
				if sp.provider == "acme" || strings.HasPrefix(sp.provider, "acme-") {
					// Generic: sign with the provider's own config.
					cfg := genericSignatureConfigs[sp.provider]
					if err := signature.SignGeneric(cfg, []byte(sp.secret2), body, h); err != nil {
						t.Fatal(err)
					}
					return h, body, testNow
				}
				if err := Sign(p.Preset, []byte(sp.secret2), body, testNow, h); err != nil {
					t.Fatal(err)
				}
				return h, body, testNow
			}, ""},
			{"missing header", func(t *testing.T) (http.Header, []byte, time.Time) {
				h := sign(t, testNow)
				h.Del(sp.sigHeader)
				return h, body, testNow
			}, signature.ReasonMissing},
			{"malformed header", func(t *testing.T) (http.Header, []byte, time.Time) {
				h := sign(t, testNow)
				h.Set(sp.sigHeader, sp.malformed)
				return h, body, testNow
			}, signature.ReasonMalformed},
		}
		if sp.timestamped {
			cases = append(cases,
				roundTripCase{"stale (old)", func(t *testing.T) (http.Header, []byte, time.Time) {
					return sign(t, testNow.Add(-6*time.Minute)), body, testNow
				}, signature.ReasonStale},
				roundTripCase{"stale (future)", func(t *testing.T) (http.Header, []byte, time.Time) {
					return sign(t, testNow.Add(6*time.Minute)), body, testNow
				}, signature.ReasonStale},
				roundTripCase{"at the tolerance edge", func(t *testing.T) (http.Header, []byte, time.Time) {
					return sign(t, testNow.Add(-signature.DefaultTolerance)), body, testNow
				}, ""},
			)
		}
		for _, tc := range cases {
			t.Run(sp.provider+"/"+tc.name, func(t *testing.T) {
				h, b, now := tc.mutate(t)
				if got := reason(p.Verify(h, b, now)); got != tc.want {
					t.Fatalf("Verify reason = %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// genericSignatureConfigs mirrors the signature blocks of testYAML.
var genericSignatureConfigs = map[string]signature.Config{
	"acme":      {Header: "X-Acme-Signature", Algorithm: "hmac-sha256", Encoding: "hex", Prefix: "sha256="},
	"acme-json": {Header: "X-Acme-Signature", Algorithm: "hmac-sha512", Encoding: "base64"},
	"acme-sha1": {Header: "X-Acme-Signature", Algorithm: "hmac-sha1", Encoding: "hex"},
}

// mustProviderWithSecret is the provider of testYAML called name, configured
// with secret (raw, or for standard whsec_-encoded) instead.
func mustProviderWithSecret(tb testing.TB, name, raw string) *Provider {
	tb.Helper()
	e := testEnv()
	e["S1"], e["S2"] = raw, raw
	e["STD1"], e["STD2"] = "whsec_"+base64.StdEncoding.EncodeToString([]byte(raw)), "whsec_"+base64.StdEncoding.EncodeToString([]byte(raw))
	return mustGet(tb, mustParse(tb, testYAML, e), name)
}

func TestStripeHeaderVariants(t *testing.T) {
	p := mustGet(t, testRegistry(t), "stripe")
	body := []byte(`{"id":"evt_1"}`)
	good := http.Header{}
	if err := p.Sign(body, testNow, good); err != nil {
		t.Fatal(err)
	}
	ts, v1, _ := strings.Cut(strings.TrimPrefix(good.Get("Stripe-Signature"), "t="), ",v1=")
	bad := strings.Repeat("0", 64)
	cases := []struct {
		name, header, want string
	}{
		{"several v1, one good", "t=" + ts + ",v1=" + bad + ",v1=" + v1, ""},
		{"v0 and unknown schemes ignored", "t=" + ts + ",v0=" + bad + ",v9=zz,v1=" + v1, ""},
		{"spaces after commas", "t=" + ts + ", v1=" + v1, ""},
		{"only v0", "t=" + ts + ",v0=" + v1, signature.ReasonMalformed},
		{"no timestamp", "v1=" + v1, signature.ReasonMalformed},
		{"timestamp not a number", "t=abc,v1=" + v1, signature.ReasonMalformed},
		{"v1 not hex", "t=" + ts + ",v1=xyz", signature.ReasonMalformed},
		{"good v1 with another timestamp", "t=" + strconv.FormatInt(testNow.Unix()+1, 10) + ",v1=" + v1, signature.ReasonMismatch},
		// The timestamp is checked before the MAC (precheck, without the
		// body): a far one is stale, whatever the signature.
		{"timestamp far in the future", "t=" + strconv.FormatInt(math.MaxInt64, 10) + ",v1=" + v1, signature.ReasonStale},
		{"stale and a wrong signature", "t=" + strconv.FormatInt(testNow.Unix()-3600, 10) + ",v1=" + bad, signature.ReasonStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("Stripe-Signature", tc.header)
			if got := reason(p.Verify(h, body, testNow)); got != tc.want {
				t.Fatalf("reason = %q, want %q", got, tc.want)
			}
			// Without the body: what is wrong with the headers is found
			// (a mismatch needs the body).
			want := tc.want
			if want == signature.ReasonMismatch {
				want = ""
			}
			sig, err := p.CheckSignatureHeaders(h, testNow)
			if got := reason(err); got != want {
				t.Fatalf("CheckSignatureHeaders: reason = %q, want %q", got, want)
			}
			if err != nil {
				return
			}
			// Then the body against the headers as parsed: Verify's
			// verdict and message.
			verr, berr := p.Verify(h, body, testNow), p.VerifyBody(sig, body)
			if got := reason(berr); got != tc.want {
				t.Fatalf("VerifyBody: reason = %q, want %q", got, tc.want)
			}
			if fmt.Sprint(berr) != fmt.Sprint(verr) {
				t.Fatalf("VerifyBody: %v, Verify: %v", berr, verr)
			}
		})
	}
}

// TestFarFutureTimestampIsStale: a correctly signed timestamp at the far end
// of int64 must not slip through an overflowing distance computation.
func TestFarFutureTimestampIsStale(t *testing.T) {
	p := mustGet(t, testRegistry(t), "slack")
	body := []byte(`{}`)
	for _, ts := range []int64{math.MaxInt64, math.MinInt64, -1, 0} {
		t.Run(strconv.FormatInt(ts, 10), func(t *testing.T) {
			h := http.Header{}
			tsStr := strconv.FormatInt(ts, 10)
			h.Set("X-Slack-Request-Timestamp", tsStr)
			h.Set("X-Slack-Signature", "v0="+hexMAC(testSecret1, "v0:"+tsStr+":"+string(body)))
			if got := reason(p.Verify(h, body, testNow)); got != signature.ReasonStale {
				t.Fatalf("reason = %q, want stale", got)
			}
		})
	}
}

func TestStandardHeaderVariants(t *testing.T) {
	p := mustGet(t, testRegistry(t), "standard")
	body := []byte(`{"type":"user.created"}`)
	good := http.Header{}
	good.Set("Webhook-Id", "msg_1")
	if err := p.Sign(body, testNow, good); err != nil {
		t.Fatal(err)
	}
	sig := good.Get("Webhook-Signature")
	cases := []struct {
		name string
		set  map[string]string
		del  []string
		want string
	}{
		{"several signatures, space separated", map[string]string{"Webhook-Signature": "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,abc " + sig + " v1a,xyz"}, nil, ""},
		{"svix- headers", map[string]string{"Svix-Id": "msg_1", "Svix-Timestamp": good.Get("Webhook-Timestamp"), "Svix-Signature": sig},
			[]string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}, ""},
		{"missing id", nil, []string{"Webhook-Id"}, signature.ReasonMissing},
		{"missing timestamp", nil, []string{"Webhook-Timestamp"}, signature.ReasonMissing},
		{"other id", map[string]string{"Webhook-Id": "msg_2"}, nil, signature.ReasonMismatch},
		{"only other versions", map[string]string{"Webhook-Signature": "v1a,abc v2,def"}, nil, signature.ReasonMalformed},
		{"v1 not base64", map[string]string{"Webhook-Signature": "v1,@@@"}, nil, signature.ReasonMalformed},
		{"timestamp not a number", map[string]string{"Webhook-Timestamp": "soon"}, nil, signature.ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := good.Clone()
			for _, k := range tc.del {
				h.Del(k)
			}
			for k, v := range tc.set {
				h.Set(k, v)
			}
			if got := reason(p.Verify(h, body, testNow)); got != tc.want {
				t.Fatalf("reason = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("sign makes an id when none is given", func(t *testing.T) {
		h := http.Header{}
		if err := p.Sign(body, testNow, h); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Get("Webhook-Id"), "msg_") {
			t.Fatalf("Webhook-Id = %q", h.Get("Webhook-Id"))
		}
		if err := p.Verify(h, body, testNow); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSlackMissingTimestamp(t *testing.T) {
	p := mustGet(t, testRegistry(t), "slack")
	h := http.Header{}
	if err := p.Sign([]byte("{}"), testNow, h); err != nil {
		t.Fatal(err)
	}
	h.Del("X-Slack-Request-Timestamp")
	if got := reason(p.Verify(h, []byte("{}"), testNow)); got != signature.ReasonMissing {
		t.Fatalf("reason = %q, want missing", got)
	}
}

func TestConfiguredTolerance(t *testing.T) {
	r := mustParse(t, "providers:\n  s: {preset: stripe, secret_env: [S1], tolerance: 1m}\n", testEnv())
	p := mustGet(t, r, "s")
	for _, tc := range []struct {
		age  time.Duration
		want string
	}{{time.Minute, ""}, {61 * time.Second, signature.ReasonStale}, {-61 * time.Second, signature.ReasonStale}} {
		t.Run(tc.age.String(), func(t *testing.T) {
			h := http.Header{}
			if err := p.Sign([]byte("{}"), testNow.Add(-tc.age), h); err != nil {
				t.Fatal(err)
			}
			if got := reason(p.Verify(h, []byte("{}"), testNow)); got != tc.want {
				t.Fatalf("reason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUnsignedGeneric(t *testing.T) {
	p := mustGet(t, testRegistry(t), "open")
	if err := p.Verify(http.Header{}, []byte("anything"), testNow); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	h := http.Header{}
	if err := p.Sign([]byte("x"), testNow, h); err != nil || len(h) != 0 {
		t.Fatalf("Sign = %v, headers %v; want nothing", err, h)
	}
}

func TestSignErrors(t *testing.T) {
	cases := []struct {
		name, preset, secret string
	}{
		{"unknown preset", "paypal", "x"},
		{"generic needs its config", PresetGeneric, "x"},
		{"standard secret not base64", PresetStandard, "whsec_***"},
		{"empty secret", PresetGitHub, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Sign(tc.preset, []byte(tc.secret), []byte("{}"), testNow, http.Header{})
			if err == nil {
				t.Fatal("Sign succeeded")
			}
			if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
				t.Fatalf("error %q shows the secret", err)
			}
		})
	}
	if err := signature.SignGeneric(signature.Config{Header: "X-Sig", Algorithm: "md5"}, []byte("k"), nil, http.Header{}); err == nil {
		t.Fatal("SignGeneric with md5 succeeded")
	}
}

func TestSignatureErrorMessage(t *testing.T) {
	p := mustGet(t, testRegistry(t), "github")
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32))
	err := p.Verify(h, []byte("{}"), testNow)
	if err == nil {
		t.Fatal("verified")
	}
	for _, leak := range []string{testSecret1, testSecret2, strings.Repeat("ab", 32)} {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("error %q contains %q", err, leak)
		}
	}
}
