package providers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// filterBenchFile has three routes of one provider taking the same
// pull_request events: plain (events only), where (events and one where
// equality, which parses the body) and filter (events and a filter of ten
// operators on the body and a header, every one of them holding, so all
// are evaluated).
const filterBenchFile = `
providers:
  gh:
    preset: github
    secret_env: [S1]
    routes:
      plain: {events: [pull_request], destination: {url: "http://x/"}}
      where: {events: [pull_request], where: {"/action": closed}, destination: {url: "http://x/"}}
      filter:
        events: [pull_request]
        filter:
          body:
            action: {$in: [closed, reopened]}
            pull_request:
              merged: {$eq: true}
              base: {ref: {$startsWith: ma}}
              additions: {$gte: 1, $lte: 5000}
              number: {$gt: 0}
              draft: {$neq: true}
              labels: {name: {$nin: [wip]}}
              user: {login: {$exist: true}}
          headers:
            user-agent: {$startsWith: GitHub-Hookshot/}
        destination: {url: "http://x/"}
`

// benchBody is a 2 KB pull_request body the filter holds on.
func benchBody(tb testing.TB) []byte {
	var pad strings.Builder
	for i := 0; pad.Len() < 1700; i++ {
		fmt.Fprintf(&pad, `,"field_%02d":"%s"`, i, strings.Repeat("x", 40))
	}
	b := []byte(`{"action":"closed","number":7,"pull_request":{"number":7,"merged":true,"draft":false,"additions":120,` +
		`"base":{"ref":"main","sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e"},"user":{"login":"octocat","id":1},` +
		`"labels":[{"name":"bug"},{"name":"ready"}],"title":"Fix the thing"` + pad.String() + `},"repository":{"full_name":"octo/repo"}}`)
	if len(b) < 1900 || len(b) > 2200 {
		tb.Fatalf("body is %d bytes, want about 2 KB", len(b))
	}
	return b
}

// BenchmarkRouteFilterRatio is a filter's cost per event as the processor
// matches a record (Provider.Match over RequestOf), against the same route
// without a filter (plain) and with a where (one parse of the body, one
// equality), the ratios taken in one run: each iteration
// matches blocks of 64 events through plain, where and filter in turn, so
// the three share the machine's state at each moment; it reports each
// one's ns per event and filter/plain and filter/where.
func BenchmarkRouteFilterRatio(b *testing.B) {
	r := mustParse(b, filterBenchFile, env{"S1": testSecret1})
	full := mustGet(b, r, "gh")
	body := benchBody(b)
	rec := headers.IngestRecord("webhooks.raw", "gh:1", "pull_request", body, headers.IngestMeta{
		Provider: "gh", HTTP: []kgo.RecordHeader{{Key: "user-agent", Value: []byte("GitHub-Hookshot/044aadd")}},
	})
	names := []string{"plain", "where", "filter"}
	ps := make([]*Provider, len(names))
	for i, name := range names {
		rt, _ := full.Route(name)
		ps[i] = &Provider{Name: "gh", routes: []*Route{rt}}
	}
	const block = 64
	var spent [3]time.Duration
	dst := make([]*Route, 0, 1)
	n := 0
	for b.Loop() {
		for i, p := range ps {
			start := time.Now()
			for range block {
				dst = p.Match(RequestOf(rec), dst[:0])
			}
			spent[i] += time.Since(start)
		}
		n += block
	}
	per := func(i int) float64 { return float64(spent[i].Nanoseconds()) / float64(n) }
	for i, name := range names {
		b.ReportMetric(per(i), name+"-ns/event")
	}
	b.ReportMetric(per(2)/per(0), "filter/plain")
	b.ReportMetric(per(2)/per(1), "filter/where")
}
