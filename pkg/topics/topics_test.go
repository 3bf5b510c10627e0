package topics

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/retry"
)

func TestNames(t *testing.T) {
	n := NewNames("staging.", []string{"1s", "2s"})
	want := []string{"staging.webhooks.raw", "staging.webhooks.dedup-changelog", "staging.webhooks.outcomes",
		"staging.webhooks.dlq", "staging.webhooks.dlq-status", "staging.webhooks.control", "staging.webhooks.selftest", "staging.webhooks.retry.1s", "staging.webhooks.retry.2s"}
	if got := n.All(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("All() = %v, want %v", got, want)
	}
	if g := n.Group(GroupProcessor); g != "staging.hookline-processor" {
		t.Fatalf("group %q", g)
	}
	specs := n.LaneSpecs([]string{"slowcrm"}, Shape{Partitions: 12, MaxMessageBytes: 1 << 20})
	if len(specs) != 1 || specs[0].Name != "staging.webhooks.lane.slowcrm" || specs[0].Partitions != 12 || specs[0].Cleanup != "delete" {
		t.Fatalf("LaneSpecs = %+v, want staging.webhooks.lane.slowcrm with raw's 12 partitions", specs)
	}
}

func TestRetryTopicNames(t *testing.T) {
	n := NewNames("stg.", retry.DefaultSchedule().Names())
	want := []string{"stg.webhooks.retry.1m", "stg.webhooks.retry.5m", "stg.webhooks.retry.15m", "stg.webhooks.retry.1h", "stg.webhooks.retry.6h"}
	if strings.Join(n.Retry, " ") != strings.Join(want, " ") {
		t.Fatalf("retry topics %v, want %v", n.Retry, want)
	}
}

func TestReadEnv(t *testing.T) {
	cases := []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"HOOKLINE_PARTITIONS": "0"}, "HOOKLINE_PARTITIONS"},
		{map[string]string{"HOOKLINE_PARTITIONS": "x"}, "HOOKLINE_PARTITIONS"},
		{map[string]string{"HOOKLINE_REPLICATION_FACTOR": "0"}, "HOOKLINE_REPLICATION_FACTOR"},
		{map[string]string{"HOOKLINE_TOPIC_PREFIX": "bad prefix/"}, "HOOKLINE_TOPIC_PREFIX"},
		{map[string]string{"HOOKLINE_MAX_BODY_BYTES": "-1"}, "HOOKLINE_MAX_BODY_BYTES"},
		{map[string]string{"HOOKLINE_DLQ_RETENTION": "10m"}, `HOOKLINE_DLQ_RETENTION="10m": want a duration of 1h or more`},
		{map[string]string{"HOOKLINE_TOPIC_PREFIX": "a b", "HOOKLINE_PARTITIONS": "x", "HOOKLINE_REPLICATION_FACTOR": "0", "HOOKLINE_MAX_BODY_BYTES": "1e9"},
			`HOOKLINE_TOPIC_PREFIX="a b": want letters, digits, '.', '_' and '-' only: they are allowed in topic names` + "\n" +
				`  HOOKLINE_PARTITIONS="x": want a whole number from 1 to 10000` + "\n" +
				`  HOOKLINE_REPLICATION_FACTOR="0": want a whole number from 1, or -1 for the broker's default` + "\n" +
				`  HOOKLINE_MAX_BODY_BYTES="1e9": want a whole number from 1 to 67108864`},
	}
	for _, tc := range cases {
		r := envconf.New(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		e, err := ReadEnv(r), r.Err()
		if tc.wantErr == "" {
			if err != nil || e.Partitions != DefaultPartitions || e.Replication != -1 || e.MaxBodyBytes != DefaultMaxBodyBytes || e.DLQRetention != DefaultDLQRetention {
				t.Errorf("defaults: %+v, %v", e, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("env %v: err %v, want one naming %s", tc.env, err, tc.wantErr)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "billing.ledger", "A-b_c.9", strings.Repeat("x", MaxNameLen), "...", "__consumer_offsets"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                                "empty",
		".":                               "not a name Kafka allows",
		"..":                              "not a name Kafka allows",
		"a b":                             "letters, digits",
		"a/b":                             "letters, digits",
		"tópico":                          "letters, digits",
		strings.Repeat("x", MaxNameLen+1): "250 characters",
	} {
		if err := CheckName(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckName(%q) = %v, want an error saying %q", bad, err, want)
		}
	}
}
