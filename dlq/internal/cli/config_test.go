package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

// TestConfigBadValues: every variable dlq reads, given a bad value, is
// named by its own message, and all of them at once; the token never shows.
func TestConfigBadValues(t *testing.T) {
	bad := append(slices.Clone(envconftest.Shared),
		envconftest.Bad{Name: "HOOKLINE_ADMIN_ADDR", Value: "nonsense", Says: `HOOKLINE_ADMIN_ADDR="nonsense": want host:port or :port, such as 127.0.0.1:8081`},
		envconftest.Bad{Name: "HOOKLINE_ADMIN_TOKEN", Value: "tok-en5", Says: `HOOKLINE_ADMIN_TOKEN (7 characters): want 16 or more characters`},
		envconftest.Bad{Name: "HOOKLINE_DLQ_METRICS_INTERVAL", Value: "1ms", Says: `HOOKLINE_DLQ_METRICS_INTERVAL="1ms": want a duration of 100ms or more, such as 30s`},
		envconftest.Bad{Name: "HOOKLINE_HELD_ALERT_AFTER", Value: "30s", Says: `HOOKLINE_HELD_ALERT_AFTER="30s": want a duration of 1m or more, such as 1h`},
		envconftest.Bad{Name: "HOOKLINE_ADMIN_HOSTS", Value: "dlq.internal, evil.example:80", Says: `HOOKLINE_ADMIN_HOSTS="dlq.internal,evil.example:80": want host names (no port) separated by commas, such as dlq.internal,dlq`},
	)
	envconftest.Check(t, loadConfig, nil, bad, append([]string{"HOOKLINE_PROVIDERS", "HOOKLINE_TRACE_DIR"}, envconftest.SharedCombined...)...)
	if _, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_ADMIN_TOKEN": "tok-en5"})); err == nil || strings.Contains(err.Error(), "tok-en5") {
		t.Fatalf("a short token: %v", err)
	}
	c, err := loadConfig(envconftest.Env(nil))
	if err != nil || c.AdminAddr != DefaultAdminAddr || c.MetricsInterval != DefaultMetricsInterval || c.TraceDir != DefaultTraceDir || c.HeldAfter != time.Hour {
		t.Fatalf("defaults %+v, %v", c, err)
	}
}

// TestConfigReadme: the configuration table (docs/operating.md) and the variables dlq
// reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../../../docs/operating.md", "dlq", loadConfig, nil)
}
