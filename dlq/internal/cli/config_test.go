package cli

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

func loadErr(lookup func(string) (string, bool)) error { _, err := loadConfig(lookup); return err }

// TestConfigBadValues: every variable dlq reads, given a bad value, is
// named by its own message, and all of them at once; the token never shows.
func TestConfigBadValues(t *testing.T) {
	bad := append(append([]envconftest.Bad(nil), envconftest.Shared...),
		envconftest.Bad{Name: "HOOKLINE_ADMIN_ADDR", Value: "nonsense", Says: `HOOKLINE_ADMIN_ADDR="nonsense": want host:port or :port, such as 127.0.0.1:8081`},
		envconftest.Bad{Name: "HOOKLINE_ADMIN_TOKEN", Value: "tok-en5", Says: `HOOKLINE_ADMIN_TOKEN (7 characters): want 16 or more characters`},
		envconftest.Bad{Name: "HOOKLINE_DLQ_METRICS_INTERVAL", Value: "1ms", Says: `HOOKLINE_DLQ_METRICS_INTERVAL="1ms": want a duration of 100ms or more, such as 30s`},
	)
	envconftest.Check(t, loadErr, nil, bad, append([]string{"HOOKLINE_PROVIDERS", "HOOKLINE_TRACE_DIR"}, envconftest.SharedCombined...)...)
	token := func(k string) (string, bool) {
		if k == "HOOKLINE_ADMIN_TOKEN" {
			return "tok-en5", true
		}
		return "", false
	}
	if err := loadErr(token); err == nil || strings.Contains(err.Error(), "tok-en5") {
		t.Fatalf("a short token: %v", err)
	}
	c, err := loadConfig(func(string) (string, bool) { return "", false })
	if err != nil || c.AdminAddr != DefaultAdminAddr || c.MetricsInterval != DefaultMetricsInterval || c.TraceDir != DefaultTraceDir {
		t.Fatalf("defaults %+v, %v", c, err)
	}
}

// TestConfigReadme: README's configuration table and the variables dlq
// reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../../../README.md", "dlq", loadErr, nil)
}
