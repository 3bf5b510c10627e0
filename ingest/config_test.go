package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// TestConfigBadValues: every variable ingest reads, given a bad value, is
// named by its own message, and all of them at once.
func TestConfigBadValues(t *testing.T) {
	bad := envconftest.Common(
		envconftest.Bad{Name: "HOOKLINE_INGEST_ADDR", Value: "8080", Says: `HOOKLINE_INGEST_ADDR="8080": want host:port or :port, such as :8080`},
		envconftest.Providers,
		envconftest.Bad{Name: "HOOKLINE_PRODUCE_DEADLINE", Value: "10ms", Says: `HOOKLINE_PRODUCE_DEADLINE="10ms": want a duration from 100ms to 5m`},
		envconftest.Bad{Name: "HOOKLINE_SHUTDOWN_TIMEOUT", Value: "-1s", Says: `HOOKLINE_SHUTDOWN_TIMEOUT="-1s": want a positive duration such as 30s`},
		envconftest.Bad{Name: "HOOKLINE_IP_RATE_LIMIT", Value: "5", Says: `HOOKLINE_IP_RATE_LIMIT="5": no / (want per_second/burst such as 5/10, or off)`},
		envconftest.Bad{Name: "HOOKLINE_TRUSTED_PROXIES", Value: "10.0.0.0/8,proxy", Says: `HOOKLINE_TRUSTED_PROXIES="10.0.0.0/8,proxy": "proxy" is not an IP address or CIDR`},
		envconftest.Bad{Name: "HOOKLINE_INGEST_READ_HEADER_TIMEOUT", Value: "0s", Says: `HOOKLINE_INGEST_READ_HEADER_TIMEOUT="0s": want a positive duration such as 5s`},
		envconftest.Bad{Name: "HOOKLINE_INGEST_READ_TIMEOUT", Value: "soon", Says: `HOOKLINE_INGEST_READ_TIMEOUT="soon": want a positive duration such as 30s`},
		envconftest.Bad{Name: "HOOKLINE_INGEST_WRITE_TIMEOUT", Value: "-5s", Says: `HOOKLINE_INGEST_WRITE_TIMEOUT="-5s": want a positive duration such as 35s`},
		envconftest.Bad{Name: "HOOKLINE_INGEST_IDLE_TIMEOUT", Value: "2", Says: `HOOKLINE_INGEST_IDLE_TIMEOUT="2": want a positive duration such as 2m`},
		envconftest.Bad{Name: "HOOKLINE_INGEST_GC_FLOOR", Value: "lots", Says: `HOOKLINE_INGEST_GC_FLOOR="lots": want bytes from 0 to 16GiB, such as 64MiB`},
		envconftest.Bad{Name: "HOOKLINE_REPLAY_CACHE_ENTRIES", Value: "-1", Says: `HOOKLINE_REPLAY_CACHE_ENTRIES="-1": want a whole number from 0 to 10000000`},
		envconftest.EventTypeLabels,
		envconftest.TimerSlack,
	)
	bad = append(bad, envconftest.Tracing...)
	envconftest.Check(t, loadConfig, map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"}, bad, append(envconftest.TracingAny, envconftest.SharedCombined...)...)

	// Trusted proxies without the limit they serve.
	_, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_PROVIDERS": "p.yaml", "HOOKLINE_TRUSTED_PROXIES": "10.0.0.0/8"}))
	if want := `HOOKLINE_TRUSTED_PROXIES="10.0.0.0/8": HOOKLINE_IP_RATE_LIMIT is off`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("trusted proxies without a limit: %v, want %q", err, want)
	}
}

