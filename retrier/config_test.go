package main

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

// TestConfigBadValues: every variable the retrier reads, given a bad value,
// is named by its own message, and all of them at once.
func TestConfigBadValues(t *testing.T) {
	bad := envconftest.Common(envconftest.Bad{Name: "HOOKLINE_METRICS_ADDR", Value: "9102", Says: `HOOKLINE_METRICS_ADDR="9102": want host:port or :port, such as :9102`})
	bad = append(bad, envconftest.Tracing...)
	envconftest.Check(t, loadConfig, nil, bad, append(envconftest.TracingAny, envconftest.SharedCombined...)...)

	c, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_RETRY_TIERS": "1s,2s,3s", "HOOKLINE_RETRY_JITTER": "0.2"}))
	if err != nil || c.MetricsAddr != ":9102" || c.Retry.String() != "1s,2s,3s" || c.Jitter != 0.2 {
		t.Fatalf("config %+v, %v", c, err)
	}
}

// TestConfigReadme: the configuration table (docs/operating.md) and the variables the
// retrier reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../docs/operating.md", "retrier", loadConfig, nil)
}

func TestRunRefusesBadConfigBeforeKafka(t *testing.T) {
	err := run(t.Context(), envconftest.Env(map[string]string{"HOOKLINE_RETRY_TIERS": "soon", "KAFKA_BROKERS": "127.0.0.1:1"}), &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "HOOKLINE_RETRY_TIERS") {
		t.Fatalf("run: %v", err)
	}
}
