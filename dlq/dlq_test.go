package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/schemas"
)

// The acceptance tests run the real ingest, processor and dlq binaries
// against a real broker (KAFKA_BROKERS), each test on topics of its own.

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real binaries against a broker")
	}
}

var asTester = map[string]string{"USER": "tester"}

// failingPipeline runs ingest and a processor whose destination answers 400
// to everything, and reads the outcomes.
func failingPipeline(t *testing.T) (*e2e.System, *e2e.Reader) {
	t.Helper()
	sys := e2e.New(t, e2e.Options{})
	sys.Dest.Behave(func(string, int) int { return 400 })
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	return sys, sys.Read(sys.Names.Outcomes)
}

// deadLetter posts a stripe event whose destination answers 400 and waits
// for its DLQ record.
func deadLetter(t *testing.T, sys *e2e.System, id string) *kgo.Record {
	t.Helper()
	key := "stripe:" + id
	if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
		t.Fatalf("post %s: %d %v", id, code, err)
	}
	var rec *kgo.Record
	sys.Read(sys.Names.DLQ).Until(60*time.Second, key+" in the DLQ", func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if string(r.Key) == key {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// listed returns the `dlq list --json` line of ref, or nil.
func listed(t *testing.T, sys *e2e.System, ref string, args ...string) map[string]any {
	t.Helper()
	for _, e := range sys.DLQ(nil, append([]string{"list", "--json"}, args...)...).Want(t, 0).JSONLines(t) {
		if e["ref"] == ref {
			return e
		}
	}
	return nil
}

// outcomeOf waits for the outcome of the record at raw partition:offset.
func outcomeOf(t *testing.T, outcomes *e2e.Reader, replayID string, n int) []e2e.Outcome {
	t.Helper()
	var got []e2e.Outcome
	outcomes.Until(60*time.Second, fmt.Sprintf("%d outcomes of %s", n, replayID), func(rs []*kgo.Record) bool {
		got = got[:0]
		for _, r := range rs {
			var o struct {
				e2e.Outcome
				ReplayID string `json:"replay_id"`
			}
			if json.Unmarshal(r.Value, &o) == nil && o.ReplayID == replayID {
				if err := schemas.Validate(schemas.Outcome, r.Value); err != nil {
					t.Fatalf("outcome fails its schema: %v\n%s", err, r.Value)
				}
				got = append(got, o.Outcome)
			}
		}
		return len(got) >= n
	})
	return got
}

// statusRecords reads every resolution written so far, each validated
// against schemas/dlq-status.schema.json, latest per ref.
func statusRecords(t *testing.T, sys *e2e.System, atLeast int) map[string]map[string]any {
	t.Helper()
	recs := sys.Read(sys.Names.DLQStatus).Until(30*time.Second, fmt.Sprintf("%d resolutions", atLeast), func(rs []*kgo.Record) bool { return len(rs) >= atLeast })
	out := map[string]map[string]any{}
	for _, r := range recs {
		if err := schemas.Validate(schemas.DLQStatus, r.Value); err != nil {
			t.Fatalf("resolution %s fails its schema: %v\n%s", r.Key, err, r.Value)
		}
		var m map[string]any
		_ = json.Unmarshal(r.Value, &m)
		if m["ref"] != string(r.Key) {
			t.Fatalf("resolution keyed %s is for %v", r.Key, m["ref"])
		}
		out[string(r.Key)] = m
	}
	return out
}

// keptByDLQ are the headers dlq replay copies from the DLQ record.
var keptByDLQ = []string{headers.Provider, headers.EventType, headers.IdempotencyKey, headers.ReceivedAt, headers.RequestID,
	headers.ContentType, headers.Errors, headers.FirstSeenAt, "http.stripe-signature"}

// checkReplayRecord checks the replay of dead on webhooks.raw: exact key
// and body, replay headers, DLQ-only headers gone, the kept ones equal.
func checkReplayRecord(t *testing.T, sys *e2e.System, dead *kgo.Record, replayID string, kept []string) {
	t.Helper()
	var rep *kgo.Record
	sys.Read(sys.Names.Raw).Until(30*time.Second, "the replay on "+sys.Names.Raw, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if headers.Value(r, headers.ReplayID) == replayID {
				rep = r
				return true
			}
		}
		return false
	})
	if err := schemas.ValidateHeaders(rep.Headers); err != nil {
		t.Fatalf("replay headers fail the schema: %v", err)
	}
	// Same partitioner as ingest: the replay meets its key's state on the
	// partition the original was read from (else it would look new).
	if headers.Value(dead, headers.SourceTopic) != sys.Names.Raw || headers.Value(dead, headers.SourcePartition) != fmt.Sprint(rep.Partition) {
		t.Fatalf("replay landed on %s[%d]; the original was read from %s[%s]", sys.Names.Raw, rep.Partition,
			headers.Value(dead, headers.SourceTopic), headers.Value(dead, headers.SourcePartition))
	}
	if string(rep.Key) != string(dead.Key) || string(rep.Value) != string(dead.Value) {
		t.Fatalf("replay %s %q is not the DLQ record %s %q", rep.Key, rep.Value, dead.Key, dead.Value)
	}
	if headers.Value(rep, headers.Origin) != headers.OriginReplay || headers.Value(rep, headers.Attempt) != "1" {
		t.Fatalf("replay origin %q attempt %q", headers.Value(rep, headers.Origin), headers.Value(rep, headers.Attempt))
	}
	for _, h := range []string{headers.DeadReason, headers.DueAt, headers.SourceTopic, headers.SourcePartition, headers.SourceOffset} {
		if _, ok := headers.Get(rep, h); ok {
			t.Errorf("replay carries the DLQ-only header %s", h)
		}
	}
	for _, h := range kept {
		if headers.Value(rep, h) != headers.Value(dead, h) {
			t.Errorf("replay %s = %q, DLQ record has %q", h, headers.Value(rep, h), headers.Value(dead, h))
		}
	}
}

