package loadtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCounterSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `# HELP hookline_retrier_moved_records_total Records moved.
# TYPE hookline_retrier_moved_records_total counter
hookline_retrier_moved_records_total{tier="1s"} 3
hookline_retrier_moved_records_total{tier="2s"} 4.5
hookline_retrier_moved_records_totalish 100
hookline_retrier_paused_partitions 2
hookline_processor_transactions_total{instance="p1",result="aborted"} 2
hookline_processor_transactions_total{instance="p1",result="committed"} 40
`)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name  string
		match []string
		want  float64
	}{
		{"hookline_retrier_moved_records_total", nil, 7.5}, // not the longer name
		{"hookline_retrier_paused_partitions", nil, 2},     // no labels
		{"absent", nil, 0},
		{"hookline_processor_transactions_total", []string{`result="committed"`}, 40},
		{"hookline_processor_transactions_total", []string{`instance="p1"`, `result="aborted"`}, 2},
		{"hookline_retrier_paused_partitions", []string{`tier="1s"`}, 0}, // a match needs labels
	} {
		got, err := CounterSum(t.Context(), srv.URL+"/metrics", c.name, c.match...)
		if err != nil || got != c.want {
			t.Errorf("CounterSum(%s, %q) = %v, %v; want %v", c.name, c.match, got, err, c.want)
		}
	}
	if _, err := CounterSum(t.Context(), srv.URL+"/nothing", "absent"); err == nil {
		t.Error("a 404 summed to a number")
	}
}
