package parked

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// TestLane: a lane topic's name says its provider and route: the route
// default without a suffix, another after the provider and a dot; a name
// that is no lane's (another prefix, an empty provider, a bad route) is
// not.
func TestLane(t *testing.T) {
	names := topics.NewNames("t.", nil)
	for topic, want := range map[string][2]string{
		"t.webhooks.lane.stripe":          {"stripe", "default"},
		"t.webhooks.lane.stripe.billing":  {"stripe", "billing"},
		"t.webhooks.lane.stripe-eu.crm_2": {"stripe-eu", "crm_2"},
	} {
		p, r, ok := Lane(names, topic)
		if !ok || p != want[0] || r != want[1] {
			t.Errorf("Lane(%s) = %q, %q, %v; want %v", topic, p, r, ok, want)
		}
	}
	for _, topic := range []string{"webhooks.lane.stripe", "t.webhooks.lane.", "t.webhooks.lane..billing", "t.webhooks.lane.stripe.Bill", "t.webhooks.lane.stripe.a.b", "t.webhooks.retry.5m"} {
		if p, r, ok := Lane(names, topic); ok {
			t.Errorf("Lane(%s) = %q, %q: want no lane", topic, p, r)
		}
	}
}

// TestRecordRoute: a lane record is its lane's route's; a retry-tier
// record its hookline.route's, the route default without one.
func TestRecordRoute(t *testing.T) {
	names := topics.NewNames("", []string{"5m"})
	at := time.Now()
	tiered := &kgo.Record{Topic: names.Retry[0], Key: []byte("k"), Timestamp: at}
	if got := recordOf(names, tiered, "5m").Route; got != "default" {
		t.Errorf("a tier record without a route: %q", got)
	}
	headers.Set(tiered, headers.Route, "crm")
	if got := recordOf(names, tiered, "5m").Route; got != "crm" {
		t.Errorf("a tier record of crm: %q", got)
	}
	laned := &kgo.Record{Topic: names.Lane("stripe") + ".billing", Key: []byte("k"), Timestamp: at}
	if got := recordOf(names, laned, TierLane); got.Route != "billing" {
		t.Errorf("a record of stripe's billing lane: %+v", got)
	}
	if got := (Filter{Provider: "stripe", Route: "billing"}); !got.match("stripe", "billing") || got.match("acme", "billing") || got.match("stripe", "default") {
		t.Error("Filter.match")
	}
}
