package settings

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
)

// Read reads the control topic from its start to the end it has when Read
// starts (read_committed, as every dlq command reads) and returns the
// latest setting of each provider and route, by name
// (control.Setting.Name: "stripe", "stripe/billing"). A record it cannot
// read is passed to bad and skipped. It fails when ctx ends first. Cost:
// one consumer, the whole topic (compacted: about one record per provider
// and route ever set, and per breaker).
func Read(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string, bad func(error)) (map[string]control.Setting, error) {
	got, _, err := ReadAll(ctx, newClient, topic, bad)
	return got, err
}

// ReadAll is Read that also keeps every processor's reports, breakers and
// held entities (dlq status), from the same reading.
func ReadAll(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string, bad func(error)) (map[string]control.Setting, control.Reports, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	got := map[string]control.Setting{}
	reports := control.NewReports()
	caught := false
	err := control.FollowAll(ctx, newClient, topic,
		reports.Appliers(func(s control.Setting) { got[s.Name()] = s }),
		func() { caught = true; stop() },
		bad)
	switch {
	case err != nil:
		return nil, control.Reports{}, err
	case !caught:
		return nil, control.Reports{}, fmt.Errorf("read %s: %w before reaching its end", topic, context.Cause(ctx))
	}
	return got, reports, nil
}
