package main

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

func loadErr(lookup func(string) (string, bool)) error { _, err := loadConfig(lookup); return err }

// TestConfigBadValues: every variable the retrier reads, given a bad value,
// is named by its own message, and all of them at once.
func TestConfigBadValues(t *testing.T) {
	bad := append(append([]envconftest.Bad(nil), envconftest.Shared...), envconftest.Retry...)
	bad = append(bad, envconftest.Bad{Name: "HOOKLINE_METRICS_ADDR", Value: "9102", Says: `HOOKLINE_METRICS_ADDR="9102": want host:port or :port, such as :9102`})
	envconftest.Check(t, loadErr, nil, bad, envconftest.SharedCombined...)

	c, err := loadConfig(func(k string) (string, bool) {
		v, ok := map[string]string{"HOOKLINE_RETRY_TIERS": "1s,2s,3s", "HOOKLINE_RETRY_JITTER": "0.2"}[k]
		return v, ok
	})
	if err != nil || c.MetricsAddr != ":9102" || c.Retry.String() != "1s,2s,3s" || c.Jitter != 0.2 {
		t.Fatalf("config %+v, %v", c, err)
	}
}

// TestConfigReadme: README's configuration table and the variables the
// retrier reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../README.md", "retrier", loadErr, nil)
}

func TestRunRefusesBadConfigBeforeKafka(t *testing.T) {
	env := map[string]string{"HOOKLINE_RETRY_TIERS": "soon", "KAFKA_BROKERS": "127.0.0.1:1"}
	err := run(t.Context(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "HOOKLINE_RETRY_TIERS") {
		t.Fatalf("run: %v", err)
	}
}
