package providers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers/route"
)

// issueExample is the providers file of issue 22.
const issueExample = `
providers:
  stripe:
    preset: stripe
    secret_env: [STRIPE_WEBHOOK_SECRET]
    routes:
      billing:
        events: ["invoice.*", "payment_intent.succeeded"]
        where: {"/data/object/livemode": true}
        destination: {url: https://billing.internal/hooks, timeout: 60s, max_inflight: 16, rate_limit: {per_second: 50, burst: 50}}
        signing: {secret_env: [BILLING_SIGNING_SECRET, BILLING_SIGNING_SECRET_OLD]}
        priority: critical
        retry: {tiers: [1m, 5m]}
      crm:
        events: ["customer.*"]
        destination: {url: https://crm.internal/stripe}
        priority: low
      ledger:
        destination: {topic: billing.ledger}
`

// Signing secrets of the tests: whsec_ with base64, and bare base64 (the
// standard preset's decoding takes both).
const (
	testSigningKey1   = "billing-key-one"
	testSigningKey2   = "billing-key-two"
	testSigningEnvOne = "whsec_YmlsbGluZy1rZXktb25l" // billing-key-one
	testSigningEnvTwo = "YmlsbGluZy1rZXktdHdv"       // billing-key-two, bare base64
)

func routesEnv() env {
	return env{"STRIPE_WEBHOOK_SECRET": testSecret1, "BILLING_SIGNING_SECRET": testSigningEnvOne, "BILLING_SIGNING_SECRET_OLD": testSigningEnvTwo}
}

// mustParseFor parses yml as the processor loads it (signing secrets, not
// the verification ones).
func mustParseFor(tb testing.TB, yml string, e env) *Registry {
	tb.Helper()
	r, err := parse([]byte(yml), ".", e.lookup, signingSecrets)
	if err != nil {
		tb.Fatalf("parse for the processor: %v", err)
	}
	return r
}

func TestParseRoutes(t *testing.T) {
	r := mustParseFor(t, issueExample, routesEnv())
	p := mustGet(t, r, "stripe")
	if p.Destination != nil || p.Retry != nil || p.Priority != PriorityCritical {
		t.Fatalf("provider with routes: destination %v retry %v priority %v, want nil, nil, critical (the highest route's)", p.Destination, p.Retry, p.Priority)
	}
	if got := routeNames(p.Routes()); !slices.Equal(got, []string{"billing", "crm", "ledger"}) {
		t.Fatalf("Routes = %v, want billing, crm, ledger", got)
	}
	billing, ok := p.Route("billing")
	if !ok {
		t.Fatal("Route(billing) not found")
	}
	if !slices.Equal(billing.Events, []string{"invoice.*", "payment_intent.succeeded"}) || billing.Priority != PriorityCritical ||
		!reflect.DeepEqual(billing.Retry, &RetryPolicy{Tiers: []time.Duration{time.Minute, 5 * time.Minute}}) ||
		!reflect.DeepEqual(billing.Destination, &Destination{URL: "https://billing.internal/hooks", Timeout: time.Minute, MaxInflight: 16, RateLimit: &RateLimit{PerSecond: 50, Burst: 50}, AutoPauseAfter: DefaultAutoPauseAfter, TrialEvery: DefaultTrialEvery}) {
		t.Fatalf("billing = %+v %+v", billing, billing.Destination)
	}
	if s := billing.Signing; s == nil || !slices.Equal(s.Envs, []string{"BILLING_SIGNING_SECRET", "BILLING_SIGNING_SECRET_OLD"}) ||
		len(s.Secrets) != 2 || string(s.Secrets[0]) != testSigningKey1 || string(s.Secrets[1]) != testSigningKey2 {
		t.Fatalf("billing signing = %v, want both variables decoded in order", s)
	}
	crm, _ := p.Route("crm")
	if crm.Events == nil || crm.Priority != PriorityLow || crm.Retry != nil || crm.Signing != nil ||
		!reflect.DeepEqual(crm.Destination, &Destination{URL: "https://crm.internal/stripe", Timeout: DefaultDestinationTimeout, AutoPauseAfter: DefaultAutoPauseAfter, TrialEvery: DefaultTrialEvery}) {
		t.Fatalf("crm = %+v %+v", crm, crm.Destination)
	}
	ledger, _ := p.Route("ledger")
	if ledger.Events != nil || ledger.Priority != PriorityNormal || !reflect.DeepEqual(ledger.Destination, &Destination{Topic: "billing.ledger"}) {
		t.Fatalf("ledger = %+v %+v", ledger, ledger.Destination)
	}
	if _, ok := p.Route("default"); ok {
		t.Fatal("a provider with routes has a default route")
	}
	if _, ok := p.Route("zzz"); ok {
		t.Fatal("Route(zzz) found a route")
	}
	if got := route.Key("stripe", "billing"); got != "stripe/billing" {
		t.Fatalf("RouteKey = %q", got)
	}
}

