package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/schemas"
)

// deadRecord is a DLQ record as the processor writes one, for tests that
// need many entries fast: produced straight to webhooks.dlq.
func deadRecord(topic, provider, id, reason string, at time.Time) *kgo.Record {
	key := provider + ":" + id
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: e2e.StripeEvent(id), Timestamp: at}
	for _, h := range [][2]string{
		{headers.Provider, provider},
		{headers.EventType, "invoice.paid"},
		{headers.IdempotencyKey, key},
		{headers.ReceivedAt, headers.FormatTime(at.Add(-time.Minute))},
		{headers.RequestID, "req-" + id},
		{headers.ContentType, "application/json"},
		{headers.Origin, headers.OriginIngest},
		{headers.Attempt, "1"},
		{headers.FirstSeenAt, headers.FormatTime(at.Add(-time.Minute))},
		{headers.DeadReason, reason},
		{headers.SourceTopic, "webhooks.raw"},
		{headers.SourcePartition, "0"},
		{headers.SourceOffset, "1"},
		{"http.stripe-signature", "t=1,v1=00"},
	} {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	headers.SetErrors(r, []headers.ErrorEntry{{Attempt: 1, At: at, Error: "destination: HTTP 400 Bad Request", Retryable: reason == headers.DeadExhausted}})
	return r
}

// produceDead writes records to the DLQ and returns them, in order, with
// their partitions and offsets set. The first record's headers are checked against
// the schema, so the fixture stays honest.
func produceDead(t *testing.T, sys *e2e.System, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	if err := schemas.ValidateHeaders(recs[0].Headers); err != nil {
		t.Fatalf("fixture headers: %v", err)
	}
	cl := kafkatest.Client(t, sys.Brokers)
	res := cl.ProduceSync(t.Context(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce to the DLQ: %v", err)
	}
	return recs // franz-go sets each record's partition and offset in place
}

// dead describes a DLQ entry for withEntries: dead-lettered ago before now.
type dead struct {
	provider, id, reason string
	ago                  time.Duration
}

// withEntries is a system whose topics exist and whose DLQ holds entries,
// returned in order with their partitions and offsets.
func withEntries(t *testing.T, entries ...dead) (*e2e.System, []*kgo.Record) {
	t.Helper()
	sys := e2e.New(t, e2e.Options{})
	sys.EnsureTopics()
	now := time.Now()
	recs := make([]*kgo.Record, len(entries))
	for i, d := range entries {
		recs[i] = deadRecord(sys.Names.DLQ, d.provider, d.id, d.reason, now.Add(-d.ago))
	}
	return sys, produceDead(t, sys, recs)
}

func refOf(r *kgo.Record) string { return fmt.Sprintf("%d:%d", r.Partition, r.Offset) }

// TestDryRunAndRate: 500 entries; a dry run produces nothing; --rate 50
// takes at least 9 s and marks every entry replayed.
func TestDryRunAndRate(t *testing.T) {
	skipShort(t)
	var entries []dead
	for i := 0; i < 500; i++ {
		d := dead{"stripe", fmt.Sprintf("evt_bulk_%d", i), headers.DeadPermanent, time.Duration(500-i) * time.Second}
		if i%2 == 1 {
			d.provider, d.reason = "outcomes", headers.DeadExhausted
		}
		entries = append(entries, d)
	}
	sys, recs := withEntries(t, entries...)
	raw0 := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.Raw)
	status0 := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.DLQStatus)

	dry := sys.DLQ(asTester, "replay", "--all", "--dry-run", "--json").Want(t, 0).JSONLines(t)
	if len(dry) != 500 {
		t.Fatalf("dry run printed %d lines, want 500", len(dry))
	}
	for _, l := range dry {
		if l["dry_run"] != true || l["sent"] != false || l["error"] != nil {
			t.Fatalf("dry run line %v", l)
		}
	}
	if got := sys.DLQ(asTester, "replay", "--provider", "outcomes", "--reason", "exhausted", "--dry-run", "--json").Want(t, 0).JSONLines(t); len(got) != 250 {
		t.Fatalf("dry run of one provider printed %d lines, want 250", len(got))
	}
	// Entry i is (500-i) s old: half a second before entry 400 cuts off the newest 100.
	since := recs[400].Timestamp.Add(-500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	if got := sys.DLQ(nil, "replay", "--all", "--since", since, "--dry-run").Want(t, 0); strings.Count(got.Stdout, "would send") != 100 {
		t.Fatalf("dry run --since %s: %d entries, want 100", since, strings.Count(got.Stdout, "would send"))
	}
	if r, s := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.Raw), kafkatest.EndOffsets(t, sys.Brokers, sys.Names.DLQStatus); r != raw0 || s != status0 {
		t.Fatalf("dry runs produced: raw %d -> %d, dlq-status %d -> %d", raw0, r, status0, s)
	}

	run := sys.DLQ(asTester, "replay", "--all", "--rate", "50", "--json", "--progress").Want(t, 0)
	t.Logf("--rate 50 over 500 entries took %s", run.Took.Round(time.Millisecond))
	if run.Took < 9*time.Second {
		t.Fatalf("--rate 50 over 500 entries took %s, want at least 9s", run.Took)
	}
	lines := run.JSONLines(t)
	if len(lines) != 500 {
		t.Fatalf("replay printed %d lines, want 500", len(lines))
	}
	for _, l := range lines {
		if l["sent"] != true || l["resolved"] != true || l["error"] != nil {
			t.Fatalf("replay line %v", l)
		}
	}
	if !strings.Contains(run.Stderr, "ETA") || !strings.Contains(run.Stderr, "replay 500/500 100%") {
		t.Fatalf("no progress on stderr with --progress:\n%s", run.Stderr)
	}
	if r := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.Raw); r != raw0+500 {
		t.Fatalf("raw grew by %d, want 500", r-raw0)
	}
	res := statusRecords(t, sys, 500)
	if len(res) != 500 {
		t.Fatalf("%d resolutions, want 500", len(res))
	}
	if got := sys.DLQ(nil, "list", "--unresolved", "--json").Want(t, 0).JSONLines(t); len(got) != 0 {
		t.Fatalf("%d entries still unresolved", len(got))
	}
	again := sys.DLQ(asTester, "replay", "--all", "--json").Want(t, 0)
	if again.Stdout != "" || !strings.Contains(again.Stderr, "nothing to replay") {
		t.Fatalf("replay --all after everything was replayed: %q %q", again.Stdout, again.Stderr)
	}
	st := sys.DLQ(nil, "stats", "--json").Want(t, 0).JSONLines(t)[0]
	byProvider := st["by_provider"].(map[string]any)
	if st["total"] != 500.0 || st["resolved"] != 500.0 || byProvider["outcomes"].(map[string]any)["total"] != 250.0 {
		t.Fatalf("stats: %v", st)
	}
	// Without --progress and with stderr not a terminal, no progress.
	quiet := sys.DLQ(asTester, "replay", "--key", "stripe:evt_bulk_0", "--include-resolved").Want(t, 0)
	if strings.Contains(quiet.Stderr, "ETA") || strings.Count(quiet.Stdout, "sent ") != 1 {
		t.Fatalf("replay without --progress: stdout %q stderr %q", quiet.Stdout, quiet.Stderr)
	}
}

