package consume

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/state"
)

// gauges lists a gauge vec's series in reg as "provider/route=value",
// sorted.
func gauges(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, fmt.Sprintf("%s/%s=%g", l["provider"], l["route"], m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

// TestTallyHolds: the gauges from entities' holds. A hold counts where
// records wait behind it (a head failing with nothing behind it is no
// held entity yet); per provider and route, the entities, the records
// waiting, the oldest first (at most control.HeldTop) with where its
// head waits; the held-seconds gauge is the oldest's age; an ordered
// route holding nothing shows 0; a route no longer held drops out.
func TestTallyHolds(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	since := func(ago time.Duration) time.Time { return now.Add(-ago) }
	tiers := func(i int) string { return map[int]string{0: "lane", 1: "1m", 2: "5m"}[i] }
	type ent struct {
		provider, entity string
		holds            decide.Holds
	}
	cases := []struct {
		name     string
		entities []ent
		routes   []string // provider/route entities waiting: entity@tier ...
		held     []string // the gauges
		seconds  []string
	}{
		{name: "nothing held", held: []string{"ord/audit=0", "ord/crm=0"}, seconds: []string{"ord/audit=0", "ord/crm=0"}},
		{name: "head failing alone", entities: []ent{{"ord", "e1", decide.Holds{{Route: "crm", Head: "k1", Next: 1, Deliver: 1, Tier: 1, Since: since(time.Hour)}}}},
			held: []string{"ord/audit=0", "ord/crm=0"}, seconds: []string{"ord/audit=0", "ord/crm=0"}},
		{name: "held on two routes", entities: []ent{
			{"ord", "e1", decide.Holds{
				{Route: "audit", Head: "k1", Next: 2, Deliver: 1, Tier: 0, Since: since(time.Minute)},
				{Route: "crm", Head: "k1", Next: 4, Deliver: 1, Tier: 2, Since: since(20 * time.Minute)},
			}},
			{"ord", "e2", decide.Holds{{Route: "crm", Head: "k9", Next: 2, Deliver: 1, Tier: 2, Dead: true, Since: since(90 * time.Minute)}}},
			{"ord", "e3", decide.Holds{{Route: "crm", Head: "", Next: 5, Deliver: 3, Since: since(time.Hour)}}},
		},
			routes:  []string{"ord/audit 1 1: e1@lane", "ord/crm 3 6: e2@5m(dead) e3@ e1@5m"},
			held:    []string{"ord/audit=1", "ord/crm=3"},
			seconds: []string{"ord/audit=60", "ord/crm=5400"},
		},
		{name: "top five", entities: func() []ent {
			var es []ent
			for i := range 7 {
				es = append(es, ent{"ord", fmt.Sprintf("e%d", i), decide.Holds{{Route: "crm", Head: "k", Next: 2, Deliver: 1, Tier: 1, Since: since(time.Duration(i) * time.Minute)}}})
			}
			return es
		}(), routes: []string{"ord/crm 7 7: e6@1m e5@1m e4@1m e3@1m e2@1m"}, held: []string{"ord/audit=0", "ord/crm=7"}, seconds: []string{"ord/audit=0", "ord/crm=360"}},
		{name: "a route gone from the file", entities: []ent{{"ord", "e1", decide.Holds{{Route: "old", Head: "k", Next: 2, Deliver: 1, Tier: 1, Since: since(time.Minute)}}}},
			routes: []string{"ord/old 1 1: e1@1m"}, held: []string{"ord/audit=0", "ord/crm=0", "ord/old=1"}, seconds: []string{"ord/audit=0", "ord/crm=0", "ord/old=60"}},
		{name: "drained", held: []string{"ord/audit=0", "ord/crm=0"}, seconds: []string{"ord/audit=0", "ord/crm=0"}},
	}
	reg := prometheus.NewRegistry()
	m := newHoldMetrics(reg)
	for _, c := range cases { // in order, on one registry: each case's series replace the last's
		t.Run(c.name, func(t *testing.T) {
			by := map[[2]string]*control.HeldRoute{}
			for _, e := range c.entities {
				tallyHolds(by, e.provider, e.entity, e.holds, tiers)
			}
			h := control.HeldReport{Partition: 0, Instance: "p1", At: now}
			for _, r := range by {
				h.Routes = append(h.Routes, *r)
			}
			routes := control.HeldReports{0: h}.Routes(now)
			var got []string
			for _, r := range routes {
				s := fmt.Sprintf("%s/%s %d %d:", r.Provider, r.Route, r.Entities, r.Waiting)
				for _, e := range r.Oldest {
					s += " " + e.Entity + "@" + e.Tier
					if e.Dead {
						s += "(dead)"
					}
				}
				got = append(got, s)
			}
			if strings.Join(got, "|") != strings.Join(c.routes, "|") {
				t.Errorf("routes %q, want %q", got, c.routes)
			}
			m.setHeld(routes, [][2]string{{"ord", "audit"}, {"ord", "crm"}}, now)
			if got := gauges(t, reg, "hookline_processor_entities_held"); !slices.Equal(got, c.held) {
				t.Errorf("entities held %q, want %q", got, c.held)
			}
			if got := gauges(t, reg, "hookline_processor_entity_held_seconds"); !slices.Equal(got, c.seconds) {
				t.Errorf("held seconds %q, want %q", got, c.seconds)
			}
		})
	}
}

func mustStore(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.Open(state.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// lastHeld is the latest held report of raw partition part on the control
// topic; ok is false when there is none.
func (f *fakeKafka) lastHeld(t *testing.T, part int32) (h control.HeldReport, ok bool) {
	t.Helper()
	for _, r := range f.readCommitted(t, f.names.Control) {
		got, isHeld, err := control.DecodeHeld(r)
		if err != nil {
			t.Fatal(err)
		}
		if isHeld && got.Partition == part {
			h, ok = got, true
		}
	}
	return h, ok
}

// TestOrderingHeldSeen (issue 24 item 3): while an entity's head waits on
// crm with later records held behind it, the processor's gauges count the
// entity on ord/crm (0 on audit) and its report on the control topic
// (held:0) names the entity, its head, the records waiting and the tier;
// once the head is done and the held records delivered, the gauges go
// back to 0 and the report to a tombstone.
func TestOrderingHeldSeen(t *testing.T) {
	f := newFakeKafka(t)
	adm := kadm.NewClient(f.client(t))
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, f.names.RouteLane("ord", "crm"), f.names.RouteLane("ord", "audit")); err != nil {
		t.Fatal(err)
	}
	dest := &callLog{fail: map[string]int{"crm/e7-1": 1}}
	reg := prometheus.NewRegistry()
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"ord/crm": dest, "ord/audit": dest},
		procOptions{providersYAML: orderedYAML, metrics: reg, holdsEvery: 50 * time.Millisecond})
	for i := 1; i <= 3; i++ {
		f.produceEntity(t, fmt.Sprintf("e7-%d", i), "e7")
	}
	waitFor(t, "the gauge to count e7 held on crm", func() bool {
		return slices.Equal(gauges(t, reg, "hookline_processor_entities_held"), []string{"ord/audit=0", "ord/crm=1"})
	})
	if s := gauges(t, reg, "hookline_processor_entity_held_seconds"); len(s) != 2 || s[0] != "ord/audit=0" || !strings.HasPrefix(s[1], "ord/crm=") {
		t.Errorf("held seconds %q", s)
	}
	var h control.HeldReport
	waitFor(t, "a held report naming e7", func() bool {
		var ok bool
		h, ok = f.lastHeld(t, 0)
		return ok && len(h.Routes) == 1 && h.Routes[0].Waiting == 2
	})
	r := h.Routes[0]
	if h.Instance != "p1" || r.Provider != "ord" || r.Route != "crm" || r.Entities != 1 || len(r.Oldest) != 1 {
		t.Fatalf("held report %+v", h)
	}
	if e := r.Oldest[0]; e.Entity != "e7" || e.Head != "e7-1" || e.Waiting != 2 || e.Tier != "1s" || e.Dead || e.Since.IsZero() {
		t.Errorf("held entity %+v, want e7 behind e7-1 in tier 1s with 2 waiting", e)
	}

	rt := &retrier{f: f, moved: map[string]bool{}}
	waitFor(t, "the hold drained: gauges 0, the report a tombstone", func() bool {
		rt.pass(t)
		h, ok := f.lastHeld(t, 0)
		return ok && len(h.Routes) == 0 &&
			slices.Equal(gauges(t, reg, "hookline_processor_entities_held"), []string{"ord/audit=0", "ord/crm=0"}) &&
			slices.Equal(gauges(t, reg, "hookline_processor_entity_held_seconds"), []string{"ord/audit=0", "ord/crm=0"})
	})
	if got := dest.of("crm"); !slices.Equal(got, []string{"e7-1", "e7-1", "e7-2", "e7-3"}) {
		t.Errorf("crm's calls %v, want e7-1 twice, then e7-2, e7-3", got)
	}
}
