package status

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hookline/hookline/pkg/control"
)

// The processor's series ProcessorMetrics reads (processor/internal/consume
// registers them; process_start_time_seconds is the process collector's).
const (
	seriesPending   = "hookline_processor_pending_records"
	seriesRecords   = "hookline_processor_records_total"
	seriesStartTime = "process_start_time_seconds"
	seriesLimit     = "hookline_processor_destination_concurrency_limit"
	seriesMaxIn     = "hookline_processor_destination_max_inflight"
	statusDone      = "done"
)

// scrapeTimeout bounds one processor's /metrics answer; maxScrapeBytes its
// size.
const (
	scrapeTimeout  = 5 * time.Second
	maxScrapeBytes = 16 << 20
)

// Processor is what one processor's own counters say, read from its
// /metrics: the records it has read and not yet committed (in flight:
// waiting in a chain, for a slot or in a call, or finished and waiting
// for the transaction), and the route deliveries it has completed (outcome
// done) since it started.
type Processor struct {
	// URL is the address read: the configured URL, with its host name
	// replaced by each address it resolves to (a password in it shown as
	// xxxxx).
	URL       string     `json:"url"`
	InFlight  int        `json:"in_flight"`
	Completed int        `json:"completed"`
	StartedAt *time.Time `json:"started_at"`
	// Limits are its routes' concurrency limits now (adaptive, between 1
	// and max_inflight; issue 34), by provider and route.
	Limits []RouteLimit `json:"limits,omitempty"`
	// Error says why it could not be read; the counts are then 0.
	Error string `json:"error,omitempty"`
}

// RouteLimit is one processor's concurrency limit of a route's HTTP
// destination: the calls it lets in flight now (Limit) and its ceiling
// (MaxInflight, destination.max_inflight).
type RouteLimit struct {
	Provider    string `json:"provider"`
	Route       string `json:"route"`
	Limit       int    `json:"limit"`
	MaxInflight int    `json:"max_inflight"`
}

// ProcessorMetrics reads each processor's /metrics (HOOKLINE_PROCESSOR_METRICS):
// per instance its in-flight and completed counts, and the completed
// counts by route summed over the instances read. A URL whose host is a
// name is read at every address the name resolves to (every task of a
// compose service scaled out, every pod of a headless service). Cost: one
// DNS lookup per URL and one HTTP GET per processor (its whole /metrics,
// tens of kilobytes), concurrently, each bounded to 5s.
//
// The completed counts restart from 0 when a processor restarts, and a
// processor not listed is not counted: they are "since each listed
// processor started", not since the topics began.
func ProcessorMetrics(ctx context.Context, client *http.Client, urls []string) ([]Processor, map[RouteKey]int) {
	var targets []string
	for _, u := range urls {
		targets = append(targets, expand(ctx, u)...)
	}
	out := make([]Processor, len(targets))
	byRoute := make([]map[RouteKey]int, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], byRoute[i] = scrape(ctx, client, t)
		}()
	}
	wg.Wait()
	done := map[RouteKey]int{}
	for _, m := range byRoute {
		for k, n := range m {
			done[k] += n
		}
	}
	slices.SortFunc(out, func(a, b Processor) int { return cmp.Compare(a.URL, b.URL) })
	return out, done
}

// expand replaces the host name of u by each address it resolves to; an
// IP address, localhost, a name that does not resolve (the scrape then
// says so) or a bad URL is kept as it is.
func expand(ctx context.Context, u string) []string {
	pu, err := url.Parse(u)
	if err != nil || pu.Hostname() == "" || net.ParseIP(pu.Hostname()) != nil || pu.Hostname() == "localhost" {
		return []string{u}
	}
	lctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(lctx, pu.Hostname())
	if err != nil || len(addrs) <= 1 {
		return []string{u}
	}
	slices.Sort(addrs)
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		c := *pu
		c.Host = a
		if p := pu.Port(); p != "" {
			c.Host = net.JoinHostPort(a, p)
		} else if net.ParseIP(a).To4() == nil {
			c.Host = "[" + a + "]"
		}
		out = append(out, c.String())
	}
	return out
}

// scrape reads one processor's /metrics.
func scrape(ctx context.Context, client *http.Client, u string) (Processor, map[RouteKey]int) {
	p := Processor{URL: u}
	if pu, err := url.Parse(u); err == nil {
		p.URL = pu.Redacted() // a password in the URL stays out of reports and e-mails
	}
	fail := func(err error) (Processor, map[RouteKey]int) {
		p.Error = err.Error()
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("HTTP %s", resp.Status))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxScrapeBytes))
	if err != nil {
		return fail(fmt.Errorf("not the Prometheus text format: %w", err))
	}
	if fams[seriesPending] == nil {
		return fail(fmt.Errorf("no %s: not a hookline processor's /metrics", seriesPending))
	}
	for _, m := range fams[seriesPending].GetMetric() {
		p.InFlight += int(m.GetGauge().GetValue())
	}
	done := map[RouteKey]int{}
	if f := fams[seriesRecords]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			if l["status"] != statusDone {
				continue
			}
			n := int(m.GetCounter().GetValue())
			done[RouteKey{l["provider"], control.RouteOr(l["route"])}] += n
			p.Completed += n
		}
	}
	p.Limits = limits(fams[seriesLimit], fams[seriesMaxIn])
	if f := fams[seriesStartTime]; f != nil && len(f.GetMetric()) == 1 {
		sec := f.GetMetric()[0].GetGauge().GetValue()
		at := time.Unix(0, int64(sec*float64(time.Second))).UTC().Truncate(time.Millisecond)
		p.StartedAt = &at
	}
	return p, done
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// limits reads the routes' concurrency limits and their ceilings, in
// provider and route order; nil when the processor reports none (a
// version before issue 34).
func limits(limit, maxIn *dto.MetricFamily) []RouteLimit {
	if limit == nil {
		return nil
	}
	ceil := map[RouteKey]int{}
	for _, m := range maxIn.GetMetric() {
		l := labels(m)
		ceil[RouteKey{l["provider"], control.RouteOr(l["route"])}] = int(m.GetGauge().GetValue())
	}
	var out []RouteLimit
	for _, m := range limit.GetMetric() {
		l := labels(m)
		k := RouteKey{l["provider"], control.RouteOr(l["route"])}
		out = append(out, RouteLimit{Provider: k.Provider, Route: k.Route, Limit: int(m.GetGauge().GetValue()), MaxInflight: ceil[k]})
	}
	slices.SortFunc(out, func(a, b RouteLimit) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Route, b.Route))
	})
	return out
}
