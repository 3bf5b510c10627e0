package kafkatest

import (
	"slices"
	"testing"
)

func TestSecureEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		port    string // the KAFKA_PORT added; "" for none
	}{
		{"one loopback broker", []string{"HOME=/h", "KAFKA_BROKERS=127.0.0.1:19492"}, "19492"},
		{"localhost", []string{"KAFKA_BROKERS=localhost:9092"}, "9092"},
		{"KAFKA_PORT set wins", []string{"KAFKA_PORT=9192", "KAFKA_BROKERS=127.0.0.1:19492"}, ""},
		{"KAFKA_PORT empty", []string{"KAFKA_PORT=", "KAFKA_BROKERS=127.0.0.1:19492"}, "19492"},
		{"no brokers", []string{"HOME=/h"}, ""},
		{"two brokers", []string{"KAFKA_BROKERS=127.0.0.1:19092,127.0.0.1:19093"}, ""},
		{"remote broker", []string{"KAFKA_BROKERS=kafka.example:9092"}, ""},
		{"no room above", []string{"KAFKA_BROKERS=127.0.0.1:65534"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.environ)
			got := SecureEnv(in)
			want := tc.environ
			if tc.port != "" {
				want = append(slices.Clone(tc.environ), "KAFKA_PORT="+tc.port)
			}
			if !slices.Equal(got, want) {
				t.Errorf("SecureEnv(%q) = %q, want %q", tc.environ, got, want)
			}
			if !slices.Equal(in, tc.environ) {
				t.Errorf("SecureEnv changed its argument to %q", in)
			}
		})
	}
}
