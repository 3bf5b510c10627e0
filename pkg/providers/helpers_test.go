package providers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers/signature"
)

// env is a fake environment for lookupEnv.
type env map[string]string

func (e env) lookup(name string) (string, bool) {
	v, ok := e[name]
	return v, ok
}

// mustParse parses a providers file against e, failing the test on error.
func mustParse(tb testing.TB, yml string, e env) *Registry {
	tb.Helper()
	r, err := Parse([]byte(yml), e.lookup)
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	return r
}

// mustGet returns the named provider of r.
func mustGet(tb testing.TB, r *Registry, name string) *Provider {
	tb.Helper()
	p, ok := r.Get(name)
	if !ok {
		tb.Fatalf("provider %q not in registry %v", name, r.Names())
	}
	return p
}

// events runs p.Events over body with the given headers set.
func events(p *Provider, headers map[string]string, body string) (Delivery, error) {
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	return p.Events(h, []byte(body))
}

// Secrets every provider of testRegistry is configured with, first then
// second (rotation).
const (
	testSecret1 = "s3cr3t-one-Zq8w"
	testSecret2 = "s3cr3t-two-Kp4x"
	// Standard Webhooks secrets are base64: these decode to testSecret1/2.
	testStdSecret1 = "whsec_czNjcjN0LW9uZS1acTh3"
	testStdSecret2 = "czNjcjN0LXR3by1LcDR4" // bare base64 is accepted too
)

// testYAML configures one provider per preset, each with two secrets, plus
// generic variants.
const testYAML = `
providers:
  stripe:     {preset: stripe,     secret_env: [S1, S2]}
  github:     {preset: github,     secret_env: [S1, S2]}
  shopify:    {preset: shopify,    secret_env: [S1, S2]}
  standard:   {preset: standard,   secret_env: [STD1, STD2]}
  slack:      {preset: slack,      secret_env: [S1, S2]}
  gocardless: {preset: gocardless, secret_env: [S1, S2]}
  calcom:     {preset: calcom,     secret_env: [S1, S2]}
  retell:     {preset: retell,     secret_env: [S1, S2]}
  acme:
    preset: generic
    secret_env: [S1, S2]
    signature: {header: X-Acme-Signature, algorithm: hmac-sha256, encoding: hex, prefix: "sha256="}
    idempotency_key: {header: X-Acme-Delivery}
    event_type: {json: /type}
  acme-json:
    preset: generic
    secret_env: [S1, S2]
    signature: {header: X-Acme-Signature, algorithm: hmac-sha512, encoding: base64}
    idempotency_key: {json: /data/id}
    event_type: {header: X-Acme-Event}
  acme-sha1:
    preset: generic
    secret_env: [S1, S2]
    signature: {header: X-Acme-Signature, algorithm: hmac-sha1, encoding: hex}
  open:
    preset: generic
    signature: {none: true}
`

func testEnv() env {
	return env{"S1": testSecret1, "S2": testSecret2, "STD1": testStdSecret1, "STD2": testStdSecret2}
}

func testRegistry(tb testing.TB) *Registry {
	tb.Helper()
	return mustParse(tb, testYAML, testEnv())
}

// reason returns a signature.Error's Reason, "" for nil, "other" otherwise.
func reason(err error) string {
	if err == nil {
		return ""
	}
	var se *signature.Error
	if errors.As(err, &se) {
		return se.Reason
	}
	return "other: " + err.Error()
}

// testNow is the clock of the round-trip tests.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hexMAC is hex(HMAC-SHA256(key, msg)), computed without this package.
func hexMAC(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}
