package topics

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Drift is a tuned config (Spec.Tuned) whose value on an existing topic
// differs from what its spec wants, or a floor (Spec.Floors) it is under:
// the topic was created under another setting. Services warn about it and
// go on; `make topics` (ingest -ensure-topics) sets it.
type Drift struct {
	Topic, Key string
	Have, Want string
	// Var is the environment variable that sets Want, or what else does
	// (ChangelogRetentionBy).
	Var string
}

// String says what differs and how to fix it.
func (d Drift) String() string {
	if !strings.HasPrefix(d.Var, "HOOKLINE_") {
		return fmt.Sprintf("topic %s has %s=%s%s but %s wants at least %s%s; run `make topics` (ingest -ensure-topics) with that providers file to set it, or kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config %s=%s",
			d.Topic, d.Key, d.Have, msNote(d.Key, d.Have), d.Var, d.Want, msNote(d.Key, d.Want), d.Topic, d.Key, d.Want)
	}
	return fmt.Sprintf("topic %s has %s=%s%s but %s wants %s%s; run `%s=%s make topics` (ingest -ensure-topics) to set it, or kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config %s=%s",
		d.Topic, d.Key, d.Have, msNote(d.Key, d.Have), d.Var, d.Want, msNote(d.Key, d.Want),
		d.Var, msDuration(d.Want), d.Topic, d.Key, d.Want)
}

// msNote prints a .ms value as a duration too: " (720h)".
func msNote(key, v string) string {
	if !strings.HasSuffix(key, ".ms") {
		return ""
	}
	return " (" + msDuration(v) + ")"
}

// msDuration prints milliseconds v as a Go duration without trailing zero
// units (720h, 1h30m), or v itself when it is not a number (-1: forever).
func msDuration(v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return v
	}
	s := (time.Duration(n) * time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Drifts compares the tuned configs of the specs' existing topics with the
// specs, in one describe-configs request (none when no spec has tuned
// configs); a topic that does not exist is skipped. Call it after Ensure.
func Drifts(ctx context.Context, cl *kgo.Client, specs []Spec) ([]Drift, error) {
	var names []string
	for _, s := range specs {
		if len(s.Tuned) > 0 || len(s.Floors) > 0 {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	cfgs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("describe topic configs: %w", err)
	}
	var drifts []Drift
	for _, s := range specs {
		if len(s.Tuned) == 0 && len(s.Floors) == 0 {
			continue
		}
		rc, err := cfgs.On(s.Name, nil)
		if err != nil || rc.Err != nil {
			continue // not there (yet): nothing to compare
		}
		for _, k := range slices.Sorted(maps.Keys(s.Floors)) {
			for _, c := range rc.Configs {
				if c.Key == k && c.Value != nil && below(*c.Value, s.Configs[k]) {
					drifts = append(drifts, Drift{Topic: s.Name, Key: k, Have: *c.Value, Want: s.Configs[k], Var: s.Floors[k]})
				}
			}
		}
		keys := make([]string, 0, len(s.Tuned))
		for k := range s.Tuned {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, c := range rc.Configs {
				if c.Key == k && c.Value != nil && *c.Value != s.Configs[k] {
					drifts = append(drifts, Drift{Topic: s.Name, Key: k, Have: *c.Value, Want: s.Configs[k], Var: s.Tuned[k]})
				}
			}
		}
	}
	return drifts, nil
}

// below reports whether have is a number of milliseconds under want; -1
// (forever) and what does not parse are not.
func below(have, want string) bool {
	h, err1 := strconv.ParseInt(have, 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	return err1 == nil && err2 == nil && h >= 0 && h < w
}

// SetTuned sets each drift's config to the value its spec wants, one
// incremental alter-configs request per topic.
func SetTuned(ctx context.Context, cl *kgo.Client, drifts []Drift) error {
	adm := kadm.NewClient(cl)
	for _, d := range drifts {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: d.Key, Value: kadm.StringPtr(d.Want)}}, d.Topic)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(d.Topic, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			return fmt.Errorf("set %s=%s on topic %s: %w", d.Key, d.Want, d.Topic, err)
		}
	}
	return nil
}