// TestExitCodesAndJSON runs every command: 0 for what works, 2 for every
// kind of usage mistake and for refs that do not exist, 1 for a failure;
// every --json line parses, every resolution fits its schema.
func TestExitCodesAndJSON(t *testing.T) {
	skipShort(t)
	sys, recs := withEntries(t,
		dead{"stripe", "evt_a", headers.DeadPermanent, 3 * time.Hour},
		dead{"stripe", "evt_b", headers.DeadExhausted, 2 * time.Hour},
		dead{"outcomes", "evt_c", headers.DeadPermanent, time.Hour},
	)
	a, b, c := refOf(recs[0]), refOf(recs[1]), refOf(recs[2])
	missing := fmt.Sprintf("%d:%d", recs[0].Partition, recs[0].Offset+1000)
	noUser := map[string]string{"USER": ""}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		json int // JSON lines expected on stdout; -1: not JSON
		says string
	}{
		{[]string{"help"}, nil, 0, -1, "Exit codes"},
		{[]string{"help", "replay"}, nil, 0, -1, "usage: dlq replay"},
		{[]string{"list", "-h"}, nil, 0, -1, "--unresolved"},
		{[]string{"list"}, nil, 0, -1, "3 entries, 3 unresolved"},
		{[]string{"list", "--json"}, nil, 0, 3, ""},
		{[]string{"list", "--json", "--limit", "1"}, nil, 0, 1, ""},
		{[]string{"list", "--json", "--provider", "outcomes"}, nil, 0, 1, ""},
		{[]string{"list", "--json", "--reason", "exhausted"}, nil, 0, 1, ""},
		{[]string{"list", "--json", "--since", "150m"}, nil, 0, 2, ""},
		{[]string{"list", "--json", "--key", "stripe:evt_a"}, nil, 0, 1, ""},
		{[]string{"show", a}, nil, 0, -1, "Error history"},
		{[]string{"show", a, "--json"}, nil, 0, 1, ""},
		{[]string{"show", a, "--body"}, nil, 0, -1, `{"id":"evt_a"`},
		{[]string{"stats"}, nil, 0, -1, "3 unresolved"},
		{[]string{"stats", "--json"}, nil, 0, 1, ""},
		{[]string{"replay", b, "--dry-run", "--json"}, nil, 0, 1, ""},
		{[]string{"resolve", c, "--resolution", "ignored", "--note", "test event", "--json"}, asTester, 0, 1, ""},
		{[]string{"resolve", "--by", "alice", b, "--resolution", "manual_fix", "--note", "fixed by hand"}, noUser, 0, -1, "resolved manual_fix by alice"},
		{[]string{"replay", a, "--json"}, asTester, 0, 1, ""},
		{[]string{"list", "--json", "--unresolved"}, nil, 0, 0, ""},

		{[]string{}, nil, 2, -1, ""},
		{[]string{"bogus"}, nil, 2, -1, ""},
		{[]string{"list", "--bogus"}, nil, 2, -1, ""},
		{[]string{"list", "extra"}, nil, 2, -1, ""},
		{[]string{"list", "--limit", "-1"}, nil, 2, -1, ""},
		{[]string{"list", "--limit", "many"}, nil, 2, -1, ""},
		{[]string{"list", "--since", "yesterday"}, nil, 2, -1, ""},
		{[]string{"list", "--reason", "tired"}, nil, 2, -1, ""},
		{[]string{"show"}, nil, 2, -1, ""},
		{[]string{"show", a, b}, nil, 2, -1, ""},
		{[]string{"show", "1:x"}, nil, 2, -1, ""},
		{[]string{"show", "01:2"}, nil, 2, -1, ""},
		{[]string{"show", missing}, nil, 2, -1, "no such DLQ entry"},
		{[]string{"show", "99:0"}, nil, 2, -1, "no partition 99"},
		{[]string{"show", a, "--json", "--body"}, nil, 2, -1, ""},
		{[]string{"replay"}, asTester, 2, -1, ""},
		{[]string{"replay", a, "--all"}, asTester, 2, -1, ""},
		{[]string{"replay", "--all", "--provider", "stripe"}, asTester, 2, -1, ""},
		{[]string{"replay", missing}, asTester, 2, -1, "no such DLQ entry"},
		{[]string{"replay", a, missing}, asTester, 2, -1, ""},
		{[]string{"replay", "--all", "--rate", "0"}, asTester, 2, -1, ""},
		{[]string{"replay", "--all", "--rate", "fast"}, asTester, 2, -1, ""},
		{[]string{"replay", "--all", "--wait", "5s", "--dry-run"}, asTester, 2, -1, ""},
		{[]string{"replay", a}, noUser, 2, -1, "--by"},
		{[]string{"resolve", a}, asTester, 2, -1, ""},
		{[]string{"resolve", a, "--resolution", "replayed", "--note", "x"}, asTester, 2, -1, ""},
		{[]string{"resolve", a, "--resolution", "ignored"}, asTester, 2, -1, "--note"},
		{[]string{"resolve", missing, "--resolution", "ignored", "--note", "x"}, asTester, 2, -1, "no such DLQ entry"},
		{[]string{"trace"}, nil, 2, -1, "one key"},
		{[]string{"trace", "a", "b"}, nil, 2, -1, "one key"},
		{[]string{"trace", "stripe:evt_a", "--json"}, nil, 0, 3, ""}, // its DLQ entry, its replay above, then the trace
		{[]string{"trace", "stripe:evt_nobody"}, nil, 2, -1, "no record of this key"},
		{[]string{"help", "trace"}, nil, 0, -1, "HOOKLINE_TRACE_DIR"},
		{[]string{"parked", "extra"}, nil, 2, -1, ""},
		{[]string{"parked", "--limit", "-1"}, nil, 2, -1, ""},
		{[]string{"parked", "--json"}, nil, 0, 1, ""}, // nothing waits: the report alone
		{[]string{"serve"}, map[string]string{"HOOKLINE_ADMIN_ADDR": "0.0.0.0:0"}, 2, -1, "HOOKLINE_ADMIN_TOKEN"},
		{[]string{"serve"}, map[string]string{"HOOKLINE_ADMIN_ADDR": "127.0.0.1:0", "HOOKLINE_ADMIN_TOKEN": "short"}, 2, -1, "16"},

		{[]string{"list"}, map[string]string{"HOOKLINE_TOPIC_PREFIX": sys.Prefix + "nothing."}, 1, -1, "does not exist"},
		{[]string{"stats", "--json"}, map[string]string{"HOOKLINE_TOPIC_PREFIX": sys.Prefix + "nothing."}, 1, 0, "does not exist"},
	} {
		name := strings.Join(tc.args, " ")
		r := sys.DLQ(tc.env, tc.args...).Want(t, tc.code)
		if tc.json >= 0 {
			if got := r.JSONLines(t); len(got) != tc.json {
				t.Errorf("dlq %s: %d JSON lines, want %d:\n%s", name, len(got), tc.json, r.Stdout)
			}
		}
		if tc.says != "" && !strings.Contains(r.Stdout+r.Stderr, tc.says) {
			t.Errorf("dlq %s does not say %q:\nstdout:\n%s\nstderr:\n%s", name, tc.says, r.Stdout, r.Stderr)
		}
		if tc.code == 2 && tc.args != nil && len(tc.args) > 0 && r.Stderr == "" {
			t.Errorf("dlq %s exits 2 without saying why", name)
		}
	}
	res := statusRecords(t, sys, 3)
	for ref, want := range map[string]string{a: "replayed", b: "manual_fix", c: "ignored"} {
		if res[ref]["resolution"] != want {
			t.Errorf("resolution of %s: %v, want %s", ref, res[ref], want)
		}
	}
	if res[b]["by"] != "alice" || res[c]["by"] != "tester" || res[c]["note"] != "test event" {
		t.Errorf("resolutions: %v", res)
	}
}
