// Package topics names hookline's Kafka topics and consumer groups (DESIGN §2,
// contract) and makes sure the topics exist with the right shape before a
// service starts: missing topics are created with kadm, and an existing topic
// with the wrong partition count or cleanup policy stops the service with a
// message that names the topic and the difference.
package topics

import (
	"cmp"
	"time"

	"github.com/hookline/hookline/pkg/headers"
)

// Base names (DESIGN §2). Every name is prefixed with HOOKLINE_TOPIC_PREFIX.
const (
	BaseRaw         = "webhooks.raw"
	BaseChangelog   = "webhooks.dedup-changelog"
	BaseOutcomes    = "webhooks.outcomes"
	BaseRetryPrefix = "webhooks.retry."
	BaseDLQ         = "webhooks.dlq"
	BaseDLQStatus   = "webhooks.dlq-status"
	// BaseControl holds operators' settings per provider (pause, drain
	// rate), compacted, one partition: every processor follows all of it.
	BaseControl = "webhooks.control"
	// BaseSelftest takes ingest's GET /selftest round trips: one record
	// produced and read back per self-test, one partition, kept an hour.
	BaseSelftest = "webhooks.selftest"
	// BaseLanePrefix names a destination's lane topic, "webhooks.lane.<provider>":
	// the processor parks there the records its destination has no room
	// for, co-partitioned with webhooks.raw.
	BaseLanePrefix = "webhooks.lane."

	GroupProcessor = "hookline-processor"
	GroupRetrier   = "hookline-retrier"
)

// Names are the prefixed topic names of one environment.
type Names struct {
	Prefix    string
	Raw       string
	Changelog string
	Outcomes  string
	DLQ       string
	DLQStatus string
	Control   string
	Selftest  string
	// Retry holds one topic per retry tier, in tier order (tier 1 first).
	Retry []string
}

// NewNames prefixes every topic; tierNames are the retry tiers as
// retry.TierName prints them ("1m", "5m", ...).
func NewNames(prefix string, tierNames []string) Names {
	n := Names{
		Prefix:    prefix,
		Raw:       prefix + BaseRaw,
		Changelog: prefix + BaseChangelog,
		Outcomes:  prefix + BaseOutcomes,
		DLQ:       prefix + BaseDLQ,
		DLQStatus: prefix + BaseDLQStatus,
		Control:   prefix + BaseControl,
		Selftest:  prefix + BaseSelftest,
	}
	for _, t := range tierNames {
		n.Retry = append(n.Retry, prefix+BaseRetryPrefix+t)
	}
	return n
}

// Lane returns the prefixed lane topic of a provider's destination: its
// route default's, or, given "provider.route", another route's (RouteLane).
func (n Names) Lane(provider string) string { return n.Prefix + BaseLanePrefix + provider }

// RouteLane returns the prefixed lane topic of one route of a provider:
// webhooks.lane.<provider> for the route default (the lane of a provider
// before routes), webhooks.lane.<provider>.<route> for another. Provider
// and route names hold no '.', so no two routes share a lane.
func (n Names) RouteLane(provider, route string) string {
	if route == "" || route == headers.DefaultRoute {
		return n.Lane(provider)
	}
	return n.Lane(provider + "." + route)
}

// LaneSpecs returns the wanted shape of the lane topics of providers: like
// raw (its partition count, so lane partition p holds keys of raw partition
// p; 7 days' retention, so parked records outlive a long outage).
func (n Names) LaneSpecs(providers []string, s Shape) []Spec {
	var specs []Spec
	for _, p := range providers {
		specs = append(specs, Spec{Name: n.Lane(p), Partitions: s.Partitions, Cleanup: "delete", Configs: map[string]string{
			"cleanup.policy":    "delete",
			"retention.ms":      ms(7 * day),
			"max.message.bytes": itoa(s.MaxMessageBytes),
		}})
	}
	return specs
}

// RouteTopicSpecs returns the wanted shape of routes' topic destinations
// when missing: raw's partition count and the topics' record size, cleanup
// delete. Their names are used as written (no prefix: they are the
// consumers' topics), and an existing one is taken as it is (Foreign).
func RouteTopicSpecs(names []string, s Shape) []Spec {
	var specs []Spec
	for _, name := range names {
		specs = append(specs, Spec{Name: name, Partitions: s.Partitions, Cleanup: "delete", Foreign: true, Configs: map[string]string{
			"cleanup.policy":    "delete",
			"max.message.bytes": itoa(s.MaxMessageBytes),
		}})
	}
	return specs
}

