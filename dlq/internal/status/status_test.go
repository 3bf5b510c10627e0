package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
)

const providersFile = "../settings/testdata/providers.yaml"

func mustKnown(tb testing.TB) settings.Known {
	tb.Helper()
	k, err := settings.LoadKnown(providersFile)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// dead is a DLQ entry of provider and route ("" for none) dead at at.
func dead(offset int64, provider, route string, at time.Time, resolved bool) *store.Entry {
	r := &kgo.Record{Key: []byte("k"), Timestamp: at, Offset: offset}
	headers.Set(r, headers.Provider, provider)
	if route != "" {
		headers.Set(r, headers.Route, route)
	}
	e := &store.Entry{Ref: store.Ref{Offset: offset}, Record: r}
	if resolved {
		e.Resolution = &store.Resolution{Resolution: store.Ignored}
	}
	return e
}

// TestBuildCounts: every record is counted at its route, its provider and
// the totals; tiers split due now from scheduled; lanes are due now;
// priority is the route's class of the providers file; the DLQ counts only
// unresolved entries, with the oldest of them.
func TestBuildCounts(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(tier, provider, route string, parkedAgo, dueIn time.Duration) parked.Record {
		r := parked.Record{Tier: tier, Provider: provider, Route: route, ParkedAt: now.Add(-parkedAgo)}
		if tier != parked.TierLane {
			r.DueAt = headers.FormatTime(now.Add(dueIn))
		}
		return r
	}
	in := Inputs{
		Now: now, Window: 5 * time.Minute, Known: mustKnown(t),
		Parked: []parked.Record{
			rec("1m", "stripe", "billing", 30*time.Second, 30*time.Second), // scheduled
			rec("1m", "stripe", "billing", 2*time.Minute, -time.Second),    // due now
			rec("1h", "stripe", "crm", time.Minute, time.Hour),             // scheduled
			rec(parked.TierLane, "slowcrm", "default", 10*time.Second, 0),  // due now
		},
		DLQ: []*store.Entry{
			dead(0, "stripe", "billing", now.Add(-3*time.Hour), true),
			dead(1, "stripe", "billing", now.Add(-2*time.Hour), false),
			dead(2, "slowcrm", "", now.Add(-time.Hour), false),
		},
		Accepted: map[string]int{"stripe": 600, "slowcrm": 30},
		Done:     map[RouteKey]int{{"stripe", "billing"}: 500, {"stripe", "crm"}: 90, {"slowcrm", "default"}: 20},
	}
	rep := Build(in)
	tot := rep.Totals
	if tot.Accepted != 630 || tot.AcceptedPerSecond != 2.1 || tot.Done != 610 || tot.Retrying != 3 || tot.Parked != 1 || tot.DLQUnresolved != 2 {
		t.Errorf("totals: %+v", tot)
	}
	if o := tot.DLQOldestUnresolved; o == nil || o.Provider != "stripe" || o.Route != "billing" || o.AgeSeconds != 7200 {
		t.Errorf("oldest unresolved: %+v", o)
	}
	wantTiers := []Waiting{
		{Tier: "1h", Records: 1, Scheduled: 1},
		{Tier: "1m", Records: 2, DueNow: 1, Scheduled: 1},
		{Tier: "lane", Records: 1, DueNow: 1},
	}
	if len(tot.ByTier) != len(wantTiers) {
		t.Fatalf("by tier: %+v", tot.ByTier)
	}
	for i, w := range wantTiers {
		g := tot.ByTier[i]
		if g.Tier != w.Tier || g.Records != w.Records || g.DueNow != w.DueNow || g.Scheduled != w.Scheduled || g.Oldest == nil {
			t.Errorf("by tier %d: %+v, want %+v", i, g, w)
		}
	}
	if o := tot.ByTier[1].Oldest; !o.Equal(now.Add(-2 * time.Minute)) {
		t.Errorf("oldest of 1m: %v", o)
	}
	var prios []string
	for _, w := range tot.ByPriority {
		prios = append(prios, w.Priority+":"+string(rune('0'+w.Records)))
	}
	if strings.Join(prios, " ") != "critical:2 normal:2" {
		t.Errorf("by priority: %v", prios)
	}
	if len(rep.Providers) != 2 || rep.Providers[0].Provider != "slowcrm" || rep.Providers[1].Provider != "stripe" {
		t.Fatalf("providers: %+v", rep.Providers)
	}
	st := rep.Providers[1]
	if st.Accepted != 600 || st.AcceptedPerSecond != 2 || st.Done != 590 || st.Retrying != 3 || st.Parked != 0 || st.DLQUnresolved != 1 || len(st.Routes) != 2 {
		t.Errorf("stripe: %+v", st)
	}
	billing, crm := st.Routes[0], st.Routes[1]
	if billing.Route != "billing" || billing.Priority != "critical" || billing.Retrying != 2 || billing.Done != 500 || billing.DLQUnresolved != 1 ||
		crm.Route != "crm" || crm.Priority != "normal" || crm.Retrying != 1 || crm.DLQUnresolved != 0 || crm.DLQOldestUnresolved != nil {
		t.Errorf("stripe's routes: %+v", st.Routes)
	}
	sc := rep.Providers[0]
	if len(sc.Routes) != 1 || sc.Routes[0].Route != "default" || sc.Routes[0].Parked != 1 || sc.Routes[0].DLQUnresolved != 1 {
		t.Errorf("slowcrm: %+v", sc)
	}
}

// held is one report of partition 0, written at at: two entities held on
// stripe/crm, the oldest (cus_1) for age behind stripe:evt_9 in tier 1h.
func held(now time.Time, age time.Duration, at time.Time) control.HeldReports {
	hs := control.HeldReports{}
	hs.Apply(control.HeldReport{Partition: 0, Instance: "p1", At: at, Routes: []control.HeldRoute{{
		Provider: "stripe", Route: "crm", Entities: 2, Waiting: 7, Oldest: []control.HeldEntity{
			{Entity: "cus_1", Head: "stripe:evt_9", Since: now.Add(-age), Waiting: 4, Tier: "1h"},
			{Entity: "cus_2", Head: "stripe:evt_12", Since: now.Add(-time.Minute), Waiting: 3, Tier: "1m"},
		}}}})
	return hs
}

// TestBuildHeld: the reports of several partitions add up per route
// (entities, records waiting, the oldest of all first, at most
// control.HeldTop), each with its age; a route without one has none;
// a stale report does not count.
func TestBuildHeld(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hs := held(now, 30*time.Minute, now)
	var many []control.HeldEntity
	for i := range 6 {
		many = append(many, control.HeldEntity{Entity: fmt.Sprintf("cus_%d", 10+i), Head: "k", Since: now.Add(-time.Duration(i) * time.Hour), Waiting: 1, Dead: true})
	}
	hs.Apply(control.HeldReport{Partition: 1, Instance: "p2", At: now.Add(-time.Minute), Routes: []control.HeldRoute{
		{Provider: "stripe", Route: "crm", Entities: 6, Waiting: 6, Oldest: many[1:]}}})
	hs.Apply(control.HeldReport{Partition: 2, Instance: "p3", At: now.Add(-control.HeldStale), Routes: []control.HeldRoute{
		{Provider: "stripe", Route: "billing", Entities: 1, Waiting: 1, Oldest: many[:1]}}})
	rep := Build(Inputs{Now: now, Window: 5 * time.Minute, Known: mustKnown(t), Held: hs})
	routes := map[string]Route{}
	for _, p := range rep.Providers {
		for _, r := range p.Routes {
			routes[p.Provider+"/"+r.Route] = r
		}
	}
	crm := routes["stripe/crm"].Held
	var got []string
	for _, e := range crm.Oldest {
		got = append(got, fmt.Sprintf("%s:%.0f", e.Entity, e.AgeSeconds))
	}
	if crm.Entities != 8 || crm.Waiting != 13 || strings.Join(got, " ") != "cus_15:18000 cus_14:14400 cus_13:10800 cus_12:7200 cus_11:3600" {
		t.Errorf("stripe/crm held: %d entities, %d waiting, oldest %v", crm.Entities, crm.Waiting, got)
	}
	if b := routes["stripe/billing"].Held; b.Entities != 0 || b.Oldest == nil || len(b.Oldest) != 0 {
		t.Errorf("stripe/billing (stale report): %+v, want nothing held and an empty list", b)
	}
	if rep.Verdict != Degraded || !slices.ContainsFunc(rep.Reasons, func(r string) bool {
		return strings.Contains(r, "entity cus_15 held for 5h0m0s, behind k, dead with on_dead: hold (dlq trace k, then dlq replay)")
	}) {
		t.Errorf("verdict %s, reasons %q", rep.Verdict, rep.Reasons)
	}
}

// TestVerdict: each rule alone, and failing over degraded.
func TestVerdict(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	raw := func(age time.Duration) Backlog {
		return Backlog{Topic: "webhooks.raw", Group: "hookline-processor", Lag: 7, OldestAt: ago(age)}
	}
	retry := func(late time.Duration) []parked.Record {
		return []parked.Record{{Tier: "1m", Provider: "stripe", Route: "billing", ParkedAt: now.Add(-time.Hour), DueAt: headers.FormatTime(now.Add(-late))}}
	}
	autoPaused := map[string]control.Setting{"stripe/crm": {Provider: "stripe", Route: "crm", Paused: true, By: control.AutoPauseBy, Why: "every call failed", At: now.Add(-time.Hour)}}
	cases := []struct {
		name    string
		in      Inputs
		verdict string
		reason  string // a substring of one reason
	}{
		{name: "nothing", verdict: Healthy},
		{name: "retries scheduled", in: Inputs{Parked: retry(-time.Minute)}, verdict: Healthy},
		{name: "retries just due", in: Inputs{Parked: retry(30 * time.Second)}, verdict: Healthy},
		{name: "lag young", in: Inputs{Raw: raw(30 * time.Second)}, verdict: Healthy},
		{name: "lag 1m", in: Inputs{Raw: raw(time.Minute)}, verdict: Degraded, reason: "webhooks.raw: the oldest unprocessed record is 1m0s old (lag 7"},
		{name: "lag 5m", in: Inputs{Raw: raw(5 * time.Minute)}, verdict: Failing, reason: "is the processor running?"},
		{name: "retry overdue 2m", in: Inputs{Parked: retry(2 * time.Minute)}, verdict: Degraded, reason: "retry tier 1m: a record is 2m0s past its due time"},
		{name: "retry overdue 6m", in: Inputs{Parked: retry(6 * time.Minute)}, verdict: Failing, reason: "is the retrier running?"},
		{name: "breaker open", in: Inputs{Breakers: control.Breakers{}}, verdict: Degraded, reason: "stripe/crm: breaker open (processor p1)"},
		{name: "breaker stale", in: Inputs{Breakers: control.Breakers{}}, verdict: Healthy},
		{name: "provider paused", in: Inputs{Settings: map[string]control.Setting{"stripe": {Provider: "stripe", Paused: true}}},
			verdict: Degraded, reason: "stripe/billing: paused (by its provider setting)"},
		{name: "route paused", in: Inputs{Settings: map[string]control.Setting{"stripe/crm": {Provider: "stripe", Route: "crm", Paused: true}}},
			verdict: Degraded, reason: "stripe/crm: paused (by its route setting)"},
		{name: "draining", in: Inputs{Settings: map[string]control.Setting{"stripe/crm": {Provider: "stripe", Route: "crm", Rate: 5}}}, verdict: Healthy},
		{name: "auto-paused", in: Inputs{Settings: autoPaused, Trials: control.Trials{"stripe/crm": {Provider: "stripe", Route: "crm", Pause: now.Add(-time.Hour), Instance: "p1", At: now}}},
			verdict: Degraded, reason: "stripe/crm: paused by auto-pause (every call failed), 0 records parked in its lane; dlq route resume stripe/crm once its receiver answers"},
		{name: "auto-paused, answering again", in: Inputs{Settings: autoPaused, Trials: control.Trials{"stripe/crm": {Provider: "stripe", Route: "crm", Pause: now.Add(-time.Hour), Answering: true, Instance: "p1", At: now}}},
			verdict: Degraded, reason: "a trial call was answered at 2026-03-01T12:00:00Z: its receiver answers again, dlq route resume stripe/crm"},
		{name: "auto-paused, an answer of an earlier pause", in: Inputs{Settings: autoPaused, Trials: control.Trials{"stripe/crm": {Provider: "stripe", Route: "crm", Pause: now.Add(-2 * time.Hour), Answering: true, Instance: "p1", At: now}}},
			verdict: Degraded, reason: "once its receiver answers"},
		{name: "lane full", in: Inputs{Parked: []parked.Record{{Tier: parked.TierLane, Provider: "slowcrm", Route: "default", ParkedAt: now}}},
			verdict: Degraded, reason: "slowcrm/default: 1 records parked in its lane"},
		{name: "dead letter", in: Inputs{DLQ: []*store.Entry{dead(0, "stripe", "crm", now.Add(-time.Hour), false)}},
			verdict: Degraded, reason: "stripe/crm: 1 unresolved dead letters, the oldest 1h0m0s old"},
		{name: "dead letter resolved", in: Inputs{DLQ: []*store.Entry{dead(0, "stripe", "crm", now.Add(-time.Hour), true)}}, verdict: Healthy},
		{name: "held young", in: Inputs{Held: held(now, 59*time.Minute, now)}, verdict: Healthy},
		{name: "held 1h", in: Inputs{Held: held(now, time.Hour, now)}, verdict: Degraded,
			reason: "stripe/crm: entity cus_1 held for 1h0m0s, behind stripe:evt_9, in retry tier 1h (dlq trace stripe:evt_9); 2 entities held, 7 records waiting"},
		{name: "held past HeldAfter", in: Inputs{Held: held(now, 20*time.Minute, now), HeldAfter: 15 * time.Minute}, verdict: Degraded, reason: "entity cus_1 held for 20m0s"},
		{name: "held report stale", in: Inputs{Held: held(now, 2*time.Hour, now.Add(-control.HeldStale))}, verdict: Healthy},
		{name: "incomplete", in: Inputs{Incomplete: []string{"webhooks.raw[0]"}}, verdict: Degraded, reason: "not read to the end"},
		{name: "failing over degraded", in: Inputs{Raw: raw(10 * time.Minute), DLQ: []*store.Entry{dead(0, "stripe", "crm", now, false)}},
			verdict: Failing, reason: "is the processor running?"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Now, in.Window, in.Known = now, 5*time.Minute, mustKnown(t)
			switch c.name {
			case "breaker open":
				in.Breakers.Apply(control.Breaker{Provider: "stripe", Route: "crm", Instance: "p1", Open: true, At: now.Add(-time.Minute)})
			case "breaker stale":
				in.Breakers.Apply(control.Breaker{Provider: "stripe", Route: "crm", Instance: "p1", Open: true, At: now.Add(-control.BreakerStale)})
			}
			rep := Build(in)
			if answering := answeringOf(rep, "stripe", "crm"); answering != strings.HasSuffix(c.name, "answering again") {
				t.Errorf("answering_again %v for stripe/crm", answering)
			}
			if rep.Verdict != c.verdict {
				t.Errorf("verdict %s, want %s; reasons %q", rep.Verdict, c.verdict, rep.Reasons)
			}
			if c.reason == "" && len(rep.Reasons) > 0 || c.reason != "" && !slices.ContainsFunc(rep.Reasons, func(r string) bool { return strings.Contains(r, c.reason) }) {
				t.Errorf("reasons %q, want one with %q", rep.Reasons, c.reason)
			}
			if c.verdict == Failing && !strings.Contains(rep.Reasons[0], c.reason) {
				t.Errorf("reasons %q: a failing reason comes first", rep.Reasons)
			}
		})
	}
}

// answeringOf says whether the report gives provider/route an
// answering_again.
func answeringOf(rep Report, provider, route string) bool {
	for _, p := range rep.Providers {
		for _, r := range p.Routes {
			if p.Provider == provider && r.Route == route {
				return r.AnsweringAgain != nil
			}
		}
	}
	return false
}
