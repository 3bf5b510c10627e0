package cli

import (
	"bytes"
	"testing"

	"github.com/hookline/hookline/dlq/internal/rules"
)

// TestPrintTransformed: the table form of what a route's transform would
// send, skip or fail with; nothing for a route without one.
func TestPrintTransformed(t *testing.T) {
	sha := "3d5f0c7b1f7d2c51c4e2a3a0d6f8e9b1a2c3d4e5f60718293a4b5c6d7e8f9012"
	for _, tc := range []struct {
		name string
		t    *rules.Transformed
		want string
	}{
		{"none", nil, ""},
		{"sends", &rules.Transformed{Script: "slack.js", SHA256: sha, Body: `{"text":"hi"}`, Headers: map[string]string{"x-team": "billing", "content-type": "application/json"}},
			"  route slack, transform slack.js (sha256:3d5f0c7b1f7d): sends\n    content-type: application/json\n    x-team: billing\n    {\"text\":\"hi\"}\n"},
		{"skips", &rules.Transformed{Script: "slack.js", SHA256: sha, Skip: true}, "  route slack, transform slack.js (sha256:3d5f0c7b1f7d): skips the event: nothing sent\n"},
		{"fails", &rules.Transformed{Script: "slack.js", SHA256: sha, Error: "transform slack.js: threw: Error: no\ninvoice"},
			"  route slack, transform slack.js (sha256:3d5f0c7b1f7d): fails, to the DLQ as transform_failed: transform slack.js: threw: Error: no invoice\n"},
	} {
		var b bytes.Buffer
		printTransformed(&b, rules.RouteResult{Route: "slack", Transformed: tc.t})
		if b.String() != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, b.String(), tc.want)
		}
	}
}
