package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPrettyBounded: a body is pretty-printed only while it nests at most
// MaxPrettyDepth deep and indents to at most MaxPrettyBytes; past either,
// Detail shows it as it is (issue 25: a 20 KB body nested 9,990 deep
// indented to 199.7 MB).
func TestPrettyBounded(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// A flat array of n elements: 2n bytes, indented 5n (3 more an element).
	flat := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]" }
	for _, tc := range []struct {
		name   string
		body   string
		pretty bool
	}{
		{"object", `{"a":{"b":[1,2,{"c":"x,y[z]{"}]}}`, true},
		{"escaped quote in a string", `{"a":"\"[[[[","b":1}`, true},
		{"depth at the limit", nest(MaxPrettyDepth), true},
		{"depth over the limit", nest(MaxPrettyDepth + 1), false},
		{"20 KB nested 9,990 deep", nest(9990), false},
		{"indented just under the size limit", flat(MaxPrettyBytes/5 - 2), true},
		{"indented over the size limit", flat(MaxPrettyBytes/5 + 2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.body)) {
				t.Fatal("the test's body is not JSON")
			}
			e := &Entry{Record: &kgo.Record{Value: []byte(tc.body)}}
			d := e.Detail()
			if !d.BodyJSON || d.Body != tc.body {
				t.Fatalf("body_json %t, body kept %t: want the exact body, marked JSON", d.BodyJSON, d.Body == tc.body)
			}
			if got := d.BodyPretty != ""; got != tc.pretty {
				t.Fatalf("pretty-printed %t, want %t (%d bytes in)", got, tc.pretty, len(tc.body))
			}
			if tc.pretty {
				var want bytes.Buffer
				_ = json.Indent(&want, []byte(tc.body), "", "  ")
				if d.BodyPretty != want.String() || len(d.BodyPretty) > MaxPrettyBytes {
					t.Fatalf("pretty body of %d bytes is not json.Indent's (%d)", len(d.BodyPretty), want.Len())
				}
			}
		})
	}
}
