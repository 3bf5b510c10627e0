package consume

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// TestRoutedCopy: a route's copy has the record's headers in their order,
// no held sequence, and its route last (once), as a full copy given
// setRoute and setHeld(0) had; the record itself is left as it was.
func TestRoutedCopy(t *testing.T) {
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	cases := []struct {
		name  string
		in    []kgo.RecordHeader
		route string
	}{
		{"raw record", []kgo.RecordHeader{h(headers.Provider, "p"), h(headers.Attempt, "1")}, "r1"},
		{"from a lane, held", []kgo.RecordHeader{h(headers.Provider, "p"), h(headers.Route, "old"), h(headers.Held, "3"), h(headers.Attempt, "2")}, "r2"},
		{"no route", []kgo.RecordHeader{h(headers.Route, "old"), h(headers.Held, "1"), h(headers.Provider, "p")}, ""},
		{"no headers", nil, "r1"},
	}
	eq := func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &kgo.Record{Topic: "raw", Key: []byte("k"), Value: []byte("v"), Headers: slices.Clone(c.in)}
			want := &kgo.Record{Headers: slices.Clone(c.in)}
			setRoute(want, c.route)
			setHeld(want, 0)

			got := routedCopy("dest", r, c.route)
			if got.Topic != "dest" || string(got.Key) != "k" || string(got.Value) != "v" {
				t.Errorf("copy %s/%s/%s, want dest/k/v", got.Topic, got.Key, got.Value)
			}
			if !slices.EqualFunc(got.Headers, want.Headers, eq) {
				t.Errorf("headers %v, want %v", got.Headers, want.Headers)
			}
			if !slices.EqualFunc(r.Headers, c.in, eq) {
				t.Errorf("the record's headers became %v, want %v", r.Headers, c.in)
			}
		})
	}
}
