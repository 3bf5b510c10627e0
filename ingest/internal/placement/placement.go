// Package placement keeps a provider's placement from changing under its
// dedup state unseen. Ingest places an ordered provider's records in
// webhooks.raw by entity, the others' by idempotency key, and a key's
// dedup state lives in the partition its records were placed in. Adding
// ordering, removing it or changing its rule moves a key to another
// partition: a key accepted before and sent again after reaches a
// partition whose state does not know it, and is delivered a second time.
// So ingest records each provider's placement in the control topic
// (control.Placement) and, at start, refuses a placement other than the
// recorded one unless the providers file acknowledges the change with
// placement_from. Settle is what ingest calls; Check is its pure part.
package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
)

// Want is what the providers file asks of one provider's placement.
type Want struct {
	Provider string
	// By is control.PlacedByKey or control.PlacedByEntity(rule).
	By string
	// TTL is the provider's dedup_ttl: how long a key's state is kept.
	TTL time.Duration
	// From is placement_from; zero: no change acknowledged.
	From time.Time
}

// Wants lists what reg's providers ask, in name order.
func Wants(reg *providers.Registry) []Want {
	var ws []Want
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		by := control.PlacedByKey
		if r := p.OrderingRule(); r != "" {
			by = control.PlacedByEntity(r)
		}
		ws = append(ws, Want{Provider: name, By: by, TTL: p.DedupTTL, From: p.PlacementFrom})
	}
	return ws
}

// Skew is how far placement_from may be ahead of this ingest's clock.
const Skew = 5 * time.Minute

// Check compares each provider's wanted placement with the recorded one
// at now and returns the placements to record: a provider without a
// record gets one (a new provider, or the first start of a version that
// records them); one whose placement changed gets the new one when its
// placement_from acknowledges this change (set, not ahead of now by more
// than Skew, and after the recorded placement's Since, so that it cannot
// be an acknowledgement of an earlier change left in the file). Any
// other change is refused: the error names every such provider, the
// hazard and what to do, and nothing is to be recorded.
func Check(recorded map[string]control.Placement, wants []Want, now time.Time) ([]control.Placement, error) {
	now = now.UTC().Truncate(time.Second)
	var (
		writes []control.Placement
		errs   []error
	)
	for _, w := range wants {
		rec, ok := recorded[w.Provider]
		switch {
		case !ok:
			writes = append(writes, control.Placement{Provider: w.Provider, By: w.By, Since: now})
			continue
		case rec.By == w.By:
			continue
		}
		change := describe(rec, w)
		switch {
		case w.From.IsZero():
			errs = append(errs, fmt.Errorf("provider %q: %s. A key accepted before this start and sent again until about %s (now + dedup_ttl %s) would land in another partition of webhooks.raw, whose dedup state does not know it, and be delivered a second time. Undo the change, or accept that hazard: set placement_from: %s on the provider (the time of the change; best while the provider is quiet) and start again",
				w.Provider, change, now.Add(w.TTL).Format(time.RFC3339), w.TTL, now.Format(time.RFC3339)))
		case w.From.After(now.Add(Skew)):
			errs = append(errs, fmt.Errorf("provider %q: %s, and placement_from %s is ahead of this ingest's clock (%s): set it to the time of the change and start again",
				w.Provider, change, w.From.Format(time.RFC3339), now.Format(time.RFC3339)))
		case !w.From.After(rec.Since):
			errs = append(errs, fmt.Errorf("provider %q: %s, and placement_from %s is not after the recorded placement's start (%s), so it acknowledges an earlier change: set placement_from: %s to accept this one (a key sent again across it may be delivered twice) and start again",
				w.Provider, change, w.From.Format(time.RFC3339), rec.Since.Format(time.RFC3339), now.Format(time.RFC3339)))
		default:
			// Since is at least From, so that this From, left in the
			// file, cannot acknowledge the next change too.
			from := w.From.UTC()
			writes = append(writes, control.Placement{Provider: w.Provider, By: w.By, Since: maxTime(now, from), Acknowledged: &from})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("refusing to start: a provider's placement changed: %w", errors.Join(errs...))
	}
	return writes, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// describe says what changed, as an operator made it.
func describe(rec control.Placement, w Want) string {
	was := fmt.Sprintf("by %s since %s", rec.By, rec.Since.UTC().Format(time.RFC3339))
	switch {
	case rec.By == control.PlacedByKey:
		return fmt.Sprintf("ordering was added: its records would be placed by %s, they were placed %s", w.By, was)
	case w.By == control.PlacedByKey:
		return fmt.Sprintf("ordering was removed: its records would be placed by key, they were placed %s", was)
	}
	return fmt.Sprintf("its ordering rule changed: its records would be placed by %s, they were placed %s", w.By, was)
}

// Store is where placements are recorded (ControlStore: the control
// topic).
type Store interface {
	Placements(ctx context.Context) (map[string]control.Placement, error)
	Record(ctx context.Context, p control.Placement) error
}

// Settle reads the recorded placements, checks wants against them at now
// (Check) and records what Check gives, logging each; a refusal records
// nothing and is returned.
func Settle(ctx context.Context, st Store, wants []Want, now time.Time, log *slog.Logger) error {
	recorded, err := st.Placements(ctx)
	if err != nil {
		return fmt.Errorf("read the providers' placements: %w", err)
	}
	writes, err := Check(recorded, wants, now)
	if err != nil {
		return err
	}
	for _, p := range writes {
		if err := st.Record(ctx, p); err != nil {
			return fmt.Errorf("record the placement of %s: %w", p.Provider, err)
		}
		if p.Acknowledged == nil {
			log.Info("placement recorded", "provider", p.Provider, "by", p.By)
			continue
		}
		was := recorded[p.Provider]
		log.Warn("placement changed, acknowledged by placement_from: a key accepted before and sent again within dedup_ttl may be delivered twice",
			"provider", p.Provider, "by", p.By, "was", was.By, "was_since", was.Since, "placement_from", *p.Acknowledged)
	}
	return nil
}

// ControlStore is the Store of the control topic: NewClient makes the
// reader's client, Client writes.
type ControlStore struct {
	NewClient func(...kgo.Opt) (*kgo.Client, error)
	Client    *kgo.Client
	Topic     string
}

var _ Store = ControlStore{}

// Placements reads the topic (control.ReadPlacements).
func (s ControlStore) Placements(ctx context.Context) (map[string]control.Placement, error) {
	ps, err := control.ReadPlacements(ctx, s.NewClient, s.Topic)
	return ps, s.explain(err)
}

// Record writes p (control.WritePlacement).
func (s ControlStore) Record(ctx context.Context, p control.Placement) error {
	return s.explain(control.WritePlacement(ctx, s.Client, s.Topic, p))
}

// explain names the ACLs an authorization error lacks: ingest had none
// on the control topic but to create it before it recorded placements.
func (s ControlStore) explain(err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("%w: ingest's Kafka user needs Read and Write on %s (it records the providers' placements there)", err, s.Topic)
	}
	return err
}
