package consume

import (
	"encoding/json"
	"testing"
)

// TestOutcomeJSONMatchesMarshal: appendJSON writes what json.Marshal writes,
// byte for byte, with every optional field set or empty and with strings
// that need escaping.
func TestOutcomeJSONMatchesMarshal(t *testing.T) {
	for _, o := range []Outcome{
		{},
		{Key: "stripe:evt_1", Provider: "stripe", EventType: "invoice.paid", Status: StatusDuplicate, Attempt: 1, Origin: "ingest",
			Time: "2026-03-01T12:00:00.000Z", Partition: 3, Offset: 1187},
		{Key: "k", Provider: "p", Status: StatusDead, Attempt: 7, Origin: "retry", DurationMS: 12, Error: "HTTP 500: \"boom\" <html> & \\ \n\t\x01",
			Time: "t", Tier: "1h", DeadReason: "exhausted", ReplayID: "dlq:1:2", Lane: "webhooks.lane.p", Partition: -1, Offset: -5},
		{Key: "calcom:BOOKING_CREATED:ü\u2028\xff", Provider: "gen", EventType: "a/b", Status: StatusParked, Lane: "x"},
	} {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, want)
		}
	}
}