// TestReplayAfterPermanentFailure: a 400 sends the event to the DLQ as
// permanent; dlq list shows it; once the destination is fixed, dlq replay
// ends in a done outcome and marks the entry replayed; the same replay again
// is a duplicate and calls nobody.
func TestReplayAfterPermanentFailure(t *testing.T) {
	skipShort(t)
	sys, outcomes := failingPipeline(t)

	dead := deadLetter(t, sys, "evt_perm")
	ref := fmt.Sprintf("%d:%d", dead.Partition, dead.Offset)
	e := listed(t, sys, ref)
	if e == nil || e["reason"] != headers.DeadPermanent || e["key"] != "stripe:evt_perm" || e["resolution"] != nil {
		t.Fatalf("dlq list --json has %v for %s, want stripe:evt_perm, permanent, unresolved", e, ref)
	}
	if listed(t, sys, ref, "--unresolved", "--provider", "stripe", "--reason", "permanent", "--since", "10m") == nil {
		t.Fatalf("%s missing from the filtered list", ref)
	}
	show := sys.DLQ(nil, "show", ref, "--json").Want(t, 0).JSONLines(t)
	if len(show) != 1 || show[0]["body"] != string(dead.Value) || len(show[0]["errors"].([]any)) != 1 {
		t.Fatalf("dlq show --json: %v", show)
	}
	text := sys.DLQ(nil, "show", ref).Want(t, 0).Stdout
	for _, want := range []string{"Error history", "400", "\"id\": \"evt_perm\"", "permanent"} {
		if !strings.Contains(text, want) {
			t.Errorf("dlq show does not say %q:\n%s", want, text)
		}
	}
	if c := sys.Dest.Calls("stripe:evt_perm"); c != 1 {
		t.Fatalf("destination called %d times before the replay, want 1", c)
	}

	sys.Dest.Behave(func(string, int) int { return 200 }) // the fix
	replayID := "dlq:" + ref
	lines := sys.DLQ(asTester, "replay", ref, "--json", "--wait", "60s").Want(t, 0).JSONLines(t)
	if len(lines) != 1 || lines[0]["sent"] != true || lines[0]["replay_id"] != replayID || lines[0]["resolved"] != true || lines[0]["outcome"] != "done" {
		t.Fatalf("dlq replay --json: %v, want one sent, resolved line with outcome done", lines)
	}
	if got := outcomeOf(t, outcomes, replayID, 1); got[0].Status != "done" || got[0].Origin != headers.OriginReplay || got[0].Attempt != 1 {
		t.Fatalf("outcome of the replay: %+v, want done, origin replay, attempt 1", got[0])
	}
	if c := sys.Dest.Calls("stripe:evt_perm"); c != 2 {
		t.Fatalf("destination called %d times after the replay, want 2", c)
	}
	checkReplayRecord(t, sys, dead, replayID, keptByDLQ)
	res := statusRecords(t, sys, 1)[ref]
	if res["resolution"] != "replayed" || res["replay_id"] != replayID || res["by"] != "tester" {
		t.Fatalf("resolution of %s: %v", ref, res)
	}
	if e := listed(t, sys, ref); e == nil || e["resolution"].(map[string]any)["resolution"] != "replayed" {
		t.Fatalf("dlq list shows %v, want the replayed resolution", e)
	}
	if listed(t, sys, ref, "--unresolved") != nil {
		t.Fatalf("%s is still listed as unresolved", ref)
	}

	// The same replay again: a duplicate, and no call.
	lines = sys.DLQ(asTester, "replay", ref, "--json", "--wait", "60s").Want(t, 0).JSONLines(t)
	if len(lines) != 1 || lines[0]["outcome"] != "duplicate" || lines[0]["previous_resolution"] == nil {
		t.Fatalf("second replay: %v, want outcome duplicate with the previous resolution", lines)
	}
	if got := outcomeOf(t, outcomes, replayID, 2); got[1].Status != "duplicate" {
		t.Fatalf("second outcome of the replay: %+v, want duplicate", got[1])
	}
	if c := sys.Dest.Calls("stripe:evt_perm"); c != 2 {
		t.Fatalf("destination called %d times after replaying twice, want 2", c)
	}
	st := sys.DLQ(nil, "stats", "--json").Want(t, 0).JSONLines(t)
	if len(st) != 1 || st[0]["total"] != 1.0 || st[0]["resolved"] != 1.0 || st[0]["unresolved"] != 0.0 {
		t.Fatalf("dlq stats --json: %v", st)
	}
}

