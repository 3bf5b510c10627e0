package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers/signature"
	"github.com/hookline/hookline/pkg/retry"
)

// designExample is the providers file of DESIGN §5.
const designExample = `
providers:
  stripe:
    preset: stripe                  # stripe | github | shopify | standard | gocardless | calcom | generic
    secret_env: [STRIPE_WEBHOOK_SECRET]
    dedup_ttl: 720h
    destination: {url: "http://billing.internal/hooks/stripe", timeout: 10s}
  acme:
    preset: generic
    secret_env: [ACME_SECRET]
    signature: {header: X-Acme-Signature, algorithm: hmac-sha256, encoding: hex, prefix: "sha256="}
    idempotency_key: {header: X-Acme-Delivery}    # or {json: /id}
    event_type: {json: /type}
    rate_limit: {per_second: 200, burst: 400}
    destination: {url: "http://acme.internal/hooks", timeout: 5s}
  github:
    preset: github
    secret_env: GITHUB_SECRET
`

func TestParseDesignExample(t *testing.T) {
	r := mustParse(t, designExample, env{
		"STRIPE_WEBHOOK_SECRET": "whsec_stripe", "ACME_SECRET": "acme", "GITHUB_SECRET": "gh",
	})
	if got, want := r.Names(), []string{"acme", "github", "stripe"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	if got := r.MaxDedupTTL(); got != 720*time.Hour {
		t.Fatalf("MaxDedupTTL = %v, want 720h", got)
	}
	stripe := mustGet(t, r, "stripe")
	if stripe.Preset != PresetStripe || stripe.DedupTTL != 720*time.Hour ||
		!reflect.DeepEqual(stripe.Destination, &Destination{URL: "http://billing.internal/hooks/stripe", Timeout: 10 * time.Second, AutoPauseAfter: DefaultAutoPauseAfter, TrialEvery: DefaultTrialEvery}) ||
		stripe.RateLimit != nil {
		t.Fatalf("stripe = %+v %+v %+v", stripe.DedupTTL, stripe.Destination, stripe.RateLimit)
	}
	acme := mustGet(t, r, "acme")
	if acme.DedupTTL != DefaultDedupTTL ||
		!reflect.DeepEqual(acme.Destination, &Destination{URL: "http://acme.internal/hooks", Timeout: 5 * time.Second, AutoPauseAfter: DefaultAutoPauseAfter, TrialEvery: DefaultTrialEvery}) ||
		!reflect.DeepEqual(acme.RateLimit, &RateLimit{PerSecond: 200, Burst: 400}) {
		t.Fatalf("acme = %v %+v %+v", acme.DedupTTL, acme.Destination, acme.RateLimit)
	}
	github := mustGet(t, r, "github")
	if github.Destination != nil || github.DedupTTL != DefaultDedupTTL {
		t.Fatalf("github defaults = %+v %v", github.Destination, github.DedupTTL)
	}
	if _, ok := r.Get("unknown"); ok {
		t.Fatal("Get(unknown) found a provider")
	}
	names := r.Names()
	names[0] = "changed"
	if r.Names()[0] != "acme" {
		t.Fatal("Names shares its slice with the registry")
	}
}

func TestParseDefaults(t *testing.T) {
	r := mustParse(t, `
providers:
  a: {preset: stripe, secret_env: [S1], destination: {url: "https://a.example/hook", rate_limit: {per_second: 50, burst: 5}}, rate_limit: {per_second: 2.5}}
`, testEnv())
	p := mustGet(t, r, "a")
	if rl := p.Destination.RateLimit; rl == nil || rl.PerSecond != 50 || rl.Burst != 5 {
		t.Fatalf("destination rate limit %+v, want 50/s burst 5", rl)
	}
	if p.Destination.Timeout != DefaultDestinationTimeout || p.RateLimit.Burst != 3 || p.tolerance != signature.DefaultTolerance {
		t.Fatalf("defaults: timeout %v burst %d tolerance %v", p.Destination.Timeout, p.RateLimit.Burst, p.tolerance)
	}
	if p.Destination.MaxInflight != 0 {
		t.Fatalf("default max_inflight %d, want 0 (the processor's HOOKLINE_MAX_INFLIGHT)", p.Destination.MaxInflight)
	}
	if r.MaxDedupTTL() != 168*time.Hour {
		t.Fatalf("MaxDedupTTL = %v, want 168h", r.MaxDedupTTL())
	}
}

// secretValues are the values of configErrorEnv: no error may contain one.
var configErrorEnv = env{
	"S1":        "topsecret-value-1",
	"EMPTY":     "",
	"BAD_STD":   "whsec_!!topsecret-not-base64!!",
	"EMPTY_STD": "whsec_",
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		yml  string
		want []string // substrings of the error
	}{
		{"unknown preset", `{providers: {pay: {preset: paypal, secret_env: [S1]}}}`, []string{`provider "pay"`, "preset", "paypal"}},
		{"missing preset", `{providers: {pay: {secret_env: [S1]}}}`, []string{`provider "pay"`, "preset: required"}},
		{"missing secret_env", `{providers: {gh: {preset: github}}}`, []string{`provider "gh"`, "secret_env: required"}},
		{"empty secret_env", `{providers: {gh: {preset: github, secret_env: []}}}`, []string{`provider "gh"`, "secret_env: required"}},
		{"unset env var", `{providers: {gh: {preset: github, secret_env: [S1, NOPE]}}}`, []string{`provider "gh"`, "secret_env", "NOPE", "not set"}},
		{"empty env var", `{providers: {gh: {preset: github, secret_env: [EMPTY]}}}`, []string{`provider "gh"`, "EMPTY", "empty"}},
		{"empty env var name", `{providers: {gh: {preset: github, secret_env: [""]}}}`, []string{`provider "gh"`, "secret_env"}},
		{"bad dedup_ttl", `{providers: {gh: {preset: github, secret_env: [S1], dedup_ttl: 7days}}}`, []string{`provider "gh"`, "dedup_ttl", "7days"}},
		{"dedup_ttl without unit", `{providers: {gh: {preset: github, secret_env: [S1], dedup_ttl: 3600}}}`, []string{`provider "gh"`, "dedup_ttl", "3600"}},
		{"negative dedup_ttl", `{providers: {gh: {preset: github, secret_env: [S1], dedup_ttl: -1h}}}`, []string{`provider "gh"`, "dedup_ttl", "positive"}},
		{"bad destination timeout", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "http://x/y", timeout: soon}}}}`, []string{`provider "gh"`, "destination.timeout", "soon"}},
		{"destination timeout too long", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "http://x/y", timeout: 11m}}}}`, []string{`provider "gh"`, "destination.timeout", "11m", "10m0s"}},
		{"destination max_inflight negative", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "http://x/y", max_inflight: -1}}}}`, []string{`provider "gh"`, "destination.max_inflight", "1 to 4096", "-1"}},
		{"unknown priority", `{providers: {gh: {preset: github, secret_env: [S1], priority: urgent}}}`, []string{`provider "gh"`, "priority", "critical, high, normal, low", `"urgent"`}},
		{"destination max_inflight too big", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "http://x/y", max_inflight: 5000}}}}`, []string{`provider "gh"`, "destination.max_inflight", "5000"}},
		{"destination without url", `{providers: {gh: {preset: github, secret_env: [S1], destination: {timeout: 5s}}}}`, []string{`provider "gh"`, "destination.url: required"}},
		{"destination url not a URL", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "::nope"}}}}`, []string{`provider "gh"`, "destination.url"}},
		{"destination url relative", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "/hooks"}}}}`, []string{`provider "gh"`, "destination.url", "/hooks"}},
		{"destination url ftp", `{providers: {gh: {preset: github, secret_env: [S1], destination: {url: "ftp://x/y"}}}}`, []string{`provider "gh"`, "destination.url"}},
		{"name with capitals", `{providers: {Stripe: {preset: stripe, secret_env: [S1]}}}`, []string{`provider "Stripe"`, "name must match"}},
		{"name starting with -", `{providers: {-x: {preset: stripe, secret_env: [S1]}}}`, []string{`provider "-x"`, "name must match"}},
		{"name with a slash", `{providers: {"a/b": {preset: stripe, secret_env: [S1]}}}`, []string{`provider "a/b"`, "name must match"}},
		{"name of 64 characters", `{providers: {` + strings.Repeat("a", 64) + `: {preset: stripe, secret_env: [S1]}}}`, []string{"name must match"}},
		{"generic without signature", `{providers: {acme: {preset: generic, secret_env: [S1]}}}`, []string{`provider "acme"`, "signature: required", "none: true"}},
		{"generic unsigned with a secret", `{providers: {acme: {preset: generic, secret_env: [S1], signature: {none: true}}}}`, []string{`provider "acme"`, "secret_env", "unsigned"}},
		{"generic none with a header", `{providers: {acme: {preset: generic, signature: {none: true, header: X-Sig}}}}`, []string{`provider "acme"`, "none: true cannot be combined"}},
		{"generic without signature header", `{providers: {acme: {preset: generic, secret_env: [S1], signature: {algorithm: hmac-sha256}}}}`, []string{`provider "acme"`, "signature.header: required"}},
		{"generic bad header name", `{providers: {acme: {preset: generic, secret_env: [S1], signature: {header: "X Sig"}}}}`, []string{`provider "acme"`, "signature.header"}},
		{"unknown algorithm", `{providers: {acme: {preset: generic, secret_env: [S1], signature: {header: X-Sig, algorithm: md5}}}}`, []string{`provider "acme"`, "signature.algorithm", "md5"}},
		{"unknown encoding", `{providers: {acme: {preset: generic, secret_env: [S1], signature: {header: X-Sig, encoding: base32}}}}`, []string{`provider "acme"`, "signature.encoding", "base32"}},
		{"retry without tiers", `{providers: {gh: {preset: github, secret_env: [S1], retry: {}}}}`, []string{`provider "gh"`, "retry.tiers: required"}},
		{"retry tier not a duration", `{providers: {gh: {preset: github, secret_env: [S1], retry: {tiers: [5m, soon]}}}}`, []string{`provider "gh"`, "retry.tiers", `"soon" is not a duration`}},
		{"retry tiers out of order", `{providers: {gh: {preset: github, secret_env: [S1], retry: {tiers: [1h, 5m]}}}}`, []string{`provider "gh"`, "retry.tiers", "5m is not longer than 1h"}},
		{"retry unknown field", `{providers: {gh: {preset: github, secret_env: [S1], retry: {tier: [5m]}}}}`, []string{`provider "gh"`, "unknown field tier"}},
		{"type rule with both", `{providers: {acme: {preset: generic, signature: {none: true}, event_type: {header: X-Type, json: /type}}}}`, []string{`provider "acme"`, "event_type", "one header or one json"}},
		{"type rule with a list", `{providers: {acme: {preset: generic, signature: {none: true}, event_type: {json: [/a, /b]}}}}`, []string{`provider "acme"`, "event_type", "only idempotency_key"}},
		{"composite key part twice", `{providers: {acme: {preset: generic, signature: {none: true}, idempotency_key: {json: [/id, /id]}}}}`, []string{`provider "acme"`, "idempotency_key", "json /id is listed twice"}},
		{"composite key bad pointer", `{providers: {acme: {preset: generic, signature: {none: true}, idempotency_key: {json: [/id, "x"]}}}}`, []string{`provider "acme"`, "idempotency_key.json", `"x"`}},
		{"composite key bad header", `{providers: {acme: {preset: generic, signature: {none: true}, idempotency_key: {json: /id, header: ["X Id"]}}}}`, []string{`provider "acme"`, "idempotency_key.header", `"X Id"`}},
		{"composite key of nine parts", `{providers: {acme: {preset: generic, signature: {none: true}, idempotency_key: {json: [/a, /b, /c, /d, /e, /f, /g, /h, /i]}}}}`, []string{`provider "acme"`, "idempotency_key", "9 parts, at most 8"}},
		{"key rule empty", `{providers: {acme: {preset: generic, signature: {none: true}, idempotency_key: {}}}}`, []string{`provider "acme"`, "idempotency_key"}},
		{"bad JSON pointer", `{providers: {acme: {preset: generic, signature: {none: true}, event_type: {json: "/a~2"}}}}`, []string{`provider "acme"`, "event_type.json"}},
		{"JSON pointer without slash", `{providers: {acme: {preset: generic, signature: {none: true}, idempotency_key: {json: id}}}}`, []string{`provider "acme"`, "idempotency_key.json"}},
		{"bad standard secret", `{providers: {std: {preset: standard, secret_env: [BAD_STD]}}}`, []string{`provider "std"`, "BAD_STD", "whsec_<base64>"}},
		{"empty standard secret", `{providers: {std: {preset: standard, secret_env: [EMPTY_STD]}}}`, []string{`provider "std"`, "EMPTY_STD"}},
		{"signature on a preset", `{providers: {s: {preset: stripe, secret_env: [S1], signature: {header: X}}}}`, []string{`provider "s"`, "signature: only a generic provider"}},
		{"idempotency_key on a preset", `{providers: {s: {preset: stripe, secret_env: [S1], idempotency_key: {json: /x}}}}`, []string{`provider "s"`, "idempotency_key: only a generic provider"}},
		{"tolerance on an untimed preset", `{providers: {gh: {preset: github, secret_env: [S1], tolerance: 1m}}}`, []string{`provider "gh"`, "tolerance", "signs no timestamp"}},
		{"bad tolerance", `{providers: {s: {preset: stripe, secret_env: [S1], tolerance: 5 minutes}}}`, []string{`provider "s"`, "tolerance", "5 minutes"}},
		{"rate limit of zero", `{providers: {s: {preset: stripe, secret_env: [S1], rate_limit: {per_second: 0}}}}`, []string{`provider "s"`, "rate_limit.per_second"}},
		{"destination rate limit of zero", `{providers: {s: {preset: stripe, secret_env: [S1], destination: {url: "http://x/", rate_limit: {per_second: 0}}}}}`, []string{`provider "s"`, "destination.rate_limit.per_second"}},
		{"negative burst", `{providers: {s: {preset: stripe, secret_env: [S1], rate_limit: {per_second: 1, burst: -1}}}}`, []string{`provider "s"`, "rate_limit.burst"}},
		{"typo in a field", "providers:\n  stripe:\n    preset: stripe\n    secert_env: [S1]\n", []string{`provider "stripe"`, "line 4", "unknown field secert_env"}},
		{"typo in a nested field", "providers:\n  s:\n    preset: stripe\n    secret_env: [S1]\n    destination: {url: \"http://x/\", timout: 5s}\n", []string{`provider "s"`, "unknown field timout"}},
		{"typo at the top", "provider:\n  s: {preset: stripe}\n", []string{"unknown field provider"}},
		{"wrong type", "providers:\n  s:\n    preset: stripe\n    secret_env: [S1]\n    rate_limit: {per_second: fast}\n", []string{`provider "s"`, "line 5"}},
		{"empty block", "providers:\n  s:\n", []string{`provider "s"`, "empty block"}},
		{"no providers", "providers: {}\n", []string{"no providers"}},
		{"empty file", "", []string{"empty"}},
		{"not YAML", "providers: [\n", []string{"not valid YAML"}},
		{"several problems at once", `{providers: {a: {preset: paypal}, b: {preset: github, secret_env: [NOPE], dedup_ttl: x}}}`,
			[]string{`provider "a"`, `provider "b"`, "NOPE", "dedup_ttl"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yml), configErrorEnv.lookup)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.HasPrefix(tc.want[0], "provider ") {
				for line := range strings.SplitSeq(err.Error(), "\n") {
					if !strings.HasPrefix(line, "provider ") {
						t.Errorf("error line %q does not name its provider", line)
					}
				}
			}
			if strings.Contains(err.Error(), "takes no secret") && !strings.Contains(tc.yml, "none: true") {
				t.Errorf("error %q calls a provider unsigned that did not say so", err)
			}
			assertNoSecret(t, err.Error())
		})
	}
}

