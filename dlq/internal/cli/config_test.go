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
		envconftest.Bad{Name: "HOOKLINE_PROCESSOR_METRICS", Value: "http://processor:9101/metrics, processor:9101", Says: `HOOKLINE_PROCESSOR_METRICS="http://processor:9101/metrics,processor:9101": "processor:9101" is not an http(s) URL (want the processors' /metrics URLs separated by commas, such as http://processor:9101/metrics)`},
		envconftest.Bad{Name: "HOOKLINE_HEALTH_REPORT_TO", Value: "ops@example.com, ops", Says: `HOOKLINE_HEALTH_REPORT_TO="ops@example.com,ops": "ops" is not an e-mail address (want e-mail addresses separated by commas, such as ops@example.com)`},
		envconftest.Bad{Name: "HOOKLINE_HEALTH_REPORT_INTERVAL", Value: "30s", Says: `HOOKLINE_HEALTH_REPORT_INTERVAL="30s": want a duration of 1m or more, such as 24h`},
		envconftest.Bad{Name: "HOOKLINE_ALERT_SMTP_HOST", Value: "smtp.example.com", Says: `HOOKLINE_ALERT_SMTP_HOST="smtp.example.com": want host:port, such as smtp.example.com:587`},
		envconftest.Bad{Name: "HOOKLINE_ALERT_EMAIL_FROM", Value: "hookline at example", Says: `HOOKLINE_ALERT_EMAIL_FROM="hookline at example": want an e-mail address, such as hookline@example.com`},
		envconftest.Bad{Name: "HOOKLINE_ALERT_SMTP_REQUIRE_TLS", Value: "maybe", Says: `HOOKLINE_ALERT_SMTP_REQUIRE_TLS="maybe": want true or false`},
		envconftest.Bad{Name: "HOOKLINE_TRACE_URL", Value: "http://jaeger:16686/trace/", Says: `HOOKLINE_TRACE_URL="http://jaeger:16686/trace/": want an http(s) URL with {trace_id} where the trace id goes, such as http://jaeger:16686/trace/{trace_id}`},
		envconftest.Bad{Name: "HOOKLINE_ADMIN_HOSTS", Value: "dlq.internal, evil.example:80", Says: `HOOKLINE_ADMIN_HOSTS="dlq.internal,evil.example:80": want host names (no port) separated by commas, such as dlq.internal,dlq`},
		envconftest.TimerSlack,
	)
	envconftest.Check(t, loadConfig, nil, bad, append([]string{"HOOKLINE_PROVIDERS", "HOOKLINE_TRACE_DIR", "HOOKLINE_ALERT_SMTP_USERNAME", "HOOKLINE_ALERT_SMTP_PASSWORD"}, envconftest.SharedCombined...)...)
	if _, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_ADMIN_TOKEN": "tok-en5"})); err == nil || strings.Contains(err.Error(), "tok-en5") {
		t.Fatalf("a short token: %v", err)
	}
	c, err := loadConfig(envconftest.Env(nil))
	if err != nil || c.AdminAddr != DefaultAdminAddr || c.MetricsInterval != DefaultMetricsInterval || c.TraceDir != DefaultTraceDir || c.HeldAfter != time.Hour || c.TimerSlack != time.Millisecond {
		t.Fatalf("defaults %+v, %v", c, err)
	}
}

// TestConfigReadme: the configuration table (docs/operating.md) and the variables dlq
// reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../../../docs/operating.md", "dlq", loadConfig, nil)
}
