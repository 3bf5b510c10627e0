package status

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// fakeProcessor serves /metrics with the processor's series of
// ProcessorMetrics: pending records by class, records by provider, route,
// status and event type (each count split over two event types, as the
// processor's are), and the process start time.
func fakeProcessor(t *testing.T, pending map[string]float64, records map[[3]string]float64, started time.Time) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	pv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: seriesPending}, []string{"class"})
	rv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: seriesRecords}, []string{"provider", "route", "status", "event_type"})
	st := prometheus.NewGauge(prometheus.GaugeOpts{Name: seriesStartTime})
	reg.MustRegister(pv, rv, st)
	for c, n := range pending {
		pv.WithLabelValues(c).Set(n)
	}
	for l, n := range records {
		half := float64(int(n / 2))
		rv.WithLabelValues(l[0], l[1], l[2], "invoice.paid").Add(half)
		rv.WithLabelValues(l[0], l[1], l[2], "other").Add(n - half)
	}
	st.Set(float64(started.Unix()))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// TestProcessorMetrics: in flight is the sum of every listed processor's
// pending records over the classes; completed the done records by route
// (the route default for an empty route label), summed over processors,
// and nothing of another status; a processor that cannot be read is named
// with its error, counts nothing, and makes the report degraded; the
// report's totals, providers and routes carry the counts, and
// completed_since is the earliest start.
func TestProcessorMetrics(t *testing.T) {
	t1 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	a := fakeProcessor(t, map[string]float64{"critical": 2, "normal": 1}, map[[3]string]float64{
		{"stripe", "billing", "done"}: 5, {"stripe", "crm", "done"}: 3, {"stripe", "billing", "retrying"}: 7, {"stripe", "", "duplicate"}: 4,
	}, t2)
	b := fakeProcessor(t, map[string]float64{"normal": 4}, map[[3]string]float64{
		{"stripe", "billing", "done"}: 2, {"slowcrm", "", "done"}: 6, {"slowcrm", "default", "dead"}: 1,
	}, t1)
	notHookline := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up 1\n")) }))
	t.Cleanup(notHookline.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(gone.Close)
	secret := strings.Replace(gone.URL, "http://", "http://scraper:hunter2@", 1) + "/secret"

	procs, done := ProcessorMetrics(t.Context(), http.DefaultClient, []string{a, b, notHookline.URL + "/metrics", gone.URL + "/metrics", secret})
	if len(procs) != 5 {
		t.Fatalf("%d processors read, want 5: %+v", len(procs), procs)
	}
	byURL := map[string]Processor{}
	for _, p := range procs {
		byURL[p.URL] = p
	}
	if p := byURL[a]; p.InFlight != 3 || p.Completed != 8 || p.StartedAt == nil || !p.StartedAt.Equal(t2) || p.Error != "" {
		t.Errorf("processor a: %+v, want 3 in flight, 8 completed, started %s", p, t2)
	}
	if p := byURL[b]; p.InFlight != 4 || p.Completed != 8 || p.StartedAt == nil || !p.StartedAt.Equal(t1) || p.Error != "" {
		t.Errorf("processor b: %+v, want 4 in flight, 8 completed, started %s", p, t1)
	}
	if p := byURL[notHookline.URL+"/metrics"]; !strings.Contains(p.Error, "not a hookline processor") || p.InFlight != 0 || p.Completed != 0 {
		t.Errorf("a /metrics without the processor's series: %+v", p)
	}
	if p := byURL[gone.URL+"/metrics"]; !strings.Contains(p.Error, "404") {
		t.Errorf("a 404: %+v", p)
	}
	for _, p := range procs {
		if strings.Contains(p.URL+p.Error, "hunter2") {
			t.Errorf("a password shows: %+v", p)
		}
	}
	if _, ok := byURL[strings.Replace(secret, "hunter2", "xxxxx", 1)]; !ok {
		t.Errorf("the URL with a password is not listed, redacted: %+v", procs)
	}
	want := map[RouteKey]int{{"stripe", "billing"}: 7, {"stripe", "crm"}: 3, {"slowcrm", "default"}: 6}
	if len(done) != len(want) {
		t.Errorf("completed by route %v, want %v", done, want)
	}
	for k, n := range want {
		if done[k] != n {
			t.Errorf("completed %v: %d, want %d", k, done[k], n)
		}
	}

	now := t1.Add(3 * time.Hour)
	rep := Build(Inputs{Now: now, Window: 5 * time.Minute, Known: mustKnown(t), Processors: procs, Completed: done})
	if rep.Totals.InFlight == nil || *rep.Totals.InFlight != 7 || rep.Totals.Completed == nil || *rep.Totals.Completed != 16 {
		t.Errorf("totals in flight %v, completed %v: want 7 and 16", rep.Totals.InFlight, rep.Totals.Completed)
	}
	if rep.Totals.CompletedSince == nil || !rep.Totals.CompletedSince.Equal(t1) {
		t.Errorf("completed since %v, want %s (the earliest start)", rep.Totals.CompletedSince, t1)
	}
	for _, p := range rep.Providers {
		wantP := map[string]int{"stripe": 10, "slowcrm": 6}[p.Provider]
		if p.Completed == nil || *p.Completed != wantP {
			t.Errorf("%s completed %v, want %d", p.Provider, p.Completed, wantP)
		}
		for _, r := range p.Routes {
			if r.Completed == nil || *r.Completed != want[RouteKey{p.Provider, r.Route}] {
				t.Errorf("%s/%s completed %v, want %d", p.Provider, r.Route, r.Completed, want[RouteKey{p.Provider, r.Route}])
			}
		}
	}
	bad := 0
	for _, r := range rep.Reasons {
		if strings.HasPrefix(r, "processor metrics ") {
			bad++
		}
	}
	if rep.Verdict != Degraded || bad != 3 {
		t.Errorf("verdict %s %q: want degraded, naming the three processors not read", rep.Verdict, rep.Reasons)
	}

	// None listed: null, and no reason.
	rep = Build(Inputs{Now: now, Window: 5 * time.Minute, Known: mustKnown(t)})
	if rep.Totals.InFlight != nil || rep.Totals.Completed != nil || rep.Providers[0].Completed != nil || rep.Processors == nil || len(rep.Processors) != 0 {
		t.Errorf("without processors: in flight %v, completed %v, processors %v: want null, null, []", rep.Totals.InFlight, rep.Totals.Completed, rep.Processors)
	}
	if slices.ContainsFunc(rep.Reasons, func(r string) bool { return strings.HasPrefix(r, "processor metrics") }) {
		t.Errorf("reasons without processors: %q", rep.Reasons)
	}
}

// TestProcessorLimits: each processor's routes' concurrency limits and
// ceilings are read (the route default for an empty route label); a route's
// in the report is their sum over the processors, null where none reports
// it.
func TestProcessorLimits(t *testing.T) {
	serve := func(limit, maxIn map[[2]string]float64) string {
		reg := prometheus.NewRegistry()
		pv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: seriesPending}, []string{"class"})
		lv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: seriesLimit}, []string{"provider", "route"})
		mv := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: seriesMaxIn}, []string{"provider", "route"})
		reg.MustRegister(pv, lv, mv)
		pv.WithLabelValues("normal").Set(0)
		for k, v := range limit {
			lv.WithLabelValues(k[0], k[1]).Set(v)
		}
		for k, v := range maxIn {
			mv.WithLabelValues(k[0], k[1]).Set(v)
		}
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	a := serve(map[[2]string]float64{{"stripe", "crm"}: 12, {"slowcrm", ""}: 3}, map[[2]string]float64{{"stripe", "crm"}: 64, {"slowcrm", ""}: 8})
	b := serve(map[[2]string]float64{{"stripe", "crm"}: 20}, map[[2]string]float64{{"stripe", "crm"}: 64})
	procs, _ := ProcessorMetrics(t.Context(), http.DefaultClient, []string{a, b})
	var got []RouteLimit
	for _, p := range procs {
		got = append(got, p.Limits...)
	}
	if len(got) != 3 {
		t.Fatalf("limits %+v, want 3", got)
	}
	for _, tt := range []struct {
		k          RouteKey
		limit, max int
		reported   bool
	}{
		{RouteKey{"stripe", "crm"}, 32, 128, true},
		{RouteKey{"slowcrm", "default"}, 3, 8, true},
		{RouteKey{"stripe", "billing"}, 0, 0, false},
	} {
		l, m := limitOf(procs, tt.k)
		if (l != nil) != tt.reported || l != nil && (*l != tt.limit || *m != tt.max) {
			t.Errorf("%v: limit %v of %v, want %d of %d (reported %v)", tt.k, l, m, tt.limit, tt.max, tt.reported)
		}
	}
}