func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for name, v := range configErrorEnv {
		if len(v) > len("whsec_") && strings.Contains(s, strings.TrimPrefix(v, "whsec_")) {
			t.Fatalf("%q contains the value of %s", s, name)
		}
	}
	for _, v := range []string{testSecret1, testSecret2, testStdSecret1, testStdSecret2} {
		if strings.Contains(s, v) {
			t.Fatalf("%q contains a secret", s)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(path, []byte(testYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load(path, testEnv().lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Names()) != 12 {
		t.Fatalf("Names = %v", r.Names())
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), testEnv().lookup); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers: {x: {preset: nope}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, testEnv().lookup); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Load error = %v, want it to name the file", err)
	}
}

// TestSecretsAreRedacted prints a provider every way Go can and checks no
// secret appears.
func TestSecretsAreRedacted(t *testing.T) {
	r := testRegistry(t)
	for _, name := range r.Names() {
		p := mustGet(t, r, name)
		var logs bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, nil))
		log.Info("p", "provider", p, "value", *p, "secrets", p.secrets)
		js, _ := json.Marshal(p)
		ym, _ := yaml.Marshal(p.secrets)
		outs := []string{
			fmt.Sprint(p), fmt.Sprint(*p), fmt.Sprintf("%v %+v %#v %s %q %x %d", p, p, p, p, p, p, p),
			fmt.Sprintf("%v %+v %#v %s %x %d", *p, *p, *p, *p, *p, *p),
			fmt.Sprintf("%v %+v %#v %s %x %d %q", p.secrets, p.secrets, p.secrets, p.secrets, p.secrets, p.secrets, p.secrets),
			fmt.Sprintf("%v", []*Provider{p}), fmt.Sprintf("%+v", map[string]Provider{"x": *p}),
			fmt.Sprintf("%+v", r),
			logs.String(), string(js), string(ym), p.String(), p.GoString(),
		}
		for _, s := range outs {
			assertNoSecret(t, s)
			if strings.Contains(s, "115 51 99") { // "s3c" as decimal bytes
				t.Fatalf("%q shows secret bytes", s)
			}
		}
	}
}

