package topics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MismatchError reports topics that exist with the wrong shape. Services
// refuse to start on it: fixing a topic's partition count or cleanup policy
// is an operator's decision, never an automatic one.
type MismatchError struct {
	Problems []string
}

func (e *MismatchError) Error() string {
	return "topics exist with the wrong shape (fix or delete them, or set HOOKLINE_TOPIC_PREFIX): " + strings.Join(e.Problems, "; ")
}

// Ensure creates the missing topics and checks the existing ones: partition
// count and cleanup policy must match the spec. It costs one metadata and one
// describe-configs request, plus one create request when topics are missing.
// Several services may race to create the same topic: losing the race is fine.
//
// kadm answers from the client's metadata cache (up to MetadataMinAge old),
// which may still say "unknown topic" for a topic created a moment ago; the
// cache is purged for these topics before and after creating, so the check
// sees the broker's view. The purge also makes a producing client forget the
// topics' sequence numbers, after which the broker silently drops its next
// records to partitions it had written: call Ensure before producing on cl,
// or on a client that does not produce (dlq's store.EnsureStatusTopic).
func Ensure(ctx context.Context, cl *kgo.Client, specs []Spec, replicationFactor int16) error {
	adm := kadm.NewClient(cl)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	cl.PurgeTopicsFromClient(names...)
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	var existing []string
	for _, s := range specs {
		d, ok := details[s.Name]
		if ok && d.Err == nil {
			existing = append(existing, s.Name)
			continue
		}
		if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("topic %s: %w", s.Name, d.Err)
		}
		configs := make(map[string]*string, len(s.Configs))
		for k, v := range s.Configs {
			configs[k] = kadm.StringPtr(v)
		}
		_, err := adm.CreateTopic(ctx, s.Partitions, replicationFactor, configs, s.Name)
		switch {
		case err == nil:
		case errors.Is(err, kerr.TopicAlreadyExists):
			existing = append(existing, s.Name) // another service won the race
		default:
			return fmt.Errorf("create topic %s: %w", s.Name, err)
		}
	}
	if len(existing) > 0 {
		if err := check(ctx, cl, adm, specs, existing); err != nil {
			return err
		}
	}
	return waitLeaders(ctx, cl, adm, names)
}

// waitLeaders returns once the broker's metadata shows every topic with a
// leader for each partition: a topic created a moment ago is not usable
// before (a produce to it fails as unknown), which a freshly started broker
// takes seconds to reach. Bounded by ctx.
func waitLeaders(ctx context.Context, cl *kgo.Client, adm *kadm.Client, names []string) error {
	for {
		cl.PurgeTopicsFromClient(names...)
		details, err := adm.ListTopics(ctx, names...)
		missing := ""
		if err == nil {
		outer:
			for _, n := range names {
				d, ok := details[n]
				if !ok || d.Err != nil || len(d.Partitions) == 0 {
					missing = n
					break
				}
				for _, p := range d.Partitions {
					if p.Err != nil || p.Leader < 0 {
						missing = fmt.Sprintf("%s[%d]", n, p.Partition)
						break outer
					}
				}
			}
			if missing == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics not usable yet (%s): %w", errors.Join(err, errors.New("waiting for "+missing)), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func check(ctx context.Context, cl *kgo.Client, adm *kadm.Client, specs []Spec, existing []string) error {
	// A topic created a moment ago by another service may not be in every
	// broker's metadata yet: retry briefly before judging it.
	var details kadm.TopicDetails
	var err error
	// On a broker that has just started this takes seconds: wait as long as
	// the caller's ctx allows (every service starts with a bounded one).
	for {
		cl.PurgeTopicsFromClient(existing...)
		details, err = adm.ListTopics(ctx, existing...)
		if err == nil && details.Error() == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics created by another service are not visible yet: %w", errors.Join(err, details.Error(), ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	// DescribeConfigs goes to any broker, which in a cluster may not have
	// the topic in its metadata yet although the one that answered
	// ListTopics has: retry while a broker says it does not know a topic.
	var cfgs kadm.ResourceConfigs
	for {
		cfgs, err = adm.DescribeTopicConfigs(ctx, existing...)
		if err != nil {
			return fmt.Errorf("describe topic configs: %w", err)
		}
		unknown := ""
		for _, rc := range cfgs {
			if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				unknown = rc.Name
			}
		}
		if unknown == "" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("describe topic configs %s: a broker does not know it yet: %w", unknown, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	want := make(map[string]Spec, len(specs))
	for _, s := range specs {
		want[s.Name] = s
	}
	var problems []string
	for _, name := range existing {
		s := want[name]
		d := details[name]
		if d.Err != nil {
			return fmt.Errorf("topic %s: %w", name, d.Err)
		}
		if s.Foreign {
			continue
		}
		if got := int32(len(d.Partitions)); got != s.Partitions {
			problems = append(problems, fmt.Sprintf("%s has %d partitions, want %d (HOOKLINE_PARTITIONS)", name, got, s.Partitions))
		}
		rc, err := cfgs.On(name, nil)
		if err != nil {
			return fmt.Errorf("describe topic configs %s: %w", name, err)
		}
		if rc.Err != nil {
			return fmt.Errorf("describe topic configs %s: %w", name, rc.Err)
		}
		policy := "delete"
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		if normPolicy(policy) != normPolicy(s.Cleanup) {
			problems = append(problems, fmt.Sprintf("%s has cleanup.policy=%s, want %s", name, policy, s.Cleanup))
		}
	}
	if len(problems) > 0 {
		return &MismatchError{Problems: problems}
	}
	return nil
}

// normPolicy sorts a cleanup.policy list, so "delete,compact" equals
// "compact,delete".
func normPolicy(p string) string {
	parts := strings.Split(strings.ReplaceAll(p, " ", ""), ",")
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
func itoa(n int) string         { return strconv.Itoa(n) }

// EnsureRetrying runs Ensure until it succeeds, trying again while the
// cluster cannot be reached or refuses the client (a wrong password, a
// missing ACL): each attempt is bounded by attempt, and each failure is
// passed to failed with the wait before the next try (1 s, doubling to
// 10 s), for the service to log it and report it on /readyz. Topics of the
// wrong shape end it with the *MismatchError (an operator must decide);
// when ctx ends first it returns ctx's error.
func EnsureRetrying(ctx context.Context, cl *kgo.Client, specs []Spec, replicationFactor int16, attempt time.Duration,
	failed func(err error, retryIn time.Duration)) error {
	for wait := time.Second; ; wait = min(2*wait, 10*time.Second) {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := Ensure(actx, cl, specs, replicationFactor)
		cancel()
		var mismatch *MismatchError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &mismatch):
			return err
		}
		failed(err, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
