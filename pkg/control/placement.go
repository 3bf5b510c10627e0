package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// placementPrefix is the key prefix of a provider's placement record.
const placementPrefix = "placement:"

// PlacedByKey is the placement of a provider without ordering: its
// records go to webhooks.raw's partition of their idempotency key.
const PlacedByKey = "key"

// PlacedByEntity is the placement of an ordered provider whose rule (as
// rule.Rule.String names it: "json /data/object/customer", "header
// X-Entity") finds each event's entity: its records go to the partition of
// their entity. Two rules place one key in different partitions, so a
// changed rule is a changed placement.
func PlacedByEntity(rule string) string { return "entity " + rule }

// Placement is how ingest places a provider's records in the partitions
// of webhooks.raw, as last recorded, one record per provider keyed
// "placement:<provider>". A key's dedup state lives in the partition its
// records were placed in; a placement that changes sends a key accepted
// before and sent again after to another partition, which does not know
// it. So ingest records the placement it starts with, and refuses to
// start with another unless the providers file acknowledges the change
// (ingest/internal/placement).
type Placement struct {
	Provider string `json:"provider"`
	// By is PlacedByKey or PlacedByEntity(rule).
	By string `json:"by"`
	// Since is when an ingest first started with this placement.
	Since time.Time `json:"since"`
	// Acknowledged is the providers file's placement_from that let the
	// change from the placement before happen; nil for a first record or
	// one without a change.
	Acknowledged *time.Time `json:"acknowledged,omitempty"`
}

// Key is the record key: "placement:<provider>".
func (p Placement) Key() string { return placementPrefix + p.Provider }

// Validate refuses a placement no ingest could compare.
func (p Placement) Validate() error {
	var errs []error
	if err := checkProvider(p.Provider); err != nil {
		errs = append(errs, err)
	}
	if p.By != PlacedByKey && !strings.HasPrefix(p.By, PlacedByEntity("")) {
		errs = append(errs, fmt.Errorf("placement by %q: want %q or %q", p.By, PlacedByKey, PlacedByEntity("<rule>")))
	}
	return errors.Join(errs...)
}

// PlacementRecord is the control topic record of p.
func PlacementRecord(topic string, p Placement) (*kgo.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return jsonRecord(topic, p.Key(), p)
}

// DecodePlacement reads a placement record; ok is false for a record of
// another kind. A tombstone is a zero Placement naming the provider (no
// placement recorded).
func DecodePlacement(r *kgo.Record) (p Placement, ok bool, err error) {
	name, found := strings.CutPrefix(string(r.Key), placementPrefix)
	if !found {
		return Placement{}, false, nil
	}
	if r.Value == nil {
		return Placement{Provider: name}, true, nil
	}
	if err := json.Unmarshal(r.Value, &p); err != nil {
		return Placement{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if p.Provider != name {
		return Placement{}, true, fmt.Errorf("control record %s names provider %q", r.Key, p.Provider)
	}
	if err := p.Validate(); err != nil {
		return Placement{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	return p, true, nil
}

// WritePlacement produces p to the control topic with cl and waits for
// the acknowledgement.
func WritePlacement(ctx context.Context, cl *kgo.Client, topic string, p Placement) error {
	r, err := PlacementRecord(topic, p)
	if err != nil {
		return err
	}
	return produceSync(ctx, cl, r, "the placement of "+p.Provider)
}

// ReadPlacements reads the control topic from its start to the end it
// had when called, with newClient's client, and returns the placement
// recorded per provider. A placement record it cannot read is an error
// (the caller must not guess a placement); so is not reaching the end
// before ctx ends. Cost: one consumer, one pass over the compacted topic.
func ReadPlacements(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string) (map[string]Placement, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := map[string]Placement{}
	var bad, fetch []error
	caught := false
	err := follow(rctx, newClient, topic, func(r *kgo.Record) {
		p, ok, err := DecodePlacement(r)
		switch {
		case !ok:
		case err != nil:
			bad = append(bad, err)
		case p.By == "":
			delete(got, p.Provider)
		default:
			got[p.Provider] = p
		}
	}, func() { caught = true; cancel() }, func(err error) { fetch = append(fetch, err) })
	switch {
	case err != nil:
		return nil, err
	case len(bad) > 0:
		return nil, errors.Join(bad...)
	case !caught:
		return nil, fmt.Errorf("control: reading the placements in %s: %w", topic, errors.Join(append(fetch, ctx.Err())...))
	}
	return got, nil
}