func TestCheckContentType(t *testing.T) {
	r := testRegistry(t)
	cases := []struct {
		provider, ct string
		ok           bool
	}{
		{"stripe", "application/json", true},
		{"stripe", "application/json; charset=utf-8", true},
		{"stripe", "Application/JSON", true},
		{"stripe", "application/vnd.stripe+json", true},
		{"stripe", "application/x-www-form-urlencoded", false},
		{"stripe", "text/plain", false},
		{"stripe", "", false},
		{"stripe", "application/json; charset", false},
		{"github", "application/json", true},
		{"github", "application/x-www-form-urlencoded", true},
		{"github", "text/xml", false},
		{"shopify", "application/json", true},
		{"shopify", "text/plain", false},
		{"slack", "application/x-www-form-urlencoded", true},
		{"slack", "application/json", true},
		{"gocardless", "application/json", true},
		{"gocardless", "application/x-www-form-urlencoded", false},
		{"calcom", "application/json", true},
		{"standard", "text/plain", true},
		{"standard", "", true},
		{"open", "application/octet-stream", true},
		{"acme", "application/json", true}, // JSON event_type rule
		{"acme", "text/plain", false},
		{"acme-sha1", "text/plain", true}, // no JSON rule
	}
	for _, tc := range cases {
		t.Run(tc.provider+" "+tc.ct, func(t *testing.T) {
			err := mustGet(t, r, tc.provider).CheckContentType(tc.ct)
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckContentType = %v", err)
				}
				return
			}
			var ce *ContentTypeError
			if !errors.As(err, &ce) || ce.Got != tc.ct || len(ce.Want) == 0 {
				t.Fatalf("CheckContentType = %v, want a *ContentTypeError", err)
			}
		})
	}
}