// TestDefaultRoute: a provider-level destination is one route "default"
// matching every event, with the provider's destination, priority and
// retry; a provider with neither routes nor destination has no route.
func TestDefaultRoute(t *testing.T) {
	r := mustParse(t, `
providers:
  plain: {preset: stripe, secret_env: [S1], priority: high, retry: {tiers: [5m]}, destination: {url: "http://x/"}}
  once: {preset: stripe, secret_env: [S1], retry: {tiers: []}, destination: {topic: audit}}
  nowhere: {preset: stripe, secret_env: [S1], priority: low}
  named:
    preset: stripe
    secret_env: [S1]
    routes:
      default: {destination: {url: "http://y/"}}
`, testEnv())
	p := mustGet(t, r, "plain")
	rts := p.Routes()
	if len(rts) != 1 {
		t.Fatalf("Routes = %v, want one", routeNames(rts))
	}
	rt := rts[0]
	if rt.Name != route.Default || rt.Destination != p.Destination || rt.Retry != p.Retry || rt.Priority != PriorityHigh || rt.Events != nil || rt.Signing != nil {
		t.Fatalf("default route %+v, want the provider's destination, retry and priority", rt)
	}
	if got, ok := p.Route(route.Default); !ok || got != rt {
		t.Fatalf("Route(default) = %v, %v", got, ok)
	}
	for _, typ := range []string{"invoice.paid", "", "anything at all"} {
		if got := p.Match(route.Request{EventType: typ, Body: []byte("not json")}, nil); len(got) != 1 || got[0] != rt {
			t.Errorf("Match(%q) = %v, want the default route", typ, routeNames(got))
		}
	}
	once := mustGet(t, r, "once")
	if rt := once.Routes()[0]; rt.Retry == nil || len(rt.Retry.Tiers) != 0 || rt.Destination.Topic != "audit" {
		t.Fatalf("once's default route %+v, want a single attempt to topic audit", rt)
	}
	nowhere := mustGet(t, r, "nowhere")
	if nowhere.Routes() != nil || nowhere.Priority != PriorityLow {
		t.Fatalf("a provider without destination: Routes %v, priority %v", nowhere.Routes(), nowhere.Priority)
	}
	if got := nowhere.Match(route.Request{EventType: "x"}, nil); got != nil {
		t.Fatalf("Match on a provider that delivers nowhere = %v", got)
	}
	named := mustGet(t, r, "named")
	if rt, ok := named.Route(route.Default); !ok || rt.Destination.URL != "http://y/" {
		t.Fatalf("a route named default: %v %v", rt, ok)
	}
	if got := r.RouteTopics(); !slices.Equal(got, []string{"audit"}) {
		t.Fatalf("RouteTopics = %v", got)
	}
}

func TestRouteTopics(t *testing.T) {
	r := mustParse(t, `
providers:
  a:
    preset: stripe
    secret_env: [S1]
    routes:
      x: {destination: {topic: zeta}}
      y: {destination: {topic: alpha.events}}
      z: {destination: {url: "http://x/"}}
  b:
    preset: github
    secret_env: [S1]
    routes:
      same: {destination: {topic: zeta}}
  c: {preset: github, secret_env: [S1], destination: {topic: mid_topic}}
  d: {preset: github, secret_env: [S1], destination: {url: "http://x/"}}
`, testEnv())
	got := r.RouteTopics()
	if want := []string{"alpha.events", "mid_topic", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("RouteTopics = %v, want %v", got, want)
	}
	got[0] = "changed"
	if r.RouteTopics()[0] != "alpha.events" {
		t.Fatal("RouteTopics shares its slice with the registry")
	}
	if got := mustParse(t, testYAML, testEnv()).RouteTopics(); len(got) != 0 {
		t.Fatalf("RouteTopics without topic destinations = %v", got)
	}
}