// Group returns the prefixed name of a consumer group.
func (n Names) Group(base string) string { return n.Prefix + base }

// All lists every topic name.
func (n Names) All() []string {
	return append([]string{n.Raw, n.Changelog, n.Outcomes, n.DLQ, n.DLQStatus, n.Control, n.Selftest}, n.Retry...)
}

// Shape settings shared by every topic of one environment.
type Shape struct {
	// Partitions of every topic (HOOKLINE_PARTITIONS, default 12). raw and
	// the changelog must match, so one number serves all.
	Partitions int32
	// ReplicationFactor for new topics (HOOKLINE_REPLICATION_FACTOR); -1 takes
	// the broker's default.replication.factor.
	ReplicationFactor int16
	// ChangelogRetention must be at least the longest dedup TTL.
	ChangelogRetention time.Duration
	// MaxMessageBytes for topics that carry request bodies: the body limit
	// plus room for headers.
	MaxMessageBytes int
	// DLQRetention is the DLQ topic's retention.ms (HOOKLINE_DLQ_RETENTION;
	// DefaultDLQRetention when 0).
	DLQRetention time.Duration
}

// Spec is the wanted shape of one topic.
type Spec struct {
	Name       string
	Partitions int32
	// Cleanup is the cleanup.policy, checked on existing topics.
	Cleanup string
	// Foreign marks a topic hookline creates when missing but does not
	// own (a route's topic destination, the consumers' topic): an existing
	// one is taken with whatever partitions and cleanup policy it has.
	Foreign bool
	// Configs are set when the topic is created.
	Configs map[string]string
	// Tuned are keys of Configs an operator may change on an existing
	// topic, each with the environment variable that sets it: Ensure does
	// not refuse a difference, Drifts reports it and SetTuned applies the
	// spec's value.
	Tuned map[string]string
	// Floors are keys of Configs (milliseconds) an existing topic must
	// hold at least, each with what sets it: a lower value is a drift
	// (Drifts), a higher one is not; -1 (forever) is enough.
	Floors map[string]string
}

// ChangelogRetentionBy names what sets the changelog's retention in a
// drift: the longest dedup TTL of the providers file.
const ChangelogRetentionBy = "the providers file's longest dedup_ttl"

const day = 24 * time.Hour

// Specs returns the wanted shape of every topic.
func (n Names) Specs(s Shape) []Spec {
	body := func(name string, retention time.Duration) Spec {
		return Spec{Name: name, Partitions: s.Partitions, Cleanup: "delete", Configs: map[string]string{
			"retention.ms":      ms(retention),
			"max.message.bytes": itoa(s.MaxMessageBytes),
		}}
	}
	dlq := body(n.DLQ, cmp.Or(s.DLQRetention, DefaultDLQRetention))
	dlq.Tuned = map[string]string{"retention.ms": "HOOKLINE_DLQ_RETENTION"}
	changelog := Spec{Name: n.Changelog, Partitions: s.Partitions, Cleanup: "compact,delete", Configs: map[string]string{
		"retention.ms": ms(max(s.ChangelogRetention, 7*day)),
		// Compact soon after a key changes, so restore reads little.
		"min.cleanable.dirty.ratio": "0.1",
		"segment.ms":                ms(day),
	}}
	if s.ChangelogRetention > 0 { // a service that read the providers file
		changelog.Floors = map[string]string{"retention.ms": ChangelogRetentionBy}
	}
	specs := []Spec{
		body(n.Raw, 7*day),
		changelog,
		{Name: n.Outcomes, Partitions: s.Partitions, Cleanup: "delete", Configs: map[string]string{"retention.ms": ms(7 * day)}},
		dlq,
		{Name: n.DLQStatus, Partitions: s.Partitions, Cleanup: "compact", Configs: map[string]string{}},
		{Name: n.Control, Partitions: 1, Cleanup: "compact", Configs: map[string]string{}},
		{Name: n.Selftest, Partitions: 1, Cleanup: "delete", Configs: map[string]string{"retention.ms": ms(time.Hour)}},
	}
	for _, r := range n.Retry {
		specs = append(specs, body(r, 7*day))
	}
	for i := range specs {
		specs[i].Configs["cleanup.policy"] = specs[i].Cleanup
	}
	return specs
}