func TestForwardHeaders(t *testing.T) {
	r := mustParse(t, testYAML+`
  leaky:
    preset: generic
    secret_env: [S1]
    signature: {header: Authorization, algorithm: hmac-sha256}
    idempotency_key: {header: Cookie}
    event_type: {header: X-Leaky-Type}
`, testEnv())
	h := http.Header{}
	for _, k := range []string{
		"Authorization", "Cookie", "Stripe-Signature", "User-Agent", "X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256",
		"X-GitHub-Hook-Id", "X-Shopify-Topic", "X-Shopify-Hmac-Sha256", "Webhook-Id", "Webhook-Signature", "Webhook-Timestamp",
		"X-Slack-Signature", "X-Slack-Retry-Num", "Origin", "X-Cal-Signature-256", "X-Acme-Signature", "X-Acme-Delivery",
		"X-Acme-Event", "Idempotency-Key", "X-Leaky-Type", "X-Unlisted",
	} {
		h.Set(k, "v-"+strings.ToLower(k))
	}
	h.Add("Stripe-Signature", "second value")
	cases := []struct {
		provider string
		want     []string
	}{
		{"stripe", []string{"stripe-signature"}},
		{"github", []string{"x-github-delivery", "x-github-event", "x-github-hook-id", "x-hub-signature-256", "user-agent"}},
		{"shopify", []string{"x-shopify-hmac-sha256", "x-shopify-topic"}},
		{"standard", []string{"webhook-id", "webhook-timestamp", "webhook-signature"}},
		{"slack", []string{"x-slack-signature", "x-slack-retry-num"}},
		{"gocardless", []string{"webhook-signature", "origin"}},
		{"calcom", []string{"x-cal-signature-256"}},
		{"acme", []string{"x-acme-signature", "x-acme-delivery", "idempotency-key"}},
		{"acme-json", []string{"x-acme-signature", "x-acme-event", "idempotency-key"}},
		{"open", []string{"idempotency-key"}},
		{"leaky", []string{"x-leaky-type", "idempotency-key"}},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			got := mustGet(t, r, tc.provider).ForwardHeaders(h)
			var names []string
			for _, hd := range got {
				names = append(names, hd.Name)
				if hd.Value != "v-"+hd.Name {
					t.Errorf("%s = %q, want its first value", hd.Name, hd.Value)
				}
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Fatalf("ForwardHeaders = %v, want %v", names, tc.want)
			}
			// The same, named for the record, after what dst held.
			var want []headers.Forwarded
			for _, hd := range got {
				want = append(want, headers.Forwarded{Key: headers.HTTPName(hd.Name), Value: hd.Value})
			}
			held := headers.Forwarded{Key: "http.held", Value: "x"}
			if app := mustGet(t, r, tc.provider).AppendForwarded([]headers.Forwarded{held}, h); !reflect.DeepEqual(app, append([]headers.Forwarded{held}, want...)) {
				t.Fatalf("AppendForwarded = %v, want %v after %v", app, want, held)
			}
		})
	}
	if got := mustGet(t, r, "stripe").AppendForwarded(nil, http.Header{}); len(got) != 0 {
		t.Fatalf("AppendForwarded(empty) = %v", got)
	}
	if got := mustGet(t, r, "stripe").ForwardHeaders(http.Header{}); len(got) != 0 {
		t.Fatalf("ForwardHeaders(empty) = %v", got)
	}
}

func TestLoadWithoutSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  s: {preset: stripe, secret_env: [UNSET_IN_THIS_TEST], dedup_ttl: 48h, destination: {url: \"http://x/\"}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, func(string) (string, bool) { return "", false }); err == nil {
		t.Fatal("Load with an unset secret variable did not fail")
	}
	r, err := LoadWithoutSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	p := mustGet(t, r, "s")
	if p.DedupTTL != 48*time.Hour || p.Destination == nil {
		t.Fatalf("provider read without secrets: %+v", p)
	}
	body := []byte(`{"id":"evt_1"}`)
	h := http.Header{}
	if err := Sign(PresetStripe, []byte("any"), body, time.Now(), h); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(h, body, time.Now()); err == nil {
		t.Fatal("a provider loaded without secrets verified a signature")
	}
}

func TestParseDestinationBudget(t *testing.T) {
	r := mustParse(t, `
providers:
  crm: {preset: stripe, secret_env: [S1], destination: {url: "https://crm.example/hook", timeout: 10m, max_inflight: 200}}
`, testEnv())
	d := mustGet(t, r, "crm").Destination
	if d.MaxInflight != 200 || d.Timeout != 10*time.Minute || d.Fixed {
		t.Fatalf("destination %+v, want max_inflight 200, timeout 10m, adaptive", d)
	}
	for _, tc := range []struct {
		adaptive string
		fixed    bool
	}{{"true", false}, {"false", true}} {
		r := mustParse(t, `
providers:
  crm: {preset: stripe, secret_env: [S1], destination: {url: "https://crm.example/hook", adaptive: `+tc.adaptive+`}}
`, testEnv())
		if got := mustGet(t, r, "crm").Destination.Fixed; got != tc.fixed {
			t.Errorf("adaptive: %s: Fixed %v, want %v", tc.adaptive, got, tc.fixed)
		}
	}
}

