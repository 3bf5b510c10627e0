package providers

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers/signature"
)

// TestRecognisesReplays: replays are recognised for the providers that sign
// no timestamp or leave a key or type header unsigned, decided from the
// scheme and the key rules, and the unsigned key headers are the ones each
// preset reads.
func TestRecognisesReplays(t *testing.T) {
	reg := testRegistry(t)
	composite := mustParse(t, `
providers:
  calls:
    preset: generic
    secret_env: [S1]
    signature: {header: X-Calls-Signature}
    idempotency_key: {json: [/call/id, /call/end]}
`, testEnv())
	for _, tc := range []struct {
		p        *Provider
		want     bool
		unsigned []string
	}{
		{mustGet(t, reg, "stripe"), false, nil},
		{mustGet(t, reg, "github"), true, []string{"X-GitHub-Delivery", "X-GitHub-Event"}},
		{mustGet(t, reg, "shopify"), true, []string{"X-Shopify-Webhook-Id", "X-Shopify-Topic"}},
		{mustGet(t, reg, "standard"), false, nil}, // webhook-id (or svix-id) is signed
		{mustGet(t, reg, "slack"), false, nil},
		{mustGet(t, reg, "gocardless"), true, nil}, // no timestamp
		{mustGet(t, reg, "calcom"), true, nil},
		{mustGet(t, reg, "acme"), true, []string{"X-Acme-Delivery", "Idempotency-Key"}},
		{mustGet(t, reg, "acme-json"), true, []string{"X-Acme-Event", "Idempotency-Key"}}, // a single JSON key falls back to the header
		{mustGet(t, reg, "acme-sha1"), true, []string{"Idempotency-Key"}},
		{mustGet(t, composite, "calls"), true, nil},                   // a composite key never falls back
		{mustGet(t, reg, "open"), false, []string{"Idempotency-Key"}}, // unsigned: nothing to recognise
		// A timestamped scheme whose key header it does not sign: a replay
		// within the tolerance could choose a new key.
		{&Provider{Name: "x", scheme: signature.Stripe(), keyHeaders: []string{"X-Event-Id"}}, true, []string{"X-Event-Id"}},
		{&Provider{Name: "y", scheme: signature.Standard(), keyHeaders: []string{"svix-id"}}, false, nil},
	} {
		if got := tc.p.RecognisesReplays(); got != tc.want {
			t.Errorf("%s: RecognisesReplays %t, want %t", tc.p.Name, got, tc.want)
		}
		if got := tc.p.unsignedKeyHeaders(); !slices.Equal(got, tc.unsigned) {
			t.Errorf("%s: unsigned key headers %q, want %q", tc.p.Name, got, tc.unsigned)
		}
	}
}

// TestSignedDigest: the digest follows what the signature authenticates:
// the same for a replay with new unsigned headers or a re-spelt signature,
// different for another body, another provider or another signed
// timestamp.
func TestSignedDigest(t *testing.T) {
	reg := testRegistry(t)
	github, stripe := mustGet(t, reg, "github"), mustGet(t, reg, "stripe")
	signed := func(p *Provider, body string, extra map[string]string, now int64) http.Header {
		h := http.Header{}
		for k, v := range extra {
			h.Set(k, v)
		}
		if err := p.Sign([]byte(body), testNow.Add(time.Duration(now)*time.Second), h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	digest := func(p *Provider, h http.Header, body string) [32]byte {
		t.Helper()
		if err := p.Verify(h, []byte(body), testNow); err != nil {
			t.Fatalf("%s: the request does not verify: %v", p.Name, err)
		}
		d, err := p.SignedDigest(h, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	body := `{"action":"opened"}`
	orig := signed(github, body, map[string]string{"X-GitHub-Delivery": "d-1", "X-GitHub-Event": "issues"}, 0)
	d0 := digest(github, orig, body)

	replay := orig.Clone()
	replay.Set("X-GitHub-Delivery", "d-2")
	replay.Set("X-GitHub-Event", "anything")
	replay.Set("Content-Type", "application/x-www-form-urlencoded")
	upper := orig.Clone() // hex decodes either case: the same signature
	upper.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(strings.TrimPrefix(orig.Get("X-Hub-Signature-256"), "sha256=")))
	if digest(github, replay, body) != d0 || digest(github, upper, body) != d0 {
		t.Error("a replay with new unsigned headers or a re-spelt signature has another digest")
	}
	other := `{"action":"closed"}`
	if digest(github, signed(github, other, nil, 0), other) == d0 {
		t.Error("another body has the same digest")
	}
	gh2 := &Provider{Name: "github-eu", scheme: github.scheme, secrets: github.secrets}
	if digest(gh2, orig, body) == d0 {
		t.Error("another provider with the same secret has the same digest")
	}
	sb := `{"id":"evt_1"}`
	if digest(stripe, signed(stripe, sb, nil, 0), sb) == digest(stripe, signed(stripe, sb, nil, 1), sb) {
		t.Error("stripe: two signed timestamps have one digest")
	}
	if _, err := github.SignedDigest(http.Header{}, []byte(body)); reason(err) != signature.ReasonMissing {
		t.Errorf("no signature header: %v, want missing", err)
	}
}

// TestReadmeReplayTable: the table of what each preset's signature
// authenticates (docs/providers.md) says "yes" for replay recognition
// exactly where RecognisesReplays does, and the default replay window it
// states is ReplayWindow's: "default **1h**" or "default: the event's
// dedup_ttl".
func TestReadmeReplayTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	reg := testRegistry(t)
	rows := map[string]*Provider{}
	for _, name := range Presets() {
		if name != PresetGeneric {
			rows["`"+name+"`"] = mustGet(t, reg, name)
		}
	}
	rows["`generic`"] = mustGet(t, reg, "acme")
	rows["`generic` unsigned"] = mustGet(t, reg, "open")
	seen := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| ") || !strings.HasSuffix(line, " |\n") {
			continue
		}
		p, ok := rows[strings.TrimPrefix(cells[0], "| ")]
		last := cells[len(cells)-1]
		if !ok || !(strings.HasPrefix(last, "**yes") || strings.HasPrefix(last, "no")) {
			continue
		}
		seen[cells[0]] = true
		if got := strings.HasPrefix(last, "**yes"); got != p.RecognisesReplays() {
			t.Errorf("docs/providers.md row %s says replays recognised: %t; RecognisesReplays: %t", cells[0], got, p.RecognisesReplays())
		}
		if !p.RecognisesReplays() {
			continue
		}
		hour := strings.Contains(last, "default **"+strings.TrimSuffix(DefaultReplayWindow.String(), "0m0s")+"**")
		ttl := strings.Contains(last, "`dedup_ttl`")
		switch w := p.ReplayWindow(); {
		case !hour && !ttl:
			t.Errorf("docs/providers.md row %s states no default replay window", cells[0])
		case hour != (w == DefaultReplayWindow):
			t.Errorf("docs/providers.md row %s says the default window is %s; ReplayWindow: %v", cells[0], map[bool]string{true: "1h", false: "the dedup_ttl"}[hour], w)
		case !hour && w != p.DedupTTL:
			t.Errorf("docs/providers.md row %s says the default window is the dedup_ttl; ReplayWindow: %v", cells[0], w)
		}
	}
	if len(seen) != len(rows) {
		t.Errorf("docs/providers.md's replay table has rows %v, want one for each of %d presets and unsigned generic", seen, len(rows))
	}
}
