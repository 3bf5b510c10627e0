package topics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/topics"
)

// TestDLQRetentionDrift: HOOKLINE_DLQ_RETENTION is the DLQ's retention.ms at
// creation; an existing DLQ created under another value is a drift (not a
// mismatch: Ensure passes), named with both values and the fix, and
// SetTuned (what make topics runs) sets it, after which nothing drifts.
func TestDLQRetentionDrift(t *testing.T) {
	cl := fakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	n := topics.NewNames("", []string{"1m"})
	sh := topics.Shape{Partitions: 2, MaxMessageBytes: 2 << 20}
	created := n.Specs(sh)
	for _, s := range created {
		if s.Name == n.DLQ && s.Configs["retention.ms"] != "2592000000" {
			t.Errorf("default DLQ retention.ms %s, want 30 days", s.Configs["retention.ms"])
		}
	}
	if err := topics.Ensure(ctx, cl, created, -1); err != nil {
		t.Fatal(err)
	}
	if d, err := topics.Drifts(ctx, cl, created); err != nil || len(d) != 0 {
		t.Fatalf("as created: drifts %v, %v; want none", d, err)
	}

	sh.DLQRetention = 7 * 24 * time.Hour
	wanted := n.Specs(sh)
	if err := topics.Ensure(ctx, cl, wanted, -1); err != nil {
		t.Fatalf("a retention drift must not stop Ensure: %v", err)
	}
	drifts, err := topics.Drifts(ctx, cl, wanted)
	if err != nil {
		t.Fatal(err)
	}
	if len(drifts) != 1 {
		t.Fatalf("drifts %v, want the DLQ's retention.ms", drifts)
	}
	d := drifts[0]
	if d.Topic != n.DLQ || d.Key != "retention.ms" || d.Have != "2592000000" || d.Want != "604800000" || d.Var != "HOOKLINE_DLQ_RETENTION" {
		t.Errorf("drift %+v", d)
	}
	for _, w := range []string{"topic webhooks.dlq has retention.ms=2592000000 (720h)", "HOOKLINE_DLQ_RETENTION wants 604800000 (168h)", "`HOOKLINE_DLQ_RETENTION=168h make topics`"} {
		if !strings.Contains(d.String(), w) {
			t.Errorf("warning %q does not say %q", d.String(), w)
		}
	}

	if err := topics.SetTuned(ctx, cl, drifts); err != nil {
		t.Fatal(err)
	}
	if d, err := topics.Drifts(ctx, cl, wanted); err != nil || len(d) != 0 {
		t.Fatalf("after SetTuned: drifts %v, %v; want none", d, err)
	}
}

// TestChangelogRetentionFloor: a service with the providers file wants
// the changelog kept at least as long as the longest dedup TTL. An
// existing changelog kept shorter (created before a longer dedup_ttl, or
// an event type's) is a drift that says what wants more and how to set
// it, and SetTuned raises it; one kept longer is not a drift, nor is any
// changelog to a service without the providers file.
func TestChangelogRetentionFloor(t *testing.T) {
	cl := fakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	n := topics.NewNames("", []string{"1m"})
	week := 7 * 24 * time.Hour
	shape := func(changelog time.Duration) []topics.Spec {
		return n.Specs(topics.Shape{Partitions: 2, MaxMessageBytes: 2 << 20, ChangelogRetention: changelog})
	}
	if err := topics.Ensure(ctx, cl, shape(week), -1); err != nil { // created kept 7 days
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want time.Duration // 0: the service has no providers file
	}{
		{"as created", week},
		{"a shorter TTL: 7 days still kept", 72 * time.Hour},
		{"no providers file", 0},
	} {
		if d, err := topics.Drifts(ctx, cl, shape(tc.want)); err != nil || len(d) != 0 {
			t.Errorf("%s: drifts %v, %v; want none", tc.name, d, err)
		}
	}

	longer := shape(1000 * time.Hour) // an event type's dedup_ttl of 1000h
	drifts, err := topics.Drifts(ctx, cl, longer)
	if err != nil {
		t.Fatal(err)
	}
	if len(drifts) != 1 || drifts[0].Topic != n.Changelog || drifts[0].Key != "retention.ms" || drifts[0].Have != "604800000" || drifts[0].Want != "3600000000" {
		t.Fatalf("drifts %+v, want the changelog's retention.ms, 604800000 under 3600000000", drifts)
	}
	for _, w := range []string{"has retention.ms=604800000 (168h)", "the providers file's longest dedup_ttl wants at least 3600000000 (1000h)", "run `make topics`"} {
		if !strings.Contains(drifts[0].String(), w) {
			t.Errorf("warning %q does not say %q", drifts[0].String(), w)
		}
	}
	if err := topics.SetTuned(ctx, cl, drifts); err != nil {
		t.Fatal(err)
	}
	for _, sh := range [][]topics.Spec{longer, shape(week)} { // raised: enough for both
		if d, err := topics.Drifts(ctx, cl, sh); err != nil || len(d) != 0 {
			t.Fatalf("after SetTuned: drifts %v, %v; want none", d, err)
		}
	}
}

// fakeCluster is a client of a one-broker fake cluster of the test's own.
func fakeCluster(t *testing.T) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