// TestParseAutoPauseAfter: destination.auto_pause_after and trial_every
// are durations, 0 for never, and 1h and 1m when left out; anything else
// is refused.
func TestParseAutoPauseAfter(t *testing.T) {
	pause := func(d *Destination) time.Duration { return d.AutoPauseAfter }
	trial := func(d *Destination) time.Duration { return d.TrialEvery }
	for _, tc := range []struct {
		field string
		of    func(*Destination) time.Duration
		want  time.Duration
		err   string
	}{
		{"", pause, DefaultAutoPauseAfter, ""},
		{", auto_pause_after: 5s", pause, 5 * time.Second, ""},
		{", auto_pause_after: 0", pause, 0, ""},
		{", auto_pause_after: -1m", pause, 0, "destination.auto_pause_after"},
		{", auto_pause_after: soon", pause, 0, "destination.auto_pause_after"},
		{"", trial, DefaultTrialEvery, ""},
		{", trial_every: 2s", trial, 2 * time.Second, ""},
		{", trial_every: 0", trial, 0, ""},
		{", trial_every: -1s", trial, 0, "destination.trial_every"},
		{", trial_every: often", trial, 0, "destination.trial_every"},
	} {
		src := `
providers:
  crm: {preset: stripe, secret_env: [S1], destination: {url: "https://crm.example/hook"` + tc.field + `}}
`
		if tc.err != "" {
			if _, err := Parse([]byte(src), testEnv().lookup); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one naming %s", tc.field, err, tc.err)
			}
			continue
		}
		if got := tc.of(mustGet(t, mustParse(t, src, testEnv()), "crm").Destination); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.field, got, tc.want)
		}
	}
}

