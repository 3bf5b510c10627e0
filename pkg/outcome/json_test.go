package outcome

import (
	"encoding/json"
	"testing"
)

// TestOutcomeJSONMatchesMarshal: AppendJSON writes what json.Marshal writes,
// byte for byte, with every optional field set or empty and with strings
// that need escaping.
func TestOutcomeJSONMatchesMarshal(t *testing.T) {
	for _, o := range []Outcome{
		{},
		{Key: "stripe:evt_1", Provider: "stripe", EventType: "invoice.paid", Status: StatusDuplicate, Attempt: 1, Origin: "ingest",
			Time: "2026-03-01T12:00:00.000Z", Partition: 3, Offset: 1187},
		{Key: "k", Provider: "p", Status: StatusDead, Attempt: 7, Origin: "retry", DurationMS: 12, Error: "HTTP 500: \"boom\" <html> & \\ \n\t\x01",
			Time: "t", Tier: "1h", DeadReason: "exhausted", ReplayID: "dlq:1:2", Lane: "webhooks.lane.p", Route: "billing", ReplayOf: "p:<first>", Partition: -1, Offset: -5},
		{Key: "k", Provider: "p", Status: StatusDone, Route: "slack", Transform: "scripts/push-to-slack.js", TransformSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", TransformSkipped: true},
		{Key: "calcom:BOOKING_CREATED:ü\u2028\xff", Provider: "gen", EventType: "a/b", Status: StatusParked, Lane: "x"},
	} {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON\n got %s\nwant %s", got, want)
		}
	}
}

// TestDecode: Decode reads back what AppendJSON writes; a record without a
// position gives -1 for both; what is not JSON is an error.
func TestDecode(t *testing.T) {
	in := Outcome{Key: "stripe:evt_1", Provider: "stripe", EventType: "invoice.paid", Status: StatusRetrying, Attempt: 2, Origin: "retry",
		DurationMS: 31, Error: "HTTP 503", Time: "2026-03-01T12:00:00.000Z", Tier: "5m", Partition: 0, Offset: 0}
	got, err := Decode(in.AppendJSON(nil))
	if err != nil || got != in {
		t.Errorf("Decode(AppendJSON(o)) = %+v, %v; want %+v", got, err, in)
	}
	got, err = Decode([]byte(`{"key":"k","status":"done"}`))
	if err != nil || got.Partition != -1 || got.Offset != -1 || got.Key != "k" || got.Status != StatusDone {
		t.Errorf("without a position: %+v, %v; want key k, done, partition and offset -1", got, err)
	}
	if _, err := Decode([]byte(`{"key":`)); err == nil {
		t.Error("truncated JSON decodes")
	}
}

// TestSuppressed: ingest's outcome of a suppressed delivery reads back as
// one, with no position.
func TestSuppressed(t *testing.T) {
	b := Suppressed("github:b", "github", "org_block", "github:a", "2026-03-01T12:00:00.000Z")
	got, err := Decode(b)
	want := Outcome{Key: "github:b", Provider: "github", EventType: "org_block", Status: StatusSuppressed, Attempt: 1, Origin: "ingest",
		Time: "2026-03-01T12:00:00.000Z", ReplayOf: "github:a", Partition: -1, Offset: -1}
	if err != nil || got != want {
		t.Errorf("Decode(Suppressed(...)) = %+v, %v; want %+v\n%s", got, err, want, b)
	}
}
