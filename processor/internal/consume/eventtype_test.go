package consume

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsByEventType: hookline_processor_records_total and
// hookline_processor_handler_seconds carry event_type, bounded as ingest's
// is (package typelabel): a type the file names, the first
// EventTypeLabels others (1 here), then other.
func TestMetricsByEventType(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, _ := runOtherwise(t, procOptions{metrics: reg, eventTypeLabels: 1})

	// route/event_type -> count, of each series.
	byType := func(name string) map[string]float64 {
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				k := labels["route"] + "/" + labels["event_type"]
				if h := m.GetHistogram(); h != nil {
					got[k] += float64(h.GetSampleCount())
				} else {
					got[k] += m.GetCounter().GetValue()
				}
			}
		}
		return got
	}
	counted := func(want float64) func() bool {
		return func() bool {
			n := 0.0
			for _, v := range byType("hookline_processor_records_total") {
				n += v
			}
			return n == want
		}
	}
	f.produceTyped(t, "shop", "k1", "invoice.paid")     // named by the file
	f.produceTyped(t, "shop", "k2", "customer.created") // the first other type
	// The keys land on different partitions, processed in any order: the
	// first other type must be seen before the one over the bound.
	waitFor(t, "two outcomes counted", counted(2))
	f.produceTyped(t, "shop", "k3", "payout.paid") // over the bound
	f.produceTyped(t, "shop", "k4", "customer.created")
	waitFor(t, "four outcomes counted", counted(4))
	want := map[string]float64{"billing/invoice.paid": 1, "rest/customer.created": 2, "rest/other": 1}
	for _, name := range []string{"hookline_processor_records_total", "hookline_processor_handler_seconds"} {
		got := byType(name)
		if len(got) != len(want) {
			t.Errorf("%s by route/event_type %v, want %v", name, got, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s by route/event_type %v, want %v", name, got, want)
				break
			}
		}
	}
}
