package main

import (
	"strings"
	"testing"
	"time"
)

func TestSessionTimeoutSetting(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{"", 10 * time.Second, ""},
		{"30s", 30 * time.Second, ""},
		{"5s", 0, "HOOKLINE_SESSION_TIMEOUT=5s: want 6s to 5m"},
		{"6m", 0, "HOOKLINE_SESSION_TIMEOUT=6m0s: want 6s to 5m"},
		{"soon", 0, `HOOKLINE_SESSION_TIMEOUT="soon": want a positive duration`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			env := map[string]string{"HOOKLINE_PROVIDERS": "p.yaml", "HOOKLINE_INSTANCE_ID": "p1", "HOOKLINE_SESSION_TIMEOUT": tc.value}
			cfg, err := loadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Count(err.Error(), "HOOKLINE_SESSION_TIMEOUT") != 1 {
					t.Fatalf("err = %v, want it to say %q, once", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SessionTimeout != tc.want {
				t.Fatalf("SessionTimeout = %s, want %s", cfg.SessionTimeout, tc.want)
			}
		})
	}
}

// TestPipelineSettings: each bad value of the pipeline's settings is named,
// all at once, and the removed batch timeout says what replaced it.
func TestPipelineSettings(t *testing.T) {
	env := map[string]string{
		"HOOKLINE_PROVIDERS":         "p.yaml",
		"HOOKLINE_MAX_PENDING":       "0",
		"HOOKLINE_MAX_PENDING_BYTES": "1024",
		"HOOKLINE_SHUTDOWN_GRACE":    "soon",
		"HOOKLINE_BATCH_TIMEOUT":     "20s",
		"HOOKLINE_STANDBY_REPLICAS":  "-1",
		"HOOKLINE_STATE_MEMORY":      "16MiB",
	}
	_, err := loadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		t.Fatal("loadConfig accepted bad pipeline settings")
	}
	for _, want := range []string{
		`HOOKLINE_MAX_PENDING="0": want a whole number from 1 to 1000000`,
		`HOOKLINE_MAX_PENDING_BYTES="1024": want a whole number from 1048576`,
		`HOOKLINE_SHUTDOWN_GRACE="soon": want a positive duration`,
		`HOOKLINE_BATCH_TIMEOUT="20s": no longer used`, "destination.timeout",
		`HOOKLINE_STANDBY_REPLICAS="-1": want a whole number from 0 to 16`,
		`HOOKLINE_STATE_MEMORY="16MiB": want bytes from 32 MiB`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	cfg, err := loadConfig(func(k string) (string, bool) {
		v, ok := map[string]string{"HOOKLINE_PROVIDERS": "p.yaml"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPending != 10000 || cfg.MaxPendingBytes != 256<<20 || cfg.ShutdownGrace != 5*time.Second || cfg.MaxBatch != 500 || cfg.InstanceID != "" ||
		cfg.StateMemory != 128<<20 || cfg.StandbyReplicas != 0 {
		t.Fatalf("defaults %+v", cfg)
	}
	for v, want := range map[string]int64{"64MiB": 64 << 20, "1GiB": 1 << 30, "50000000": 50000000} {
		cfg, err := loadConfig(func(k string) (string, bool) {
			v, ok := map[string]string{"HOOKLINE_PROVIDERS": "p.yaml", "HOOKLINE_STATE_MEMORY": v}[k]
			return v, ok
		})
		if err != nil || cfg.StateMemory != want {
			t.Errorf("HOOKLINE_STATE_MEMORY=%s: %d, %v; want %d", v, cfg.StateMemory, err, want)
		}
	}
}