func TestRouteErrors(t *testing.T) {
	const head = "providers:\n  s:\n    preset: stripe\n    secret_env: [S1]\n"
	route := func(body string) string { return head + "    routes:\n      r1:\n" + body }
	cases := []struct {
		name string
		yml  string
		want []string // substrings of the error
	}{
		{"routes beside destination", head + "    destination: {url: \"http://x/\"}\n    routes:\n      a: {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": destination: set beside routes`}},
		{"routes beside priority", head + "    priority: high\n    routes:\n      a: {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": priority: set beside routes`}},
		{"routes beside retry", head + "    retry: {tiers: [5m]}\n    routes:\n      a: {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": retry: set beside routes`}},
		{"no routes", head + "    routes: {}\n", []string{`provider "s": routes: empty`}},
		{"unknown field in a route", route("        destination: {url: \"http://x/\"}\n        evnts: [a]\n"),
			[]string{`provider "s": route "r1": line 8: unknown field evnts`}},
		{"unknown field in a route's destination", route("        destination: {url: \"http://x/\", timout: 5s}\n"),
			[]string{`provider "s": route "r1": line 7: unknown field timout`}},
		{"unknown field in signing", route("        destination: {url: \"http://x/\"}\n        signing: {secret: [X]}\n"),
			[]string{`provider "s": route "r1":`, "unknown field secret"}},
		{"route name used twice", route("        destination: {url: \"http://x/\"}\n      r1:\n        destination: {url: \"http://y/\"}\n"),
			[]string{`provider "s": route "r1": line 8: the route is defined twice (first at line 6)`}},
		{"empty events", route("        events: []\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": events: empty`}},
		{"empty glob", route("        events: [\"\"]\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": events: an entry is empty`}},
		{"double star", route("        events: [\"invoice.**\"]\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": events: "invoice.**": ** is the same as *`}},
		{"non-printable glob", route("        events: [\"inv\\x01*\"]\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": events:`, "can match no event type", "non-printable"}},
		{"glob too long", route("        events: [\"" + strings.Repeat("a", 257) + "\"]\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": events:`, "257 bytes"}},
		{"glob twice", route("        events: [\"a.*\", \"a.*\"]\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": events: "a.*" is listed twice`}},
		{"filter unknown operator", route("        filter:\n          body: {action: {$equals: closed}}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": filter: line 8:27: body/action: unknown operator "$equals"`}},
		{"filter wrong operand", route("        filter: {body: {n: {$gt: [1]}}}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": filter: line 7:34: body/n: $gt wants a number or a string`}},
		{"filter bad pointer", route("        filter: {body: {\"/a~\": 1}}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": filter: line 7:25: body: JSON pointer "/a~": ~ must be followed by 0 or 1`}},
		{"filter beside otherwise", route("        otherwise: true\n        filter: {body: {a: 1}}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": filter: set beside otherwise: true`}},
		{"where pointer without slash", route("        where: {\"data/x\": 1}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": where: JSON pointer "data/x" must be empty or start with /`}},
		{"where pointer bad escape", route("        where: {\"/a~2\": 1}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": where: JSON pointer "/a~2": ~ must be followed by 0 or 1`}},
		{"where value not JSON", route("        where: {\"/a\": .inf}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": where: "/a": .inf is not a number JSON can hold`}},
		{"where value with a key twice", route("        where: {\"/a\": {k: 1, k: 2}}\n        destination: {url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": where: "/a":`, `key "k" given twice`}},
		{"route name with capitals", head + "    routes:\n      Billing: {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": route "Billing": name must match ^[a-z0-9_-]{1,40}$`}},
		{"route name with a slash", head + "    routes:\n      \"a/b\": {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": route "a/b": name must match`}},
		{"route name of 41 characters", head + "    routes:\n      " + strings.Repeat("r", 41) + ": {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": route "` + strings.Repeat("r", 41) + `": name must match`}},
		{"route without destination", route("        priority: high\n"),
			[]string{`provider "s": route "r1": destination: required`}},
		{"empty route", head + "    routes:\n      r1:\n", []string{`provider "s": route "r1": empty block`}},
		{"route destination without url", route("        destination: {timeout: 5s}\n"),
			[]string{`provider "s": route "r1": destination.url: required`}},
		{"route destination bad url", route("        destination: {url: \"ftp://x/\"}\n"),
			[]string{`provider "s": route "r1": destination.url: "ftp://x/" is not an absolute http or https URL`}},
		{"topic with a url", route("        destination: {topic: t, url: \"http://x/\"}\n"),
			[]string{`provider "s": route "r1": destination.url: a topic destination takes no url`}},
		{"topic with a timeout", route("        destination: {topic: t, timeout: 5s}\n"),
			[]string{`provider "s": route "r1": destination.timeout: a topic destination takes no timeout`}},
		{"topic with max_inflight", route("        destination: {topic: t, max_inflight: 4}\n"),
			[]string{`provider "s": route "r1": destination.max_inflight: a topic destination takes no max_inflight`}},
		{"topic with adaptive", route("        destination: {topic: t, adaptive: false}\n"),
			[]string{`provider "s": route "r1": destination.adaptive: a topic destination takes no adaptive`}},
		{"topic with a rate limit", route("        destination: {topic: t, rate_limit: {per_second: 1}}\n"),
			[]string{`provider "s": route "r1": destination.rate_limit: a topic destination takes no rate_limit`}},
		{"internal topic", route("        destination: {topic: __consumer_offsets}\n"),
			[]string{`provider "s": route "r1": destination.topic: "__consumer_offsets": names starting with __ are Kafka's internal topics`}},
		{"topic dot", route("        destination: {topic: \".\"}\n"),
			[]string{`provider "s": route "r1": destination.topic: "." is not a name Kafka allows`}},
		{"topic dot dot", route("        destination: {topic: \"..\"}\n"),
			[]string{`provider "s": route "r1": destination.topic: ".." is not a name Kafka allows`}},
		{"topic with a space", route("        destination: {topic: \"a b\"}\n"),
			[]string{`provider "s": route "r1": destination.topic: "a b": a topic name takes letters`}},
		{"topic too long", route("        destination: {topic: " + strings.Repeat("t", 250) + "}\n"),
			[]string{`provider "s": route "r1": destination.topic:`, "250 characters, over Kafka's 249"}},
		{"provider-level topic with a url", head + "    destination: {topic: t, url: \"http://x/\"}\n",
			[]string{`provider "s": destination.url: a topic destination takes no url`}},
		{"signing on a topic route", route("        destination: {topic: t}\n        signing: {secret_env: [SIGN]}\n"),
			[]string{`provider "s": route "r1": signing: a topic destination takes no signing`}},
		{"signing without secret_env", route("        destination: {url: \"http://x/\"}\n        signing: {}\n"),
			[]string{`provider "s": route "r1": signing.secret_env: required`}},
		{"signing with an empty name", route("        destination: {url: \"http://x/\"}\n        signing: {secret_env: [\"\"]}\n"),
			[]string{`provider "s": route "r1": signing.secret_env: an entry is empty`}},
		{"route priority", route("        destination: {url: \"http://x/\"}\n        priority: urgent\n"),
			[]string{`provider "s": route "r1": priority: want one of critical, high, normal, low, got "urgent"`}},
		{"route retry without tiers", route("        destination: {url: \"http://x/\"}\n        retry: {}\n"),
			[]string{`provider "s": route "r1": retry.tiers: required`}},
		{"route retry out of order", route("        destination: {url: \"http://x/\"}\n        retry: {tiers: [5m, 1m]}\n"),
			[]string{`provider "s": route "r1": retry.tiers: 1m is not longer than 5m`}},
		{"route retry not a duration", route("        destination: {url: \"http://x/\"}\n        retry: {tiers: [soon]}\n"),
			[]string{`provider "s": route "r1": retry.tiers: "soon" is not a duration`}},
		{"several routes wrong at once", head + "    routes:\n      a: {events: []}\n      b: {destination: {topic: \"__x\"}}\n",
			[]string{`provider "s": route "a": events: empty`, `provider "s": route "a": destination: required`, `provider "s": route "b": destination.topic`}},
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
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, `provider "s": `) {
					t.Errorf("error line %q does not name its provider", line)
				}
			}
			assertNoSecret(t, err.Error())
		})
	}
}