// TestRetrySchedules: a route's retry.tiers (the route "default" has the
// provider-level ones) become the schedule restricted to them, keyed by
// RouteKey; a route without retry is left to the whole schedule; tiers: []
// is a schedule with no tier; tiers not in HOOKLINE_RETRY_TIERS are refused
// naming the provider, the route and the allowed values, a provider-level
// retry even when the provider has no destination.
func TestRetrySchedules(t *testing.T) {
	all, err := retry.ParseSchedule("1s,2s,3s")
	if err != nil {
		t.Fatal(err)
	}
	r := mustParse(t, `
providers:
  short: {preset: github, secret_env: [S1], retry: {tiers: [2s]}, destination: {url: "http://x/"}}
  skip:  {preset: github, secret_env: [S1], retry: {tiers: [1s, 3s]}, destination: {url: "http://x/"}}
  once:  {preset: github, secret_env: [S1], retry: {tiers: []}, destination: {url: "http://x/"}}
  every: {preset: github, secret_env: [S1], destination: {url: "http://x/"}}
  nowhere: {preset: github, secret_env: [S1], retry: {tiers: [2s]}}
  routed:
    preset: github
    secret_env: [S1]
    routes:
      a: {destination: {url: "http://x/"}, retry: {tiers: [3s]}}
      b: {destination: {url: "http://x/"}, retry: {tiers: []}}
      c: {destination: {topic: audit}}
`, testEnv())
	got, err := r.RetrySchedules(all)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{"short/default": {2}, "skip/default": {1, 3}, "once/default": {}, "routed/a": {3}, "routed/b": {}}
	if len(got) != len(want) {
		t.Fatalf("schedules for %v, want %v", got, want)
	}
	for key, w := range want {
		s, ok := got[key]
		if used := s.Used(); !ok || !slices.Equal(used, w) {
			t.Errorf("%s uses tiers %v (present %v), want %v", key, used, ok, w)
		}
	}
	if _, ok := got["once/default"].Route(1, retry.Decision{Retryable: true}); ok {
		t.Error("tiers: [] routes a retryable failure to a tier, want the DLQ at once")
	}
	bad := mustParse(t, `
providers:
  a: {preset: github, secret_env: [S1], retry: {tiers: [5s]}, destination: {url: "http://x/"}}
  b: {preset: github, secret_env: [S1], retry: {tiers: [1s]}, destination: {url: "http://x/"}}
  c: {preset: github, secret_env: [S1], retry: {tiers: [500ms, 2s]}}
  d:
    preset: github
    secret_env: [S1]
    routes:
      fine: {destination: {url: "http://x/"}, retry: {tiers: [2s]}}
      slow: {destination: {url: "http://x/"}, retry: {tiers: [1s, 9s]}}
`, testEnv())
	_, err = bad.RetrySchedules(all)
	for _, want := range []string{`provider "a": retry.tiers: 5s is not a retry tier`, `provider "c": retry.tiers: 500ms is not a retry tier`,
		`provider "d": route "slow": retry.tiers: 9s is not a retry tier`, "HOOKLINE_RETRY_TIERS=1s,2s,3s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	if err != nil && (strings.Contains(err.Error(), `provider "b"`) || strings.Contains(err.Error(), `route "fine"`)) {
		t.Errorf("error %v names provider b or route fine, whose tiers are fine", err)
	}
}

func TestParsePriority(t *testing.T) {
	r := mustParse(t, `
providers:
  pay: {preset: stripe, secret_env: [S1], priority: critical}
  bulk: {preset: github, secret_env: [S1], priority: low}
  plain: {preset: github, secret_env: [S1]}
`, testEnv())
	for name, want := range map[string]Priority{"pay": PriorityCritical, "bulk": PriorityLow, "plain": PriorityNormal} {
		if got := mustGet(t, r, name).Priority; got != want {
			t.Errorf("%s: priority %v, want %v", name, got, want)
		}
	}
}
