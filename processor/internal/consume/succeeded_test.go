package consume

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// TestSucceededByAttempt: hookline_processor_succeeded_total counts each
// committed done outcome under the attempt that succeeded, an attempt
// above the tiers' count + 1 (two tiers here: 3) folded into 3.
func TestSucceededByAttempt(t *testing.T) {
	f := newFakeKafka(t)
	reg := prometheus.NewRegistry()
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"fastpay": &counter{}}, procOptions{metrics: reg})

	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, a := range []struct {
		key     string
		origin  string
		attempt int
	}{{"k1", headers.OriginIngest, 1}, {"k2", headers.OriginIngest, 1}, {"k3", headers.OriginRetry, 2}, {"k4", headers.OriginRetry, 3}, {"k5", headers.OriginRetry, 9}} {
		r := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: []byte(a.key), Value: []byte(`{"id":"` + a.key + `"}`)}
		headers.Set(r, headers.Provider, "fastpay")
		headers.Set(r, headers.Origin, a.origin)
		headers.SetAttempt(r, a.attempt)
		headers.SetTime(r, headers.ReceivedAt, time.Now())
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	byAttempt := func() map[string]float64 {
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "hookline_processor_succeeded_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["provider"] != "fastpay" {
					t.Errorf("provider label %q, want fastpay", labels["provider"])
				}
				got[labels["attempt"]] += m.GetCounter().GetValue()
			}
		}
		return got
	}
	waitFor(t, "five successes counted", func() bool {
		n := 0.0
		for _, v := range byAttempt() {
			n += v
		}
		return n == 5
	})
	got := byAttempt()
	want := map[string]float64{"1": 2, "2": 1, "3": 2}
	if len(got) != len(want) {
		t.Fatalf("succeeded by attempt %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("succeeded by attempt %v, want %v", got, want)
			break
		}
	}
	if n := counterValue(t, reg, "hookline_processor_records_total"); n != 5 {
		t.Errorf("records_total %v, want 5", n)
	}
}

// TestCountOutcomes: a batch's outcomes are counted once per set of
// labels with their number, as many as one increment per outcome gave.
func TestCountOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := &setup{cfg: Config{Schedule: retry.DefaultSchedule()}, mOutcomes: newOutcomeMetrics(reg)}
	rec := func(attempt int) *kgo.Record {
		r := &kgo.Record{}
		headers.SetAttempt(r, attempt)
		return r
	}
	done := func(route string) stat {
		return stat{provider: "gen", route: route, status: outcome.StatusDone, origin: headers.OriginIngest, eventType: "e"}
	}
	var batch []*result
	for range 3 { // an event of three topic routes, three times
		batch = append(batch, &result{item: item{r: rec(1)}, stats: []stat{done("r1"), done("r2"), done("r3")}})
	}
	batch = append(batch,
		&result{item: item{r: rec(2)}, stats: []stat{done("r1")}},
		&result{item: item{r: rec(1)}, stats: []stat{{provider: "gen", route: "r1", status: outcome.StatusDuplicate, origin: headers.OriginIngest, eventType: "e"}}})
	p.countOutcomes(batch)
	for _, c := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{p.mOutcomes.records.WithLabelValues("gen", "r1", outcome.StatusDone, "e"), 4},
		{p.mOutcomes.records.WithLabelValues("gen", "r3", outcome.StatusDone, "e"), 3},
		{p.mOutcomes.records.WithLabelValues("gen", "r1", outcome.StatusDuplicate, "e"), 1},
		{p.mOutcomes.succeeded.WithLabelValues("gen", "r1", "1"), 3},
		{p.mOutcomes.succeeded.WithLabelValues("gen", "r1", "2"), 1},
		{p.mOutcomes.succeeded.WithLabelValues("gen", "r2", "1"), 3},
		{p.mOutcomes.duplicates.WithLabelValues(headers.OriginIngest), 1},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%v: %v, want %v", c.c, got, c.want)
		}
	}
}
