package api

import (
	"encoding/json"
	"testing"
)

// TestAcceptedJSON: the 202 body written without reflection is the bytes
// json.Marshal gives, escapes and omitted fields included.
func TestAcceptedJSON(t *testing.T) {
	for _, a := range []accepted{
		{Status: statusAccepted, IdempotencyKey: "stripe:evt_1", RequestID: "0123abcd"},
		{Status: statusAccepted, IdempotencyKeys: []string{"gocardless:EV1", "gocardless:EV2"}, RequestID: "r"},
		{Status: statusReplay, IdempotencyKey: "github:d2", ReplayOf: "github:d1", RequestID: "r"},
		{Status: statusDuplicate, IdempotencyKeys: []string{"k"}, ReplayOf: "k0", RequestID: `a"b\c<d>&e`},
		{Status: statusAccepted, IdempotencyKey: "stripe:évt\u2028\x7f", RequestID: ""},
		{Status: statusAccepted, IdempotencyKey: "stripe:\xff", RequestID: "x"},
	} {
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.appendJSON(nil); string(got) != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", a, got, want)
		}
	}
}