// TestRetryTiersEmpty: retry: {tiers: []} is a single attempt, at the
// provider level as on a route (it was refused before routes).
func TestRetryTiersEmpty(t *testing.T) {
	r := mustParse(t, `
providers:
  p: {preset: stripe, secret_env: [S1], retry: {tiers: []}, destination: {url: "http://x/"}}
  q:
    preset: stripe
    secret_env: [S1]
    routes:
      once: {destination: {url: "http://x/"}, retry: {tiers: []}}
`, testEnv())
	for _, name := range []string{"p", "q"} {
		rt := mustGet(t, r, name).Routes()[0]
		if rt.Retry == nil || len(rt.Retry.Tiers) != 0 {
			t.Errorf("%s: retry %+v, want a policy with no tier", name, rt.Retry)
		}
	}
}

// matchYAML has routes of every kind of condition.
const matchYAML = `
providers:
  s:
    preset: stripe
    secret_env: [S1]
    routes:
      all: {destination: {topic: audit}}
      invoices: {events: ["invoice.*"], destination: {url: "http://x/"}}
      live:
        events: ["invoice.*", "payment_intent.succeeded"]
        where: {"/data/object/livemode": true}
        destination: {url: "http://x/"}
      eur:
        where: {"/data/object/currency": eur, "/data/object/amount": 100}
        destination: {url: "http://x/"}
      nested:
        where:
          "/data/items/1/tags": [a, {b: 1.0}]
          "/data/a~1b/c~0d": null
          "/data/when": 2024-01-01
        destination: {url: "http://x/"}
      object:
        where: {"/data/object/meta": {x: 1, y: [true, "2"]}}
        destination: {url: "http://x/"}
`

