package e2e

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// TestLedgerCatchesEveryBrokenPromise feeds the ledger records that break
// each promise once and checks that each is counted, and that a clean key
// is not.
func TestLedgerCatchesEveryBrokenPromise(t *testing.T) {
	sys := &System{tb: t, Names: topics.NewNames("t.", []string{"1s"}), Dest: NewDestination(t)}
	l := &Ledger{sys: sys, accepted: map[string]int{}, keys: map[string]*account{}}
	outcome := func(key, status, origin, replayID string) *kgo.Record {
		extra := ""
		switch status {
		case "retrying":
			extra = `,"tier":"1s"`
		case "dead":
			extra = `,"dead_reason":"permanent"`
		}
		if replayID != "" {
			extra += fmt.Sprintf(`,"replay_id":%q`, replayID)
		}
		v := fmt.Sprintf(`{"key":%q,"provider":"stripe","event_type":"","status":%q,"attempt":1,"origin":%q,"duration_ms":1,"time":"2026-11-23T10:00:00.000Z"%s}`,
			key, status, origin, extra)
		return &kgo.Record{Topic: sys.Names.Outcomes, Key: []byte(key), Value: []byte(v)}
	}
	dlq := func(key string) *kgo.Record {
		return &kgo.Record{Topic: sys.Names.DLQ, Key: []byte(key), Headers: []kgo.RecordHeader{{Key: headers.Origin, Value: []byte("ingest")}}}
	}
	call := func(key string) {
		req, _ := http.NewRequest(http.MethodPost, sys.Dest.URL(), strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	l.Accept("stripe:clean", "stripe:lost", "stripe:twice", "stripe:nodlq", "stripe:replayed", "stripe:replay-twice", "stripe:chatty", "stripe:dup", "stripe:nocall")
	recs := []*kgo.Record{
		outcome("stripe:clean", "retrying", "ingest", ""), outcome("stripe:clean", "done", "retry", ""),
		outcome("stripe:lost", "retrying", "ingest", ""),
		outcome("stripe:twice", "done", "ingest", ""), outcome("stripe:twice", "done", "ingest", ""),
		outcome("stripe:nodlq", "dead", "ingest", ""),
		// The replay met an open circuit, so it ended from the retry tier.
		outcome("stripe:replayed", "dead", "ingest", ""), dlq("stripe:replayed"),
		outcome("stripe:replayed", "retrying", "replay", "dlq:0:1"), outcome("stripe:replayed", "done", "retry", "dlq:0:1"),
		outcome("stripe:replay-twice", "dead", "ingest", ""), dlq("stripe:replay-twice"),
		outcome("stripe:replay-twice", "dead", "replay", "dlq:0:2"), dlq("stripe:replay-twice"),
		outcome("stripe:replay-twice", "dead", "replay", "dlq:0:2"), dlq("stripe:replay-twice"),
		outcome("stripe:chatty", "done", "ingest", ""),
		outcome("stripe:dup", "done", "ingest", ""), outcome("stripe:dup", "duplicate", "ingest", ""),
		outcome("stripe:unasked", "done", "ingest", ""),
		outcome("stripe:nocall", "done", "ingest", ""),
	}
	for _, r := range recs {
		l.add(t, r)
	}
	for _, k := range []string{"stripe:clean", "stripe:clean", "stripe:twice", "stripe:replayed", "stripe:replayed",
		"stripe:chatty", "stripe:chatty", "stripe:chatty", "stripe:dup", "stripe:unasked"} {
		call(k)
	}

	got := l.tally(SettleOptions{})
	want := Tally{
		Accepted: 9, Done: 6, Dead: 2, Duplicates: 1,
		Lost:    1, // stripe:lost: retrying, never ended
		Doubled: 2, // stripe:twice done twice; stripe:replay-twice ended twice under one replay id
		DLQ:     4,
		// stripe:nodlq is dead without an entry; stripe:replay-twice has
		// three entries for three dead outcomes, so it matches.
		DLQWrong:   1,
		Calls:      10,
		ExtraCalls: 2, // stripe:chatty: three calls for one processed record
		Uncalled:   1, // stripe:nocall is done, yet the destination never saw it
		Unasked:    1,
	}
	got.Examples = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tally\n got  %+v\n want %+v", got, want)
	}
	if !strings.Contains(got.String(), "lost=1 doubled=2") {
		t.Errorf("the one line does not carry the counts: %s", got)
	}
}
