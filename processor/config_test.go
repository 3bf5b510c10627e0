package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

// TestConfigBadValues: every variable the processor reads, given a bad
// value, is named by its own message, and all of them at once; the removed
// batch timeout says what replaced it.
func TestConfigBadValues(t *testing.T) {
	bad := envconftest.Common(
		envconftest.Bad{Name: "HOOKLINE_METRICS_ADDR", Value: "9101", Says: `HOOKLINE_METRICS_ADDR="9101": want host:port or :port, such as :9101`},
		envconftest.Providers,
		envconftest.Bad{Name: "HOOKLINE_INSTANCE_ID", Value: "a/b", Says: `HOOKLINE_INSTANCE_ID="a/b": want a name without spaces or slashes, unique per running processor`},
		envconftest.Bad{Name: "HOOKLINE_MAX_INFLIGHT", Value: "0", Says: `HOOKLINE_MAX_INFLIGHT="0": want a whole number from 1 to 4096`},
		envconftest.Bad{Name: "HOOKLINE_MAX_PENDING", Value: "0", Says: `HOOKLINE_MAX_PENDING="0": want a whole number from 1 to 1000000`},
		envconftest.Bad{Name: "HOOKLINE_MAX_PENDING_BYTES", Value: "1024", Says: `HOOKLINE_MAX_PENDING_BYTES="1024": want a whole number from 1048576 to 1099511627776`},
		envconftest.Bad{Name: "HOOKLINE_STATE_MEMORY", Value: "16MiB", Says: `HOOKLINE_STATE_MEMORY="16MiB": want bytes from 32MiB to 1024GiB, such as 128MiB`},
		envconftest.Bad{Name: "HOOKLINE_BATCH_MAX_RECORDS", Value: "many", Says: `HOOKLINE_BATCH_MAX_RECORDS="many": want a whole number from 1 to 100000`},
		envconftest.Bad{Name: "HOOKLINE_SHUTDOWN_GRACE", Value: "soon", Says: `HOOKLINE_SHUTDOWN_GRACE="soon": want a positive duration such as 5s`},
		envconftest.TimerSlack,
		envconftest.Bad{Name: "HOOKLINE_STANDBY_REPLICAS", Value: "-1", Says: `HOOKLINE_STANDBY_REPLICAS="-1": want a whole number from 0 to 16`},
		envconftest.EventTypeLabels,
		envconftest.Bad{Name: "HOOKLINE_BREAKER_FAILURES", Value: "-2", Says: `HOOKLINE_BREAKER_FAILURES="-2": want a whole number from -1 to 1000000`},
		envconftest.Bad{Name: "HOOKLINE_BREAKER_COOLDOWN", Value: "0s", Says: `HOOKLINE_BREAKER_COOLDOWN="0s": want a positive duration such as 30s`},
		envconftest.Bad{Name: "HOOKLINE_RETRY_AFTER_MAX", Value: "48h", Says: `HOOKLINE_RETRY_AFTER_MAX="48h"`},
		envconftest.Bad{Name: "HOOKLINE_SESSION_TIMEOUT", Value: "5s", Says: `HOOKLINE_SESSION_TIMEOUT="5s": want a duration from 6s to 5m (the broker's default group.min/max.session.timeout.ms)`},
		envconftest.Bad{Name: "HOOKLINE_TRANSACTION_TIMEOUT", Value: "1s", Says: `HOOKLINE_TRANSACTION_TIMEOUT="1s": want a duration from 5s to 15m`},
		envconftest.Bad{Name: "HOOKLINE_BATCH_TIMEOUT", Value: "20s", Says: `HOOKLINE_BATCH_TIMEOUT="20s": no longer used; a destination call is bounded by its own destination.timeout`},
	)
	bad = append(bad, envconftest.Tracing...)
	envconftest.Check(t, loadConfig, map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"}, bad,
		append([]string{"HOOKLINE_STATE_DIR"}, append(envconftest.TracingAny, envconftest.SharedCombined...)...)...)
}

// TestConfigReadme: the configuration table (docs/operating.md) and the variables the
// processor reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../docs/operating.md", "processor", loadConfig, map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"})
}

// TestConfigValues: the defaults, and the values a setting takes.
func TestConfigValues(t *testing.T) {
	cfg, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr != ":9101" || cfg.StateDir != "data/processor" || cfg.MaxInflight != 64 || cfg.MaxPending != 10000 ||
		cfg.MaxPendingBytes != 256<<20 || cfg.ShutdownGrace != 5*time.Second || cfg.MaxBatch != 500 || cfg.InstanceID != "" ||
		cfg.StateMemory != 128<<20 || cfg.StandbyReplicas != 0 || cfg.BreakerFailures != 5 || cfg.BreakerCooldown != 30*time.Second ||
		cfg.SessionTimeout != 10*time.Second || cfg.TransactionTimeout != time.Minute || cfg.LogLevel != slog.LevelInfo || cfg.Retry.String() != "1m,5m,15m,1h,6h" || cfg.Jitter != 0 ||
		cfg.TimerSlack != time.Millisecond {
		t.Fatalf("defaults %+v", cfg)
	}
	for _, tc := range []struct {
		name, value string
		got         func(config) any
		want        any
	}{
		{"HOOKLINE_STATE_MEMORY", "64MiB", func(c config) any { return c.StateMemory }, int64(64 << 20)},
		{"HOOKLINE_STATE_MEMORY", "1GiB", func(c config) any { return c.StateMemory }, int64(1 << 30)},
		{"HOOKLINE_STATE_MEMORY", "50000000", func(c config) any { return c.StateMemory }, int64(50000000)},
		{"HOOKLINE_SESSION_TIMEOUT", "30s", func(c config) any { return c.SessionTimeout }, 30 * time.Second},
		{"HOOKLINE_SESSION_TIMEOUT", "5m", func(c config) any { return c.SessionTimeout }, 5 * time.Minute},
		{"HOOKLINE_TRANSACTION_TIMEOUT", "15s", func(c config) any { return c.TransactionTimeout }, 15 * time.Second},
		{"HOOKLINE_BREAKER_FAILURES", "-1", func(c config) any { return c.BreakerFailures }, -1},
		{"HOOKLINE_TIMER_SLACK", "0", func(c config) any { return c.TimerSlack }, time.Duration(0)},
		{"HOOKLINE_TIMER_SLACK", "200us", func(c config) any { return c.TimerSlack }, 200 * time.Microsecond},
		{"HOOKLINE_LOG_LEVEL", "DEBUG", func(c config) any { return c.LogLevel }, slog.LevelDebug},
	} {
		cfg, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_PROVIDERS": "p.yaml", tc.name: tc.value}))
		if err != nil || tc.got(cfg) != tc.want {
			t.Errorf("%s=%s: %v, %v; want %v", tc.name, tc.value, tc.got(cfg), err, tc.want)
		}
	}
}
