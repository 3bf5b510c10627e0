package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
)

var (
	now      = time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	week     = 168 * time.Hour
	byCust   = control.PlacedByEntity("json /data/object/customer")
	byHeader = control.PlacedByEntity("header X-Entity")
)

// TestCheck is the decision table: a provider without a record gets one;
// an unchanged placement is left alone; a changed one is refused, with
// the hazard and what to do, unless placement_from acknowledges this very
// change; one refusal records nothing.
func TestCheck(t *testing.T) {
	earlier := now.Add(-48 * time.Hour)
	rec := func(by string) map[string]control.Placement {
		return map[string]control.Placement{"stripe": {Provider: "stripe", By: by, Since: earlier}}
	}
	want := func(by string, from time.Time) []Want {
		return []Want{{Provider: "stripe", By: by, TTL: week, From: from}}
	}
	ack := now.Add(-time.Minute)
	for _, tc := range []struct {
		name     string
		recorded map[string]control.Placement
		wants    []Want
		write    []control.Placement
		refused  []string // each in the error, in order; nil: no error
	}{
		{"first start: recorded as it is", nil, want(byCust, time.Time{}),
			[]control.Placement{{Provider: "stripe", By: byCust, Since: now}}, nil},
		{"unchanged", rec(control.PlacedByKey), want(control.PlacedByKey, time.Time{}), nil, nil},
		{"unchanged, an old acknowledgement left in the file", rec(byCust), want(byCust, earlier.Add(-time.Hour)), nil, nil},
		{"ordering added", rec(control.PlacedByKey), want(byCust, time.Time{}), nil,
			[]string{`provider "stripe": ordering was added`, "by entity json /data/object/customer", "by key since 2026-11-26T17:00:00Z",
				"until about 2026-12-05T17:00:00Z (now + dedup_ttl 168h0m0s)", "delivered a second time", "placement_from: 2026-11-28T17:00:00Z"}},
		{"ordering removed", rec(byCust), want(control.PlacedByKey, time.Time{}), nil,
			[]string{"ordering was removed", "by entity json /data/object/customer since", "placement_from: 2026-11-28T17:00:00Z"}},
		{"ordering rule changed", rec(byCust), want(byHeader, time.Time{}), nil,
			[]string{"ordering rule changed", "by entity header X-Entity", "placement_from:"}},
		{"ordering added, acknowledged", rec(control.PlacedByKey), want(byCust, ack),
			[]control.Placement{{Provider: "stripe", By: byCust, Since: now, Acknowledged: &ack}}, nil},
		{"acknowledged a little ahead of the clock: Since is the acknowledgement", rec(control.PlacedByKey), want(byCust, now.Add(time.Minute)),
			[]control.Placement{{Provider: "stripe", By: byCust, Since: now.Add(time.Minute), Acknowledged: ptr(now.Add(time.Minute))}}, nil},
		{"acknowledged far ahead of the clock", rec(control.PlacedByKey), want(byCust, now.Add(time.Hour)), nil,
			[]string{"ordering was added", "placement_from 2026-11-28T18:00:00Z is ahead of this ingest's clock"}},
		{"an acknowledgement of an earlier change", rec(control.PlacedByKey), want(byCust, earlier), nil,
			[]string{"ordering was added", "is not after the recorded placement's start (2026-11-26T17:00:00Z)", "placement_from: 2026-11-28T17:00:00Z"}},
		{"one refusal records nothing", rec(control.PlacedByKey),
			append(want(byCust, time.Time{}), Want{Provider: "github", By: control.PlacedByKey, TTL: week}), nil,
			[]string{`"stripe": ordering was added`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Check(tc.recorded, tc.wants, now)
			if tc.refused == nil && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.refused != nil {
				if err == nil {
					t.Fatalf("not refused, recorded %+v", got)
				}
				for _, w := range tc.refused {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal does not say %q:\n%v", w, err)
					}
				}
			}
			if !samePlacements(got, tc.write) {
				t.Errorf("records %+v, want %+v", got, tc.write)
			}
		})
	}
}

func ptr(t time.Time) *time.Time { return &t }

func samePlacements(a, b []control.Placement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Provider != y.Provider || x.By != y.By || !x.Since.Equal(y.Since) || (x.Acknowledged == nil) != (y.Acknowledged == nil) ||
			x.Acknowledged != nil && !x.Acknowledged.Equal(*y.Acknowledged) {
			return false
		}
	}
	return true
}

