package store

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// TestEntriesByRoute: an entry's route is its hookline.route header, the
// route default without one (written before routes); the filter takes a
// route of every provider, or of one with Provider; the summary and the
// statistics carry it.
func TestEntriesByRoute(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	entry := func(off int64, provider, route string) *Entry {
		r := &kgo.Record{Topic: "webhooks.dlq", Offset: off, Key: []byte(provider + ":k"), Timestamp: at}
		headers.Set(r, headers.Provider, provider)
		headers.Set(r, headers.DeadReason, headers.DeadExhausted)
		if route != "" {
			headers.Set(r, headers.Route, route)
		}
		return &Entry{Ref: Ref{Offset: off}, Record: r}
	}
	es := []*Entry{entry(0, "stripe", ""), entry(1, "stripe", "billing"), entry(2, "stripe", "default"), entry(3, "acme", "billing")}
	if got := es[0].Summary().Route; got != "default" {
		t.Errorf("an entry without a route: route %q, want default", got)
	}
	for _, tc := range []struct {
		f    Filter
		want []int64
	}{
		{Filter{Route: "default"}, []int64{0, 2}},
		{Filter{Route: "billing"}, []int64{1, 3}},
		{Filter{Provider: "stripe", Route: "billing"}, []int64{1}},
		{Filter{Provider: "acme", Route: "default"}, nil},
	} {
		var got []int64
		for _, e := range es {
			if tc.f.Match(e) {
				got = append(got, e.Ref.Offset)
			}
		}
		if len(got) != len(tc.want) || len(got) > 0 && (got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1]) {
			t.Errorf("filter %+v took %v, want %v", tc.f, got, tc.want)
		}
	}
	st := Summarise(es, at)
	if st.ByRoute["stripe/default"].Total != 2 || st.ByRoute["stripe/billing"].Total != 1 || st.ByRoute["acme/billing"].Total != 1 || len(st.ByRoute) != 3 {
		t.Errorf("by route %v", st.ByRoute)
	}
	if st.Oldest == nil || st.Oldest.Route != "default" {
		t.Errorf("oldest %+v, want entry 0:0 of the route default", st.Oldest)
	}
}