// TestConfigServerTimeouts: the HTTP server's timeouts keep their old
// values by default, the write timeout following the produce deadline,
// and one no longer than that deadline is refused.
func TestConfigServerTimeouts(t *testing.T) {
	c, err := loadConfig(envconftest.Env(map[string]string{"HOOKLINE_PROVIDERS": "p.yaml", "HOOKLINE_PRODUCE_DEADLINE": "10s"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (serverTimeouts{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: 40 * time.Second, Idle: 2 * time.Minute}); c.Server != want {
		t.Errorf("defaults: %+v, want %+v", c.Server, want)
	}
	// The benchmarks' and tests' client lets an idle connection go before
	// ingest closes one, new (no first request) or between requests: a POST
	// sent on it as ingest closes it would fail with EOF.
	if p := loadtest.PostIdleTimeout; p >= c.Server.ReadHeader || p >= c.Server.Idle {
		t.Errorf("loadtest.PostIdleTimeout %s: want less than ingest's read-header timeout %s and idle timeout %s", p, c.Server.ReadHeader, c.Server.Idle)
	}
	c, err = loadConfig(envconftest.Env(map[string]string{"HOOKLINE_PROVIDERS": "p.yaml",
		"HOOKLINE_INGEST_READ_HEADER_TIMEOUT": "2s", "HOOKLINE_INGEST_READ_TIMEOUT": "1m", "HOOKLINE_INGEST_WRITE_TIMEOUT": "90s", "HOOKLINE_INGEST_IDLE_TIMEOUT": "5m"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (serverTimeouts{ReadHeader: 2 * time.Second, Read: time.Minute, Write: 90 * time.Second, Idle: 5 * time.Minute}); c.Server != want {
		t.Errorf("set: %+v, want %+v", c.Server, want)
	}
	_, err = loadConfig(envconftest.Env(map[string]string{"HOOKLINE_PROVIDERS": "p.yaml", "HOOKLINE_INGEST_WRITE_TIMEOUT": "5s"}))
	if want := `HOOKLINE_INGEST_WRITE_TIMEOUT="5s": a request waits up to HOOKLINE_PRODUCE_DEADLINE (5s)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("write timeout within the produce deadline: %v, want %q", err, want)
	}
}

// TestConfigReadme: the configuration table (docs/operating.md) and the variables ingest
// reads agree.
func TestConfigReadme(t *testing.T) {
	envconftest.Readme(t, "../docs/operating.md", "ingest", loadConfig, map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"})
}

// TestConfigValues: the collector's floor is 64 MiB and the timer slack
// 1 ms unless set; 0 turns either off (the slack: left as it is).
func TestConfigValues(t *testing.T) {
	for _, tc := range []struct {
		name, value string // value "": unset
		got         func(config) any
		want        any
	}{
		{"HOOKLINE_INGEST_GC_FLOOR", "", func(c config) any { return c.GCFloor }, int64(64 << 20)},
		{"HOOKLINE_INGEST_GC_FLOOR", "0", func(c config) any { return c.GCFloor }, int64(0)},
		{"HOOKLINE_INGEST_GC_FLOOR", "256MiB", func(c config) any { return c.GCFloor }, int64(256 << 20)},
		{"HOOKLINE_INGEST_GC_FLOOR", "1048576", func(c config) any { return c.GCFloor }, int64(1 << 20)},
		{"HOOKLINE_TIMER_SLACK", "", func(c config) any { return c.TimerSlack }, time.Millisecond},
		{"HOOKLINE_TIMER_SLACK", "0", func(c config) any { return c.TimerSlack }, time.Duration(0)},
		{"HOOKLINE_TIMER_SLACK", "200us", func(c config) any { return c.TimerSlack }, 200 * time.Microsecond},
		{"HOOKLINE_TIMER_SLACK", "100ms", func(c config) any { return c.TimerSlack }, 100 * time.Millisecond},
	} {
		vars := map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"}
		if tc.value != "" {
			vars[tc.name] = tc.value
		}
		c, err := loadConfig(envconftest.Env(vars))
		if err != nil {
			t.Fatalf("%s=%q: %v", tc.name, tc.value, err)
		}
		if got := tc.got(c); got != tc.want {
			t.Errorf("%s=%q: %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}