// TestWants: each provider of the file asks by key, or by its ordering
// rule, with its dedup_ttl and placement_from.
func TestWants(t *testing.T) {
	reg, err := providers.Parse([]byte(`providers:
  a:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id}
    ordering: {json: /entity}
    dedup_ttl: 24h
    placement_from: 2026-11-28T16:59:00Z
  b:
    preset: generic
    signature: {none: true}
    idempotency_key: {json: /id}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	got := Wants(reg)
	want := []Want{
		{Provider: "a", By: control.PlacedByEntity("json /entity"), TTL: 24 * time.Hour, From: now.Add(-time.Minute)},
		{Provider: "b", By: control.PlacedByKey, TTL: week},
	}
	if len(got) != len(want) {
		t.Fatalf("wants %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i].Provider != want[i].Provider || got[i].By != want[i].By || got[i].TTL != want[i].TTL || !got[i].From.Equal(want[i].From) {
			t.Errorf("want %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// fakeStore is a Store of function fields.
type fakeStore struct {
	placements func(context.Context) (map[string]control.Placement, error)
	record     func(context.Context, control.Placement) error
}

func (s fakeStore) Placements(ctx context.Context) (map[string]control.Placement, error) {
	return s.placements(ctx)
}

func (s fakeStore) Record(ctx context.Context, p control.Placement) error { return s.record(ctx, p) }

var _ Store = fakeStore{}

// TestSettle: what Check gives is recorded, so the next start with the
// same file passes without placement_from, and a placement_from left in
// the file does not acknowledge the next change; a refusal records
// nothing; a store that cannot be read stops the start.
func TestSettle(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	recorded := map[string]control.Placement{}
	var failRead error
	st := fakeStore{
		placements: func(context.Context) (map[string]control.Placement, error) { return recorded, failRead },
		record:     func(_ context.Context, p control.Placement) error { recorded[p.Provider] = p; return nil },
	}
	ctx := context.Background()
	if err := Settle(ctx, st, []Want{{Provider: "stripe", By: control.PlacedByKey, TTL: week}}, now.Add(-time.Hour), log); err != nil {
		t.Fatal(err)
	}
	ordered := []Want{{Provider: "stripe", By: byCust, TTL: week}}
	if err := Settle(ctx, st, ordered, now, log); err == nil || recorded["stripe"].By != control.PlacedByKey {
		t.Fatalf("ordering added without placement_from: %v, recorded %+v; want a refusal and by key kept", err, recorded)
	}
	ordered[0].From = now
	if err := Settle(ctx, st, ordered, now, log); err != nil || recorded["stripe"].By != byCust {
		t.Fatalf("acknowledged: %v, recorded %+v", err, recorded)
	}
	ordered[0].From = time.Time{}
	if err := Settle(ctx, st, ordered, now.Add(time.Hour), log); err != nil {
		t.Fatalf("the next start with the same file: %v", err)
	}
	removed := []Want{{Provider: "stripe", By: control.PlacedByKey, TTL: week, From: now}}
	if err := Settle(ctx, st, removed, now.Add(2*time.Hour), log); err == nil || !strings.Contains(err.Error(), "acknowledges an earlier change") {
		t.Fatalf("ordering removed later, the first placement_from left in the file: %v; want a refusal", err)
	}
	failRead = errors.New("broker gone")
	if err := Settle(ctx, st, ordered, now, log); err == nil || !strings.Contains(err.Error(), "broker gone") {
		t.Fatalf("an unreadable store: %v", err)
	}
}

// TestControlStoreExplains: an authorization error names the ACLs ingest
// needs on the control topic; other errors pass as they are.
func TestControlStoreExplains(t *testing.T) {
	st := ControlStore{Topic: "webhooks.control"}
	err := st.explain(fmt.Errorf("control: end offsets of webhooks.control: %w", kerr.TopicAuthorizationFailed))
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "needs Read and Write on webhooks.control") {
		t.Errorf("authorization: %v", err)
	}
	other := errors.New("broker gone")
	if got := st.explain(other); got != other {
		t.Errorf("another error: %v", got)
	}
	if st.explain(nil) != nil {
		t.Error("nil became an error")
	}
}
