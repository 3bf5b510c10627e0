package topics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/topics"
)

// TestRouteLane: the route default keeps the lane a provider had before
// routes; another route has its own, named after both.
func TestRouteLane(t *testing.T) {
	n := topics.NewNames("dev.", nil)
	for _, tc := range []struct{ route, want string }{
		{"", "dev.webhooks.lane.stripe"},
		{"default", "dev.webhooks.lane.stripe"},
		{"billing", "dev.webhooks.lane.stripe.billing"},
	} {
		if got := n.RouteLane("stripe", tc.route); got != tc.want {
			t.Errorf("RouteLane(stripe, %q) = %s, want %s", tc.route, got, tc.want)
		}
	}
}

// TestRouteTopicsForeign: a missing route topic is created with raw's
// partition count; an existing one of another shape is taken as it is
// (it is the consumers' topic), where a hookline topic of that shape is a
// mismatch.
func TestRouteTopicsForeign(t *testing.T) {
	cl := fakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "theirs"); err != nil {
		t.Fatal(err)
	}
	sh := topics.Shape{Partitions: 3, MaxMessageBytes: 1 << 20}
	if err := topics.Ensure(ctx, cl, topics.RouteTopicSpecs([]string{"theirs", "billing.ledger"}, sh), -1); err != nil {
		t.Fatalf("route topics: %v", err)
	}
	tds, err := adm.ListTopics(ctx, "theirs", "billing.ledger")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tds["billing.ledger"].Partitions); got != 3 {
		t.Errorf("billing.ledger created with %d partitions, want raw's 3", got)
	}
	if got := len(tds["theirs"].Partitions); got != 1 {
		t.Errorf("theirs has %d partitions, want its own 1, untouched", got)
	}
	owned := []topics.Spec{{Name: "theirs", Partitions: 3, Cleanup: "delete"}}
	var mismatch *topics.MismatchError
	if err := topics.Ensure(ctx, cl, owned, -1); !errors.As(err, &mismatch) {
		t.Errorf("the same topic as a hookline topic: %v, want a mismatch", err)
	}
}
