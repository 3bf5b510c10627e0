// Package kafkaacl holds the Kafka ACLs each hookline service needs on a
// cluster that authorizes every request (StandardAuthorizer with
// allow.everyone.if.no.acl.found=false), one SCRAM user per service, and
// grants them. compose/kafka.sh secure-up grants them for the local secure
// broker (through compose/kafkaacl); tests grant them for their own topic
// prefix. docs/security.md's table lists the same rules (a test compares them).
package kafkaacl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/topics"
)

// Services are the users with ACLs of their own, one per service.
var Services = []string{"ingest", "processor", "retrier", "dlq"}

// Resource kinds of a Rule.
const (
	Topic           = "topic"
	Group           = "group"
	TransactionalID = "transactional-id"
	Cluster         = "cluster"
)

// Rule allows one user some operations on resources of one kind: a name
// (put after HOOKLINE_TOPIC_PREFIX unless Internal), or every name starting
// with it when Prefixed.
type Rule struct {
	User     string
	Kind     string
	Name     string
	Prefixed bool
	Internal bool // never prefixed: a Kafka internal topic, or a route's topic destination
	Ops      []kadm.ACLOperation
}

var (
	read      = kadm.OpRead
	write     = kadm.OpWrite
	create    = kadm.OpCreate
	describe  = kadm.OpDescribe
	descCfg   = kadm.OpDescribeConfigs
	clusterOp = kadm.OpClusterAction
)

// ensure is what topics.Ensure needs for a topic a service creates when
// missing and checks when present (READ and WRITE imply DESCRIBE).
var ensure = []kadm.ACLOperation{create, describe, descCfg}

func with(ops ...kadm.ACLOperation) []kadm.ACLOperation { return append(ops, create, descCfg) }

// RouteTopicRules are the processor's ACLs on routes' topic destinations
// (providers.Registry.RouteTopics): it creates a missing one, writes each
// route's records to it in its transactions, and its hanging-transaction
// check describes the topic's producers (Read). The names are used as
// written, like the providers file's.
func RouteTopicRules(names []string) []Rule {
	var rules []Rule
	for _, n := range names {
		rules = append(rules, Rule{User: "processor", Kind: Topic, Name: n, Internal: true, Ops: with(read, write)})
	}
	return rules
}

// Rules lists every service's ACLs. Topic and group names are base names
// (DESIGN §2); Grant puts the prefix in front. Routes' topic destinations
// come on top (RouteTopicRules).
func Rules() []Rule {
	t := func(user, name string, ops ...kadm.ACLOperation) Rule {
		return Rule{User: user, Kind: Topic, Name: name, Ops: ops}
	}
	tp := func(user, name string, ops ...kadm.ACLOperation) Rule {
		return Rule{User: user, Kind: Topic, Name: name, Prefixed: true, Ops: ops}
	}
	return []Rule{
		// ingest produces to raw, and to outcomes the outcome of a
		// delivery it suppressed as a replay; at start it creates and
		// checks every topic (topics.Names.Specs) and reads and writes the
		// providers' placements in the control topic (no group); GET
		// /selftest produces to the self-test topic and reads its record
		// back (no group).
		t("ingest", topics.BaseRaw, with(write)...),
		t("ingest", topics.BaseSelftest, with(read, write)...),
		t("ingest", topics.BaseChangelog, ensure...),
		t("ingest", topics.BaseOutcomes, with(write)...),
		t("ingest", topics.BaseDLQ, ensure...),
		t("ingest", topics.BaseDLQStatus, ensure...),
		t("ingest", topics.BaseControl, with(read, write)...),
		tp("ingest", topics.BaseRetryPrefix, ensure...),

		// processor: reads raw, its lanes and the control topic in its
		// group, writes changelog, outcomes, tiers, dlq and lanes in
		// transactions, and its breaker reports to the control topic; the hanging-transaction check describes its
		// producers on its output topics and __consumer_offsets (Read),
		// reads __transaction_state and writes markers (ClusterAction).
		t("processor", topics.BaseRaw, with(read)...),
		t("processor", topics.BaseChangelog, with(read, write)...),
		t("processor", topics.BaseOutcomes, with(read, write)...),
		t("processor", topics.BaseDLQ, with(read, write)...),
		t("processor", topics.BaseControl, with(read, write)...),
		t("processor", topics.BaseDLQStatus, ensure...),
		t("processor", topics.BaseSelftest, ensure...),
		tp("processor", topics.BaseRetryPrefix, with(read, write)...),
		tp("processor", topics.BaseLanePrefix, with(read, write)...),
		{User: "processor", Kind: Group, Name: topics.GroupProcessor, Ops: []kadm.ACLOperation{read}},
		{User: "processor", Kind: TransactionalID, Name: topics.GroupProcessor + "-", Prefixed: true, Ops: []kadm.ACLOperation{write, describe}},
		{User: "processor", Kind: Topic, Name: "__consumer_offsets", Internal: true, Ops: []kadm.ACLOperation{read}},
		{User: "processor", Kind: Topic, Name: "__transaction_state", Internal: true, Ops: []kadm.ACLOperation{read}},
		{User: "processor", Kind: Cluster, Ops: []kadm.ACLOperation{clusterOp}},

		// retrier: reads the tiers in its group, writes raw.
		tp("retrier", topics.BaseRetryPrefix, with(read)...),
		t("retrier", topics.BaseRaw, with(write)...),
		{User: "retrier", Kind: Group, Name: topics.GroupRetrier, Ops: []kadm.ACLOperation{read}},

		// dlq (the operator's tool and dlq serve): reads every hookline
		// topic (list, show, trace, parked), replays to raw, writes
		// resolutions and provider settings; creates the status topic;
		// reads where the retrier and the processors stand (parked).
		tp("dlq", "webhooks.", read),
		t("dlq", topics.BaseRaw, write),
		t("dlq", topics.BaseControl, write),
		t("dlq", topics.BaseDLQStatus, with(write)...),
		{User: "dlq", Kind: Group, Name: topics.GroupProcessor, Ops: []kadm.ACLOperation{describe}},
		{User: "dlq", Kind: Group, Name: topics.GroupRetrier, Ops: []kadm.ACLOperation{describe}},
	}
}

