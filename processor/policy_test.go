package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestRetryPolicyAndKeys runs ingest, processor and retrier on a 1s,2s,3s
// schedule with providers of their own retry policy and a composite key:
//
//   - short (retry: {tiers: [2s]}): an always-failing delivery is called
//     twice, waits in webhooks.retry.2s only, and ends exhausted in the DLQ
//     with two errors;
//   - skip (retry: {tiers: [1s, 3s]}): called three times, through the 1s and
//     3s tiers, never 2s, then the DLQ with three errors;
//   - short has preset stripe, like the harness's stripe: the same event sent
//     to both gives two keys, each done once;
//   - calls keys on {json: [/call/call_id, /call/end_timestamp]}: one call id
//     with two end timestamps gives two keys, the same pair twice one done
//     and one duplicate, the same bytes twice a 202 duplicate from ingest
//     (its signature carries no timestamp: a replay), and a missing part is
//     a 400 naming it.
func TestRetryPolicyAndKeys(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1s,2s,3s", Providers: func(dest, secretEnv string) string {
		return fmt.Sprintf(`  short:
    preset: stripe
    secret_env: [%[2]s]
    retry: {tiers: [2s]}
    destination: {url: %[1]q, timeout: 5s}
  skip:
    preset: stripe
    secret_env: [%[2]s]
    retry: {tiers: [1s, 3s]}
    destination: {url: %[1]q, timeout: 5s}
  calls:
    preset: generic
    secret_env: [%[2]s]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: [/call/call_id, /call/end_timestamp]}
    destination: {url: %[1]q, timeout: 5s}
`, dest, secretEnv)
	}})
	sys.Dest.Behave(func(key string, call int) int {
		if key == "short:evt_fail" || key == "skip:evt_fail" {
			return 503
		}
		return 200
	})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	sys.StartRetrier(nil)

	callBody := func(id, end string) []byte {
		return []byte(fmt.Sprintf(`{"event":"call_ended","call":{"call_id":%q,"end_timestamp":%s}}`, id, end))
	}
	posts := []struct {
		provider string
		body     []byte
		wantKey  string
	}{
		{"short", e2e.StripeEvent("evt_fail"), "short:evt_fail"},
		{"skip", e2e.StripeEvent("evt_fail"), "skip:evt_fail"},
		{"stripe", e2e.StripeEvent("evt_same"), "stripe:evt_same"},
		{"short", e2e.StripeEvent("evt_same"), "short:evt_same"},
		{"calls", callBody("c_1", "1700000000100"), "calls:c_1:1700000000100"},
		{"calls", callBody("c_1", "1700000000200"), "calls:c_1:1700000000200"},
		// The same pair again in other bytes (a field more): the same key,
		// a duplicate outcome. (The same bytes again would be answered
		// duplicate by ingest's replay recognition, produced never: below.)
		{"calls", []byte(`{"event":"call_ended","call":{"call_id":"c_1","end_timestamp":1700000000100},"resent":true}`), "calls:c_1:1700000000100"},
	}
	for _, p := range posts {
		a, err := sys.Send(e2e.Event{Provider: p.provider, Body: p.body, Header: map[string][]string{"Content-Type": {"application/json"}}})
		if err != nil || a.Status != 202 || len(a.Keys) != 1 || a.Keys[0] != p.wantKey {
			t.Fatalf("post to %s: %d %v %v, want 202 with key %s", p.provider, a.Status, a.Keys, err, p.wantKey)
		}
	}
	if a, err := sys.Send(e2e.Event{Provider: "calls", Body: callBody("c_1", "1700000000100"), Header: map[string][]string{"Content-Type": {"application/json"}}}); err != nil || a.Status != 202 || !a.Duplicate {
		t.Fatalf("the first call's bytes again: %d duplicate=%v %v, want 202 duplicate (a replay: calls signs no timestamp)", a.Status, a.Duplicate, err)
	}
	a, err := sys.Send(e2e.Event{Provider: "calls", Body: []byte(`{"call":{"call_id":"c_2"}}`), Header: map[string][]string{"Content-Type": {"application/json"}}})
	if err != nil || a.Status != 400 || a.Error != "malformed_body" {
		t.Fatalf("call without end_timestamp: %d %q %v, want 400 malformed_body", a.Status, a.Error, err)
	}

	dlq := sys.Read(sys.Names.DLQ).Until(90*time.Second, "both failing keys in the DLQ", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	want := map[string]int{"short:evt_fail": 2, "skip:evt_fail": 3}
	for _, r := range dlq {
		n, ok := want[string(r.Key)]
		if !ok {
			t.Fatalf("unexpected DLQ record %s", r.Key)
		}
		es, _ := headers.GetErrors(r)
		if headers.Value(r, headers.DeadReason) != headers.DeadExhausted || len(es) != n {
			t.Errorf("%s: DLQ reason %q with %d errors, want exhausted with %d", r.Key, headers.Value(r, headers.DeadReason), len(es), n)
		}
		if c := sys.Dest.Calls(string(r.Key)); c != n {
			t.Errorf("%s: destination called %d times, want %d", r.Key, c, n)
		}
	}
	// Which tiers each failing key went through (every tier record was
	// written before its key's DLQ record).
	for i, tier := range []string{"1s", "2s", "3s"} {
		wantShort, wantSkip := 0, 0
		switch tier {
		case "1s", "3s":
			wantSkip = 1
		case "2s":
			wantShort = 1
		}
		got := map[string]int{}
		recs := sys.Read(sys.Names.Retry[i]).Until(10*time.Second, "tier "+tier, func(rs []*kgo.Record) bool { return len(rs) >= wantShort+wantSkip })
		for _, r := range recs {
			got[string(r.Key)]++
		}
		if got["short:evt_fail"] != wantShort || got["skip:evt_fail"] != wantSkip {
			t.Errorf("webhooks.retry.%s holds short %d and skip %d records, want %d and %d", tier, got["short:evt_fail"], got["skip:evt_fail"], wantShort, wantSkip)
		}
	}

	outcomes := sys.Read(sys.Names.Outcomes).Until(60*time.Second, "every outcome", func(rs []*kgo.Record) bool {
		done, dup := doneCount(t, rs)
		return len(done) >= 4 && len(dup) >= 1
	})
	done, dup := doneCount(t, outcomes)
	for _, k := range []string{"stripe:evt_same", "short:evt_same", "calls:c_1:1700000000100", "calls:c_1:1700000000200"} {
		if done[k] != 1 || sys.Dest.Calls(k) != 1 {
			t.Errorf("%s: done %d times, called %d times, want once each", k, done[k], sys.Dest.Calls(k))
		}
	}
	if dup["calls:c_1:1700000000100"] != 1 || len(dup) != 1 {
		t.Errorf("duplicates %v, want one, calls:c_1:1700000000100", dup)
	}
}

// TestRetryPolicyRefusedAtStart: a provider whose retry.tiers are not tiers
// of HOOKLINE_RETRY_TIERS stops the processor before it connects to Kafka,
// naming the provider and the allowed values.
func TestRetryPolicyRefusedAtStart(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(pf, []byte("providers:\n  gh: {preset: github, secret_env: [GH], retry: {tiers: [5s]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOOKLINE_PROVIDERS": pf, "HOOKLINE_RETRY_TIERS": "1s,2s", "HOOKLINE_INSTANCE_ID": "p1",
		"HOOKLINE_STATE_DIR": t.TempDir(), "KAFKA_BROKERS": "127.0.0.1:1"}
	err := run(t.Context(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `provider "gh": retry.tiers: 5s is not a retry tier (want tiers of HOOKLINE_RETRY_TIERS=1s,2s, in that order)`) {
		t.Fatalf("run: %v, want the refused policy named", err)
	}
}
