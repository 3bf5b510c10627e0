package topics

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DeletePrefix deletes every topic and consumer group whose name starts with
// prefix: a test's or a benchmark's clean-up on a shared broker. The prefix
// must be non-empty and end with '.', so it cannot match another
// environment's names by accident.
func DeletePrefix(ctx context.Context, adm *kadm.Client, prefix string) error {
	if prefix == "" || !strings.HasSuffix(prefix, ".") {
		return fmt.Errorf("delete prefix %q: want a non-empty prefix ending in '.'", prefix)
	}
	_, err := DeleteMatching(ctx, adm, func(name string) bool { return strings.HasPrefix(name, prefix) })
	return err
}

// Deleted counts what DeleteMatching deleted, and the groups it left
// because they still had members.
type Deleted struct {
	Topics, Partitions, Groups int
	GroupsInUse                int
}

// DeleteMatching deletes every topic and consumer group whose name match
// accepts, groups first (a group of a deleted topic would keep its offsets),
// and says how many it deleted. A group that still has members
// (NON_EMPTY_GROUP: a member killed moments ago stays until its session
// times out) is left and counted in GroupsInUse, not an error: it holds no
// partitions, and the next sweep deletes it.
func DeleteMatching(ctx context.Context, adm *kadm.Client, match func(name string) bool) (Deleted, error) {
	var d Deleted
	var errs []error
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list groups: %w", err))
	}
	if gs := matching(groups.Groups(), match); len(gs) > 0 {
		res, err := adm.DeleteGroups(ctx, gs...)
		if err == nil {
			for _, r := range res {
				switch {
				case r.Err == nil:
					d.Groups++
				case errors.Is(r.Err, kerr.NonEmptyGroup):
					d.GroupsInUse++
				default:
					err = errors.Join(err, fmt.Errorf("%s: %w", r.Group, r.Err))
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete groups: %w", err))
		}
	}
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list topics: %w", err))
	}
	if ts := matching(tds.Names(), match); len(ts) > 0 {
		res, err := adm.DeleteTopics(ctx, ts...)
		if err == nil {
			err = res.Error()
		}
		for _, r := range res {
			if r.Err == nil {
				d.Topics++
				d.Partitions += len(tds[r.Topic].Partitions)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete topics: %w", err))
		}
	}
	return d, errors.Join(errs...)
}

func matching(names []string, match func(string) bool) []string {
	var out []string
	for _, n := range names {
		if match(n) {
			out = append(out, n)
		}
	}
	return out
}
