package topics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

func shape() topics.Shape {
	return topics.Shape{Partitions: 3, ChangelogRetention: 30 * 24 * time.Hour, MaxMessageBytes: 2 << 20}
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

	n := topics.NewNames(kafkatest.Prefix(t), []string{"1s"})
	if err := topics.Ensure(ctx, cl, n.Specs(shape()), -1); err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	if err := topics.Ensure(ctx, cl, n.Specs(shape()), -1); err != nil {
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
	bad := topics.NewNames(kafkatest.Prefix(t), nil)
	if _, err := adm.CreateTopic(ctx, 5, -1, nil, bad.Raw); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, bad.Changelog); err != nil {
		t.Fatal(err)
	}
	err = topics.Ensure(ctx, cl, bad.Specs(shape()), -1)
	var me *topics.MismatchError
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