// checkMatch: p.Match gives the routes want, and each route's Matches
// agrees with it (a backfill of one route takes what Match gives it).
func checkMatch(t *testing.T, p *Provider, typ, body string, want []string) {
	t.Helper()
	got := routeNames(p.Match(route.Request{EventType: typ, Body: []byte(body)}, nil))
	if !slices.Equal(got, want) {
		t.Fatalf("Match = %v, want %v", got, want)
	}
	for _, rt := range p.Routes() {
		if m := rt.Matches(route.Request{EventType: typ, Body: []byte(body)}); m != slices.Contains(want, rt.Name) {
			t.Errorf("route %s: Matches = %v, disagrees with Match", rt.Name, m)
		}
	}
}

func TestMatch(t *testing.T) {
	p := mustGet(t, mustParse(t, matchYAML, testEnv()), "s")
	cases := []struct {
		name, typ, body string
		want            []string
	}{
		{"type only", "invoice.paid", `{}`, []string{"all", "invoices"}},
		{"live", "invoice.paid", `{"data":{"object":{"livemode":true}}}`, []string{"all", "invoices", "live"}},
		{"not live", "invoice.paid", `{"data":{"object":{"livemode":false}}}`, []string{"all", "invoices"}},
		{"live but \"true\" is a string", "invoice.paid", `{"data":{"object":{"livemode":"true"}}}`, []string{"all", "invoices"}},
		{"literal type", "payment_intent.succeeded", `{"data":{"object":{"livemode":true}}}`, []string{"all", "live"}},
		{"other type", "customer.created", `{"data":{"object":{"livemode":true}}}`, []string{"all"}},
		{"empty type matches only routes without events", "", `{"data":{"object":{"livemode":true}}}`, []string{"all"}},
		{"body not JSON", "invoice.paid", `not json`, []string{"all", "invoices"}},
		{"body with trailing data", "invoice.paid", `{"data":{"object":{"livemode":true}}} {}`, []string{"all", "invoices"}},
		{"body not UTF-8", "invoice.paid", "{\"data\":{\"object\":{\"livemode\":true}},\"x\":\"\xff\"}", []string{"all", "invoices"}},
		{"empty body", "invoice.paid", ``, []string{"all", "invoices"}},
		{"pointer into a non-object", "x", `{"data":{"object":7}}`, []string{"all"}},
		{"both conditions", "x", `{"data":{"object":{"currency":"eur","amount":100}}}`, []string{"all", "eur"}},
		{"1.0 equals 1", "x", `{"data":{"object":{"currency":"eur","amount":100.0}}}`, []string{"all", "eur"}},
		{"1e2 equals 100", "x", `{"data":{"object":{"currency":"eur","amount":1e2}}}`, []string{"all", "eur"}},
		{"100.5 is not 100", "x", `{"data":{"object":{"currency":"eur","amount":100.5}}}`, []string{"all"}},
		{"\"100\" is not 100", "x", `{"data":{"object":{"currency":"eur","amount":"100"}}}`, []string{"all"}},
		{"one condition missing", "x", `{"data":{"object":{"currency":"eur"}}}`, []string{"all"}},
		{"nested, escaped, null, timestamp as text", "x",
			`{"data":{"items":[0,{"tags":["a",{"b":1}]}],"a/b":{"c~d":null},"when":"2024-01-01"}}`, []string{"all", "nested"}},
		{"null is not missing", "x", `{"data":{"items":[0,{"tags":["a",{"b":1}]}],"a/b":{},"when":"2024-01-01"}}`, []string{"all"}},
		{"array order matters", "x", `{"data":{"items":[0,{"tags":[{"b":1},"a"]}],"a/b":{"c~d":null},"when":"2024-01-01"}}`, []string{"all"}},
		{"index past the end", "x", `{"data":{"items":[0],"a/b":{"c~d":null},"when":"2024-01-01"}}`, []string{"all"}},
		{"object in any order", "x", `{"data":{"object":{"meta":{"y":[true,"2"],"x":1.00}}}}`, []string{"all", "object"}},
		{"object with an extra member", "x", `{"data":{"object":{"meta":{"y":[true,"2"],"x":1,"z":0}}}}`, []string{"all"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkMatch(t, p, tc.typ, tc.body, tc.want) })
	}
	dst := make([]*Route, 1, 8)
	if got := p.Match(route.Request{EventType: "invoice.paid"}, dst); len(got) != 3 || got[0] != nil || got[1].Name != "all" {
		t.Fatalf("Match does not append to dst: %v", got)
	}
}

