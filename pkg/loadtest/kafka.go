package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Prefix is a topic and group prefix for one benchmark run, name and six
// random hex digits, ending in '.' as DeletePrefix wants:
// "bench-e2e-3f9a1c.".
func Prefix(name string) string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return name + "-" + hex.EncodeToString(r[:]) + "."
}

// DeletePrefix deletes every topic and consumer group whose name starts with
// prefix: a benchmark's clean-up on a shared broker. The prefix must be
// non-empty and end with '.', so it cannot match another environment's
// names by accident.
func DeletePrefix(ctx context.Context, adm *kadm.Client, prefix string) error {
	if prefix == "" || !strings.HasSuffix(prefix, ".") {
		return fmt.Errorf("delete prefix %q: want a non-empty prefix ending in '.'", prefix)
	}
	var errs []error
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list groups: %w", err))
	}
	if gs := withPrefix(groups.Groups(), prefix); len(gs) > 0 {
		res, err := adm.DeleteGroups(ctx, gs...)
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
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
	if ts := withPrefix(tds.Names(), prefix); len(ts) > 0 {
		res, err := adm.DeleteTopics(ctx, ts...)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete topics: %w", err))
		}
	}
	return errors.Join(errs...)
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
