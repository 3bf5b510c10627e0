package providers

import (
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

// TestDedupTTLFor: dedup_ttl as one duration, or per event type with
// globs, the most specific entry winning and "*" (else 168h) for the rest;
// the registry's longest covers every entry (the changelog's retention).
func TestDedupTTLFor(t *testing.T) {
	reg := mustParse(t, `
providers:
  retell:
    preset: retell
    secret_env: [S1]
    dedup_ttl: {call_ended: 168h, call_analyzed: 72h}
  shop:
    preset: shopify
    secret_env: [S1]
    dedup_ttl: {"*": 48h, "orders/*": 240h, orders/paid: 12h, "orders/p*": 1h}
  plain:
    preset: github
    secret_env: [S1]
    dedup_ttl: 720h
  dflt: {preset: github, secret_env: [S1]}
`, testEnv())
	for _, tc := range []struct {
		provider, eventType string
		want                time.Duration
	}{
		{"retell", "call_ended", 7 * day},
		{"retell", "call_analyzed", 3 * day},
		{"retell", "call_started", DefaultDedupTTL}, // no "*": the default
		{"retell", "", DefaultDedupTTL},
		{"shop", "orders/paid", 12 * time.Hour}, // literal wins over longer globs
		{"shop", "orders/pending", time.Hour},   // "orders/p*" is more specific than "orders/*"
		{"shop", "orders/create", 10 * day},     // "orders/*"
		{"shop", "products/create", 2 * day},    // "*"
		{"shop", "", 2 * day},                   // a type-less event gets "*"
		{"plain", "issues", 30 * day},
		{"dflt", "issues", DefaultDedupTTL},
	} {
		if got := mustGet(t, reg, tc.provider).DedupTTLFor(tc.eventType); got != tc.want {
			t.Errorf("%s %q: DedupTTLFor = %v, want %v", tc.provider, tc.eventType, got, tc.want)
		}
	}
	for name, want := range map[string]time.Duration{"retell": 7 * day, "shop": 10 * day, "plain": 30 * day, "dflt": DefaultDedupTTL} {
		if got := mustGet(t, reg, name).MaxDedupTTL(); got != want {
			t.Errorf("%s: MaxDedupTTL = %v, want %v", name, got, want)
		}
	}
	if got := reg.MaxDedupTTL(); got != 30*day {
		t.Errorf("registry MaxDedupTTL = %v, want 720h", got)
	}
	// An override longer than every default still sets the changelog's
	// retention.
	long := mustParse(t, `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: {"*": 24h, call_ended: 1000h}}}}`, testEnv())
	if got := long.MaxDedupTTL(); got != 1000*time.Hour {
		t.Errorf("registry MaxDedupTTL with a long override = %v, want 1000h", got)
	}
}

// TestReplayWindow: replay_window's default per preset (an hour where a
// replay can carry another key, else the event's dedup TTL), a value set
// in the file, 0 for never, and where it cannot be set.
func TestReplayWindow(t *testing.T) {
	reg := testRegistry(t)
	set := mustParse(t, `
providers:
  gh: {preset: github, secret_env: [S1], replay_window: 10m}
  gh-off: {preset: github, secret_env: [S1], replay_window: "0"}
  gc: {preset: gocardless, secret_env: [S1], dedup_ttl: {"*": 48h, payments.*: 96h}}
`, testEnv())
	for _, tc := range []struct {
		p     *Provider
		types []string
		want  time.Duration
	}{
		{mustGet(t, reg, "github"), []string{"org_block"}, time.Hour}, // X-GitHub-Delivery unsigned
		{mustGet(t, reg, "shopify"), []string{"orders/paid"}, time.Hour},
		{mustGet(t, reg, "acme"), nil, time.Hour},      // header key
		{mustGet(t, reg, "acme-json"), nil, time.Hour}, // its Idempotency-Key fallback and type header are unsigned
		{mustGet(t, reg, "gocardless"), []string{"payments.confirmed"}, DefaultDedupTTL},
		{mustGet(t, reg, "calcom"), []string{"BOOKING_CREATED"}, DefaultDedupTTL},
		{mustGet(t, set, "gh"), []string{"org_block"}, 10 * time.Minute},
		{mustGet(t, set, "gh-off"), []string{"org_block"}, 0},
		{mustGet(t, set, "gc"), []string{"mandates.created"}, 2 * day},
		{mustGet(t, set, "gc"), []string{"mandates.created", "payments.paid_out"}, 4 * day}, // a batch: its longest
		{mustGet(t, set, "gc"), nil, 2 * day},
	} {
		if got := tc.p.ReplayWindow(tc.types...); got != tc.want {
			t.Errorf("%s %v: ReplayWindow = %v, want %v", tc.p.Name, tc.types, got, tc.want)
		}
	}
}

func TestTTLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yml string
		want      []string
	}{
		{"bad per-type TTL", `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: {call_ended: 7days}}}}`, []string{`provider "r"`, `dedup_ttl["call_ended"]`, "7days"}},
		{"negative per-type TTL", `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: {call_ended: -1h}}}}`, []string{`dedup_ttl["call_ended"]`, "positive"}},
		{"bad glob", `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: {"call_**": 1h}}}}`, []string{"dedup_ttl", "** is the same as *"}},
		{"empty mapping", `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: {}}}}`, []string{"dedup_ttl: empty mapping"}},
		{"a list", `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: [1h]}}}`, []string{"dedup_ttl: want a duration, or a mapping"}},
		{"nested value", `{providers: {r: {preset: retell, secret_env: [S1], dedup_ttl: {call_ended: {x: 1h}}}}}`, []string{`dedup_ttl["call_ended"]: want a duration`}},
		{"replay_window on a timestamped preset", `{providers: {s: {preset: stripe, secret_env: [S1], replay_window: 1h}}}`, []string{`provider "s"`, "replay_window", "signs a timestamp"}},
		{"replay_window unsigned", `{providers: {o: {preset: generic, signature: {none: true}, replay_window: 1h}}}`, []string{`provider "o"`, "replay_window", "signs nothing"}},
		{"replay_window not a duration", `{providers: {g: {preset: github, secret_env: [S1], replay_window: soon}}}`, []string{`provider "g"`, "replay_window", `"soon"`, "or 0"}},
		{"replay_window negative", `{providers: {g: {preset: github, secret_env: [S1], replay_window: -1m}}}`, []string{"replay_window", "positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yml), testEnv().lookup)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
