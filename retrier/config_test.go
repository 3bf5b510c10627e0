package main

import (
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error; none: no error
	}{
		{"defaults", map[string]string{}, nil},
		{"test schedule", map[string]string{"HOOKLINE_RETRY_TIERS": "1s,2s,3s", "HOOKLINE_RETRY_JITTER": "0.2"}, nil},
		{"bad metrics addr", map[string]string{"HOOKLINE_METRICS_ADDR": "9102"}, []string{"HOOKLINE_METRICS_ADDR"}},
		{"bad log level", map[string]string{"HOOKLINE_LOG_LEVEL": "loud"}, []string{"HOOKLINE_LOG_LEVEL"}},
		{"bad tiers", map[string]string{"HOOKLINE_RETRY_TIERS": "5m,1m"}, []string{"HOOKLINE_RETRY_TIERS"}},
		{"bad jitter", map[string]string{"HOOKLINE_RETRY_JITTER": "2"}, []string{"HOOKLINE_RETRY_JITTER"}},
		{"bad partitions", map[string]string{"HOOKLINE_PARTITIONS": "0"}, []string{"HOOKLINE_PARTITIONS"}},
		{"bad brokers", map[string]string{"KAFKA_BROKERS": "nohost"}, []string{"KAFKA_BROKERS"}},
		{"every wrong variable named at once", map[string]string{"HOOKLINE_METRICS_ADDR": "x", "HOOKLINE_RETRY_TIERS": "0s", "KAFKA_SASL_MECHANISM": "MD5"},
			[]string{"HOOKLINE_METRICS_ADDR", "HOOKLINE_RETRY_TIERS", "KAFKA_SASL_MECHANISM"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.MetricsAddr != ":9102" || c.Retry.Len() == 0 {
					t.Fatalf("config %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestRunRefusesBadConfigBeforeKafka(t *testing.T) {
	env := map[string]string{"HOOKLINE_RETRY_TIERS": "soon", "KAFKA_BROKERS": "127.0.0.1:1"}
	err := run(t.Context(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "HOOKLINE_RETRY_TIERS") {
		t.Fatalf("run: %v", err)
	}
}
