package topics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/kafkatest"
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
			if err != nil || e.Partitions != DefaultPartitions || e.Replication != -1 || e.MaxBodyBytes != DefaultMaxBodyBytes {
				t.Errorf("defaults: %+v, %v", e, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("env %v: err %v, want one naming %s", tc.env, err, tc.wantErr)
		}
	}
}

func shape() Shape {
	return Shape{Partitions: 3, ChangelogRetention: 30 * 24 * time.Hour, MaxMessageBytes: 2 << 20}
}

// TestEnsureOnRealBroker creates every topic, checks their configs as the
// broker reports them, runs Ensure again (a no-op), then spoils two topics and
// checks that Ensure refuses, naming each topic and its difference.
func TestEnsureOnRealBroker(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	cl := kafkatest.Client(t, brokers)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	n := NewNames(kafkatest.Prefix(t), []string{"1s"})
	if err := Ensure(ctx, cl, n.Specs(shape()), -1); err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	if err := Ensure(ctx, cl, n.Specs(shape()), -1); err != nil {
		t.Fatalf("second Ensure must be a no-op: %v", err)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, n.Changelog, n.DLQ, n.DLQStatus)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		n.Changelog: {"cleanup.policy": "compact,delete", "retention.ms": "2592000000"},
		n.DLQ:       {"cleanup.policy": "delete", "retention.ms": "2592000000", "max.message.bytes": "2097152"},
		n.DLQStatus: {"cleanup.policy": "compact"},
	}
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if w, ok := want[rc.Name][c.Key]; ok && (c.Value == nil || *c.Value != w) {
				t.Errorf("%s %s = %v, want %s", rc.Name, c.Key, c.Value, w)
			}
		}
	}

	// Wrong partition count and wrong cleanup policy on a second environment.
	bad := NewNames(kafkatest.Prefix(t), nil)
	if _, err := adm.CreateTopic(ctx, 5, -1, nil, bad.Raw); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, bad.Changelog); err != nil {
		t.Fatal(err)
	}
	err = Ensure(ctx, cl, bad.Specs(shape()), -1)
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("Ensure over spoiled topics: %v, want *MismatchError", err)
	}
	msg := err.Error()
	for _, w := range []string{bad.Raw + " has 5 partitions, want 3", bad.Changelog + " has cleanup.policy=delete, want compact,delete"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
}