// ResourceName is the rule's resource name for a topic prefix.
func (r Rule) ResourceName(prefix string) string {
	if r.Internal || r.Kind == Cluster {
		return r.Name
	}
	return prefix + r.Name
}

// Builder is the rule as a kadm ACL builder for a topic prefix.
func (r Rule) Builder(prefix string) *kadm.ACLBuilder {
	b := kadm.NewACLs().Allow("User:" + r.User).Operations(r.Ops...)
	if r.Prefixed {
		b.ResourcePatternType(kadm.ACLPatternPrefixed)
	} else {
		b.ResourcePatternType(kadm.ACLPatternLiteral)
	}
	switch name := r.ResourceName(prefix); r.Kind {
	case Topic:
		b.Topics(name)
	case Group:
		b.Groups(name)
	case TransactionalID:
		b.TransactionalIDs(name)
	case Cluster:
		b.Clusters()
	}
	return b
}

// Grant creates every rule's ACLs for topics and groups named with prefix
// (HOOKLINE_TOPIC_PREFIX), and the processor's on routeTopics (the routes'
// topic destinations, as written). Granting twice is harmless: an ACL is
// a set member. One CreateACLs request per rule; adm must act as a super
// user.
func Grant(ctx context.Context, adm *kadm.Client, prefix string, routeTopics ...string) (int, error) {
	n := 0
	for _, r := range append(Rules(), RouteTopicRules(routeTopics)...) {
		res, err := adm.CreateACLs(ctx, r.Builder(prefix))
		if err != nil {
			return n, fmt.Errorf("create ACLs of %s on %s %s: %w", r.User, r.Kind, r.ResourceName(prefix), err)
		}
		var errs []error
		for _, c := range res {
			if c.Err != nil {
				errs = append(errs, fmt.Errorf("%s %s on %s: %w %s", c.Principal, c.Operation, c.Name, c.Err, c.ErrMessage))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return n, fmt.Errorf("create ACLs: %w", err)
		}
		n += len(res)
	}
	return n, nil
}

// OpsString names the rule's operations as Kafka's tools do (Read, Write, ...).
func (r Rule) OpsString() string {
	var out []string
	for _, o := range r.Ops {
		out = append(out, opName(o))
	}
	return strings.Join(out, ", ")
}

func opName(o kadm.ACLOperation) string {
	switch o {
	case read:
		return "Read"
	case write:
		return "Write"
	case create:
		return "Create"
	case describe:
		return "Describe"
	case descCfg:
		return "DescribeConfigs"
	case clusterOp:
		return "ClusterAction"
	}
	return o.String()
}

// Table is the rules as docs/security.md's markdown table (a test keeps the two
// equal): user, resource, name (P is HOOKLINE_TOPIC_PREFIX; "…" marks a
// prefixed name) and operations.
func Table() string {
	var b strings.Builder
	b.WriteString("| user | resource | name | operations |\n|---|---|---|---|\n")
	for _, r := range Rules() {
		name := "`" + r.ResourceName("P") + "`"
		switch {
		case r.Kind == Cluster:
			name = "the cluster"
		case r.Prefixed:
			name = "`" + r.ResourceName("P") + "…`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.User, r.Kind, name, r.OpsString())
	}
	rt := RouteTopicRules([]string{"T"})[0]
	fmt.Fprintf(&b, "| %s | %s | each route's `destination.topic` T, as written | %s |\n", rt.User, rt.Kind, rt.OpsString())
	return b.String()
}