// otherwiseYAML has an otherwise route beside routes by events, by where
// and by both, a provider whose only route is its otherwise route, and one
// whose otherwise route is written otherwise: false (an ordinary route).
const otherwiseYAML = `
providers:
  s:
    preset: stripe
    secret_env: [S1]
    routes:
      invoices: {events: ["invoice.*"], destination: {url: "http://x/"}}
      live: {where: {"/livemode": true}, destination: {url: "http://x/"}}
      refunds: {events: [charge.refunded], where: {"/amount": 0}, destination: {topic: refunds}}
      rest: {otherwise: true, destination: {url: "http://rest/"}, priority: low}
  only:
    preset: stripe
    secret_env: [S1]
    routes:
      rest: {otherwise: true, destination: {url: "http://rest/"}}
  off:
    preset: stripe
    secret_env: [S1]
    routes:
      invoices: {events: ["invoice.*"], destination: {url: "http://x/"}}
      all: {otherwise: false, where: {"/livemode": true}, destination: {url: "http://x/"}}
`

// TestOtherwise: the otherwise route takes an event when no other route of
// its provider matches it, by events or where, whatever the body; never
// beside another route. Route.Matches agrees with Match (a backfill of the
// otherwise route takes exactly what Match gives it).
func TestOtherwise(t *testing.T) {
	r := mustParse(t, otherwiseYAML, testEnv())
	cases := []struct {
		provider, name, typ, body string
		want                      []string
	}{
		{"s", "by events", "invoice.paid", `{}`, []string{"invoices"}},
		{"s", "by where", "customer.created", `{"livemode":true}`, []string{"live"}},
		{"s", "by events and where", "invoice.paid", `{"livemode":true}`, []string{"invoices", "live"}},
		{"s", "events and where of one route", "charge.refunded", `{"amount":0}`, []string{"refunds"}},
		{"s", "its events but not its where", "charge.refunded", `{"amount":5}`, []string{"rest"}},
		{"s", "its where but not its events", "charge.captured", `{"amount":0}`, []string{"rest"}},
		{"s", "none matches", "customer.created", `{"livemode":false}`, []string{"rest"}},
		{"s", "no event type", "", `{}`, []string{"rest"}},
		{"s", "no event type, by where", "", `{"livemode":true}`, []string{"live"}},
		{"s", "body not JSON", "customer.created", `not json`, []string{"rest"}},
		{"only", "the only route takes everything", "customer.created", `not json`, []string{"rest"}},
		{"only", "even without a type", "", ``, []string{"rest"}},
		{"off", "otherwise: false is an ordinary route", "invoice.paid", `{"livemode":true}`, []string{"all", "invoices"}},
		{"off", "otherwise: false leaves the unmatched unrouted", "customer.created", `{}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.provider+" "+tc.name, func(t *testing.T) { checkMatch(t, mustGet(t, r, tc.provider), tc.typ, tc.body, tc.want) })
	}
	s := mustGet(t, r, "s")
	rest, _ := s.Route("rest")
	if !rest.Otherwise || rest.Events != nil || rest.Priority != PriorityLow || rest.Destination.URL != "http://rest/" {
		t.Errorf("rest = %+v, want the otherwise route, low, to http://rest/", rest)
	}
	if invoices, _ := s.Route("invoices"); invoices.Otherwise {
		t.Error("invoices is an otherwise route")
	}
	if all, _ := mustGet(t, r, "off").Route("all"); all.Otherwise {
		t.Error("otherwise: false made an otherwise route")
	}
	dst := make([]*Route, 1, 8)
	if got := s.Match(route.Request{EventType: "customer.created"}, dst); len(got) != 2 || got[0] != nil || got[1] != rest {
		t.Fatalf("Match does not append the otherwise route to dst: %v", got)
	}
}

// TestOtherwiseErrors: at most one otherwise route per provider, and it
// takes no events or where; each error names the provider and the routes.
func TestOtherwiseErrors(t *testing.T) {
	const head = "providers:\n  s:\n    preset: stripe\n    secret_env: [S1]\n    routes:\n"
	cases := []struct {
		name, routes string
		want         []string
	}{
		{"two", "      b: {otherwise: true, destination: {url: \"http://x/\"}}\n      a: {otherwise: true, destination: {url: \"http://x/\"}}\n      c: {destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": routes ["a" "b"]: each has otherwise: true; a provider has at most one otherwise route`}},
		{"with events", "      a: {otherwise: true, events: [x], destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": route "a": events: set beside otherwise: true`}},
		{"with where", "      a: {otherwise: true, where: {\"/x\": 1}, destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": route "a": where: set beside otherwise: true`}},
		{"not a boolean", "      a: {otherwise: yes please, destination: {url: \"http://x/\"}}\n",
			[]string{`provider "s": route "a": line 6:`, "yes please", "into bool"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tc.routes), configErrorEnv.lookup)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestMatchAllocs: routes without where cost no allocation to match.
