package providers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers/transform"
)

// TestRouteTransform: a route's transform: is read relative to the
// providers file and compiled at load, with its bounds; what cannot run
// is refused naming the provider, the route and the file.
func TestRouteTransform(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"slack.js":  `function transform(r) { return {body: {text: r.body.ref}} }`,
		"syntax.js": `function transform(r) { return {body: }`,
		"none.js":   `function handler(r) { return r }`,
	} {
		if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "scripts", name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := func(route string) string {
		return "providers:\n  gh:\n    preset: generic\n    signature: {none: true}\n    routes:\n      slack:\n        destination: {url: \"http://x/\"}\n" + route
	}
	load := func(yml string) (*Registry, error) {
		path := filepath.Join(dir, "providers.yaml")
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadWithoutSecrets(path)
	}

	r, err := load(file("        transform: scripts/slack.js\n        transform_timeout: 50ms\n        transform_memory: 8MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := mustGet(t, r, "gh").Route("slack")
	if s := rt.Transform; s == nil || s.Path != "scripts/slack.js" || len(s.SHA256) != 64 || s.Limits != (transform.Limits{Timeout: 50 * time.Millisecond, Memory: 8 << 20}) {
		t.Fatalf("Transform = %+v; want scripts/slack.js, 50ms, 8MiB", s)
	}
	res, err := rt.Transform.Run(transform.Request{Body: []byte(`{"ref":"refs/heads/main"}`)})
	if err != nil || string(res.Request.Body) != `{"text":"refs/heads/main"}` {
		t.Errorf("Run = %s, %v", res.Request.Body, err)
	}
	r, err = load(file("        transform: scripts/slack.js\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rt, _ := mustGet(t, r, "gh").Route("slack"); rt.Transform.Limits != (transform.Limits{Timeout: transform.DefaultTimeout, Memory: transform.DefaultMemory}) {
		t.Errorf("default limits = %+v", rt.Transform.Limits)
	}

	for _, tc := range []struct{ name, route, want string }{
		{"missing file", "        transform: scripts/nope.js\n", `route "slack": transform scripts/nope.js: open`},
		{"syntax error", "        transform: scripts/syntax.js\n", `route "slack": transform scripts/syntax.js: SyntaxError`},
		{"no function", "        transform: scripts/none.js\n", `route "slack": transform scripts/none.js: defines no transform`},
		{"bad timeout", "        transform: scripts/slack.js\n        transform_timeout: 1h\n", `route "slack": transform_timeout: "1h"`},
		{"bad memory", "        transform: scripts/slack.js\n        transform_memory: lots\n", `route "slack": transform_memory: "lots"`},
		{"bounds without transform", "        transform_memory: 8MiB\n", `route "slack": transform_timeout, transform_memory: set without transform`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(file(tc.route))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `provider "gh"`) || !strings.Contains(err.Error(), "providers.yaml") {
				t.Errorf("err = %v; want it to name the file, provider gh and contain %q", err, tc.want)
			}
		})
	}
}
