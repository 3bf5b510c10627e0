package scrape

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP hookline_retrier_moved_records_total Records moved.
# TYPE hookline_retrier_moved_records_total counter
hookline_retrier_moved_records_total{tier="1s"} 3
hookline_retrier_moved_records_total{tier="2s"} 4.5
hookline_retrier_moved_records_totalish 100
hookline_retrier_paused_partitions 2
`)
	}))
	defer srv.Close()
	for name, want := range map[string]float64{
		"hookline_retrier_moved_records_total": 7.5,
		"hookline_retrier_paused_partitions":   2,
		"absent":                               0,
	} {
		got, err := Sum(srv.URL, name)
		if err != nil || got != want {
			t.Errorf("Sum(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
}