// TestReplayWithKcat: the kcat replay of docs/operating.md, run as written, is a
// replay to the processor: done once, then a duplicate; the resolution
// written with kcat is one dlq list understands.
func TestReplayWithKcat(t *testing.T) {
	skipShort(t)
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat): the kcat replay of the operator guide is not checked")
	}
	sys, outcomes := failingPipeline(t)
	dead := deadLetter(t, sys, "evt_kcat")
	sys.Dest.Behave(func(string, int) int { return 200 })

	ref := fmt.Sprintf("%d:%d", dead.Partition, dead.Offset)
	replayID := "dlq:" + ref
	body := filepath.Join(t.TempDir(), "body.json")
	broker := sys.Brokers[0]
	// As in the guide: the exact body from the DLQ, with kcat...
	out := runOut(t, kcat, "-C", "-b", broker, "-t", sys.Names.DLQ, "-p", fmt.Sprint(dead.Partition), "-o", fmt.Sprint(dead.Offset),
		"-c", "1", "-e", "-q", "-X", "isolation.level=read_committed", "-f", "%s")
	if out != string(dead.Value) {
		t.Fatalf("kcat read the body as %q, want %q", out, dead.Value)
	}
	if err := os.WriteFile(body, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	// ... and back to webhooks.raw with the headers the guide lists.
	h := func(name string) string { return name + "=" + headers.Value(dead, name) }
	args := []string{"-P", "-b", broker, "-t", sys.Names.Raw, "-X", "partitioner=murmur2_random", "-X", "enable.idempotence=true",
		"-k", string(dead.Key),
		"-H", h(headers.Provider), "-H", h(headers.EventType), "-H", h(headers.IdempotencyKey),
		"-H", h(headers.ReceivedAt), "-H", h(headers.RequestID), "-H", h(headers.ContentType),
		"-H", h(headers.FirstSeenAt), "-H", h("http.stripe-signature"),
		"-H", headers.Origin + "=replay", "-H", headers.Attempt + "=1", "-H", headers.ReplayID + "=" + replayID,
		body}
	run(t, kcat, args...)
	if got := outcomeOf(t, outcomes, replayID, 1); got[0].Status != "done" || got[0].Origin != headers.OriginReplay {
		t.Fatalf("outcome of the kcat replay: %+v, want done, origin replay", got[0])
	}
	checkReplayRecord(t, sys, dead, replayID, slices.DeleteFunc(slices.Clone(keptByDLQ), func(h string) bool { return h == headers.Errors }))
	if c := sys.Dest.Calls("stripe:evt_kcat"); c != 2 {
		t.Fatalf("destination called %d times after the kcat replay, want 2", c)
	}
	run(t, kcat, args...)
	if got := outcomeOf(t, outcomes, replayID, 2); got[1].Status != "duplicate" {
		t.Fatalf("second kcat replay: %+v, want duplicate", got[1])
	}
	if c := sys.Dest.Calls("stripe:evt_kcat"); c != 2 {
		t.Fatalf("destination called %d times after two kcat replays, want 2", c)
	}

	// The guide's resolution, written with kcat too.
	res := fmt.Sprintf(`{"ref":%q,"resolution":"replayed","note":"replayed with kcat","by":"tester","at":%q,"replay_id":%q}`,
		ref, headers.FormatTime(time.Now()), replayID)
	cmd := exec.Command(kcat, "-P", "-b", broker, "-t", sys.Names.DLQStatus, "-k", ref)
	cmd.Stdin = strings.NewReader(res + "\n")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat resolution: %v\n%s", err, b)
	}
	statusRecords(t, sys, 1)
	if listed(t, sys, ref, "--unresolved") != nil {
		t.Fatalf("%s still unresolved after the kcat resolution", ref)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	_ = runOut(t, name, args...)
}

func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

var _ = kafkatest.EndOffsets