func TestMatchAllocs(t *testing.T) {
	r := mustParse(t, issueExample+`
  plain: {preset: github, secret_env: [S1], destination: {url: "http://x/"}}
  typed:
    preset: github
    secret_env: [S1]
    routes:
      a: {events: ["invoice.*", "x*y*z"], destination: {url: "http://x/"}}
      b: {events: ["invoice.paid"], destination: {topic: t}}
  other:
    preset: github
    secret_env: [S1]
    routes:
      a: {events: ["invoice.*"], destination: {url: "http://x/"}}
      rest: {otherwise: true, destination: {url: "http://x/"}}
`, env{"STRIPE_WEBHOOK_SECRET": testSecret1, "S1": testSecret1})
	typed, plain := mustGet(t, r, "typed"), mustGet(t, r, "plain")
	crm, _ := mustGet(t, r, "stripe").Route("crm")
	other := mustGet(t, r, "other")
	rest, _ := other.Route("rest")
	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	dst := make([]*Route, 0, 4)
	if n := testing.AllocsPerRun(100, func() {
		dst = typed.Match(route.Request{EventType: "invoice.paid", Body: body}, dst[:0])
		dst = plain.Match(route.Request{EventType: "invoice.paid", Body: body}, dst[:0])
		_ = crm.Matches(route.Request{EventType: "customer.created", Body: body})
		dst = other.Match(route.Request{EventType: "customer.created", Body: body}, dst[:0])
		_ = rest.Matches(route.Request{EventType: "customer.created", Body: body})
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

// TestSecretsByService: Load (ingest) reads the verification secrets and
// not the signing ones; LoadForProcessor the signing ones and not the
// verification ones; LoadWithoutSecrets neither.
func TestSecretsByService(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(issueExample), 0o600); err != nil {
		t.Fatal(err)
	}
	only := func(keys ...string) func(string) (string, bool) {
		e := routesEnv()
		return func(k string) (string, bool) {
			if !slices.Contains(keys, k) {
				return "", false
			}
			return e.lookup(k)
		}
	}
	signing := func(tb testing.TB, r *Registry) *Signing {
		tb.Helper()
		rt, _ := mustGet(tb, r, "stripe").Route("billing")
		return rt.Signing
	}

	ing, err := Load(path, only("STRIPE_WEBHOOK_SECRET"))
	if err != nil {
		t.Fatalf("Load without the signing variables: %v", err)
	}
	if p := mustGet(t, ing, "stripe"); p.SecretCount() != 1 {
		t.Fatalf("Load: %d verification secrets, want 1", p.SecretCount())
	}
	if s := signing(t, ing); len(s.Secrets) != 0 || len(s.Envs) != 2 {
		t.Fatalf("Load read signing secrets: %v", s)
	}

	proc, err := LoadForProcessor(path, only("BILLING_SIGNING_SECRET", "BILLING_SIGNING_SECRET_OLD"))
	if err != nil {
		t.Fatalf("LoadForProcessor without the verification variable: %v", err)
	}
	if p := mustGet(t, proc, "stripe"); p.SecretCount() != 0 {
		t.Fatalf("LoadForProcessor read %d verification secrets", p.SecretCount())
	}
	if s := signing(t, proc); len(s.Secrets) != 2 || string(s.Secrets[0]) != testSigningKey1 {
		t.Fatalf("LoadForProcessor: signing %v, want both secrets", s)
	}

	for name, lookup := range map[string]func(string) (string, bool){
		"unset": only("BILLING_SIGNING_SECRET"),
		"empty": func(k string) (string, bool) {
			if k == "BILLING_SIGNING_SECRET_OLD" {
				return "", true
			}
			return routesEnv().lookup(k)
		},
		"not base64": func(k string) (string, bool) {
			if k == "BILLING_SIGNING_SECRET_OLD" {
				return "whsec_!!topsecret-not-base64!!", true
			}
			return routesEnv().lookup(k)
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadForProcessor(path, lookup)
			if err == nil || !strings.Contains(err.Error(), `provider "stripe": route "billing": signing.secret_env:`) ||
				!strings.Contains(err.Error(), "BILLING_SIGNING_SECRET_OLD") || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want it to name the file, provider, route and variable", err)
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Fatalf("error %q contains the value", err)
			}
		})
	}

	none, err := LoadWithoutSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	if mustGet(t, none, "stripe").SecretCount() != 0 || len(signing(t, none).Secrets) != 0 {
		t.Fatal("LoadWithoutSecrets read a secret")
	}
}

// TestSigningSecretsDecode: the signing secrets are the keys the standard
// preset takes from the same values: a Standard Webhooks signature made
// with each decoded key (as the spec defines it, computed here) verifies
// with a standard provider holding that value.
func TestSigningSecretsDecode(t *testing.T) {
	r := mustParseFor(t, issueExample, routesEnv())
	rt, _ := mustGet(t, r, "stripe").Route("billing")
	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	ts := fmt.Sprint(testNow.Unix())
	for i, v := range []string{testSigningEnvOne, testSigningEnvTwo} {
		m := hmac.New(sha256.New, rt.Signing.Secrets[i])
		m.Write([]byte("msg_1." + ts + "."))
		m.Write(body)
		h := http.Header{}
		h.Set("webhook-id", "msg_1")
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		std := mustGet(t, mustParse(t, "providers:\n  std: {preset: standard, secret_env: [K]}\n", env{"K": v}), "std")
		if err := std.Verify(h, body, testNow); err != nil {
			t.Errorf("secret %d: the standard preset refuses its signature: %v", i, err)
		}
	}
}

// TestSigningIsRedacted prints a Signing every way and checks neither the
// secrets nor their bytes appear.
func TestSigningIsRedacted(t *testing.T) {
	r := mustParseFor(t, issueExample, routesEnv())
	rt, _ := mustGet(t, r, "stripe").Route("billing")
	s := rt.Signing
	var logs strings.Builder
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("s", "signing", s, "value", *s, "route", rt)
	js, _ := json.Marshal(s)
	jr, _ := json.Marshal(rt)
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %x %d %q", s, s, s, s, s, s, s), fmt.Sprintf("%v %+v %#v %x", *s, *s, *s, *s),
		fmt.Sprintf("%+v", rt), fmt.Sprintf("%+v", *rt), logs.String(), string(js), string(jr),
	} {
		for _, secret := range []string{testSigningKey1, testSigningKey2, testSigningEnvOne, testSigningEnvTwo, "62 105 108"} {
			if strings.Contains(out, secret) {
				t.Fatalf("%q shows a signing secret", out)
			}
		}
		if strings.Contains(out, fmt.Sprint([]byte(testSigningKey1))[1:10]) {
			t.Fatalf("%q shows secret bytes", out)
		}
	}
}

// TestFilterHeadersForwarded: a header a route's filter reads is copied
// with the record (ForwardHeaders), whatever case the file writes it in,
// so the processor's RequestOf finds it; the preset's own list is left
// as it was.
func TestFilterHeadersForwarded(t *testing.T) {
	r := mustParse(t, `
providers:
  gh:
    preset: github
    secret_env: [S1]
    routes:
      a: {filter: {headers: {X-Team: core}}, destination: {url: "http://x/"}}
  plain: {preset: github, secret_env: [S1], destination: {url: "http://x/"}}
`, env{"S1": testSecret1})
	h := http.Header{}
	h.Set("X-Team", "core")
	h.Set("X-GitHub-Event", "push")
	var names []string
	for _, fh := range mustGet(t, r, "gh").ForwardHeaders(h) {
		names = append(names, fh.Name)
	}
	if !slices.Contains(names, "x-team") {
		t.Errorf("forwarded %v, want x-team among them", names)
	}
	if got := mustGet(t, r, "plain").ForwardHeaders(h); slices.ContainsFunc(got, func(fh Header) bool { return fh.Name == "x-team" }) {
		t.Errorf("a provider without the filter forwards %v", got)
	}
	rec := headers.IngestRecord("raw", "k", "push", []byte(`{}`), headers.IngestMeta{HTTP: []kgo.RecordHeader{{Key: "x-team", Value: []byte("core")}}})
	if got := mustGet(t, r, "gh").Match(RequestOf(rec), nil); len(got) != 1 {
		t.Errorf("the record with the copied header matched %v", got)
	}
}
