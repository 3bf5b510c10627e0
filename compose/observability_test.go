package compose

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promtool runs promtool with args in compose/. Without promtool on PATH
// the test skips, except in CI (CI=true), where it fails: .ci/run installs
// Debian's prometheus package for it.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not on PATH (CI installs Debian's prometheus package for it)")
		}
		t.Skip("promtool is not on PATH; install it (Debian: apt-get install prometheus) to check the rules")
	}
	out, err := exec.CommandContext(t.Context(), path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestPromtool: the rules and the scrape config are valid, and the rules'
// unit tests (prometheus/alerts_test.yml) pass.
func TestPromtool(t *testing.T) {
	t.Run("check rules", func(t *testing.T) { promtool(t, "check", "rules", "prometheus/alerts.yml") })
	t.Run("check config", func(t *testing.T) { promtool(t, "check", "config", "prometheus/prometheus.yml") })
	t.Run("test rules", func(t *testing.T) { promtool(t, "test", "rules", "prometheus/alerts_test.yml") })
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// metric is a series the Go code registers.
type metric struct {
	kind   string // CounterOpts, GaugeOpts, HistogramOpts, SummaryOpts
	labels []string
}

// registered finds every metric the Go code (tests excluded) registers: the
// Name of each prometheus.*Opts literal, with the label names of the *Vec
// constructor it is passed to.
func registered(t *testing.T) map[string]metric {
	t.Helper()
	out := map[string]metric{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (strings.HasPrefix(e.Name(), ".") && p != ".." || e.Name() == "bin" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			opts, ok := call.Args[0].(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := opts.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			m := metric{kind: sel.Sel.Name}
			name := ""
			for _, el := range opts.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				k, _ := kv.Key.(*ast.Ident)
				switch {
				case !ok || k == nil:
				case k.Name == "Name":
					if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ = strconv.Unquote(lit.Value)
					}
				case k.Name == "ConstLabels": // prometheus.Labels{"provider": ..., ...}
					if ls, ok := kv.Value.(*ast.CompositeLit); ok {
						for _, l := range ls.Elts {
							if lkv, ok := l.(*ast.KeyValueExpr); ok {
								if lit, ok := lkv.Key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
									v, _ := strconv.Unquote(lit.Value)
									m.labels = append(m.labels, v)
								}
							}
						}
					}
				}
			}
			if len(call.Args) > 1 {
				if ls, ok := call.Args[1].(*ast.CompositeLit); ok {
					for _, l := range ls.Elts {
						if lit, ok := l.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, _ := strconv.Unquote(lit.Value)
							m.labels = append(m.labels, v)
						}
					}
				}
			}
			if name != "" {
				out[name] = m
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bhookline_[a-z0-9_]+`)
	selector   = regexp.MustCompile(`\b(hookline_[a-z0-9_]+)\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	recorded   = regexp.MustCompile(`\bhookline:[a-z0-9_:]+`)
	grouping   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// checkExpr reports names and selector labels in expr that the code does not
// register. Histograms are used through _bucket, _sum and _count.
func checkExpr(t *testing.T, where, expr string, reg map[string]metric, records map[string]bool) {
	t.Helper()
	resolve := func(name string) (string, metric, bool) {
		if m, ok := reg[name]; ok {
			return name, m, m.kind != "HistogramOpts" // a histogram is used by its series
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok {
				if m, ok := reg[base]; ok && (m.kind == "HistogramOpts" || m.kind == "SummaryOpts" && suf != "_bucket") {
					return base, m, true
				}
			}
		}
		return "", metric{}, false
	}
	for _, name := range metricName.FindAllString(expr, -1) {
		if _, _, ok := resolve(name); !ok {
			t.Errorf("%s uses %s, which no Go code registers (renamed?)", where, name)
		}
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		_, met, ok := resolve(m[1])
		if !ok {
			continue
		}
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if l[1] == "job" || l[1] == "instance" || l[1] == "le" && strings.HasSuffix(m[1], "_bucket") || slices.Contains(met.labels, l[1]) {
				continue
			}
			t.Errorf("%s selects %s by label %q; its labels are %v", where, m[1], l[1], met.labels)
		}
	}
	// A by or without clause names labels of the series it aggregates
	// (any of the expression's, when it has several; le of a histogram's
	// buckets): grouping by a label no series has gives one empty group.
	var series []metric
	for _, name := range metricName.FindAllString(expr, -1) {
		if _, met, ok := resolve(name); ok {
			series = append(series, met)
		}
	}
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || l == "job" || l == "instance" || l == "le" || len(series) == 0 {
				continue
			}
			if !slices.ContainsFunc(series, func(met metric) bool { return slices.Contains(met.labels, l) }) {
				t.Errorf("%s groups by label %q, which none of its series has", where, l)
			}
		}
	}
	for _, r := range recorded.FindAllString(expr, -1) {
		if !records[r] {
			t.Errorf("%s uses the recording rule %s, which alerts.yml does not define", where, r)
		}
	}
}

// TestRulesAndDashboardUseRealMetrics: every hookline_* name in the rules
// and the dashboard is a metric the Go code registers (with the labels it
// selects by), so renaming a metric breaks this test instead of an alert.
func TestRulesAndDashboardUseRealMetrics(t *testing.T) {
	reg := registered(t)
	for _, must := range []string{"hookline_ingest_requests_total", "hookline_processor_transactions_total", "hookline_dlq_unresolved_entries"} {
		if _, ok := reg[must]; !ok {
			t.Fatalf("the source scan did not find %s: it is broken (found %d metrics)", must, len(reg))
		}
	}
	rules := loadRules(t)
	records := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			records[r.Record] = true
		}
	}
	used := map[string]bool{}
	for _, r := range rules {
		checkExpr(t, "rule "+r.Record+r.Alert, r.Expr, reg, records)
		for _, n := range metricName.FindAllString(r.Expr, -1) {
			used[n] = true
		}
	}
	for _, p := range dashboardPanels(t) {
		for _, tg := range p.Targets {
			checkExpr(t, "dashboard panel "+strconv.Quote(p.Title), tg.Expr, reg, records)
		}
	}
	for _, want := range []string{"hookline_ingest_requests_total", "hookline_ingest_ack_seconds_bucket", "hookline_processor_consumer_lag",
		"hookline_retrier_parked_records", "hookline_retrier_overdue_seconds", "hookline_processor_transactions_total",
		"hookline_dlq_oldest_unresolved_age_seconds"} {
		if !used[want] {
			t.Errorf("no rule uses %s", want)
		}
	}
}

// runbookBase is where every alert's runbook_url points, followed by the
// anchor of its line in the table of alerts of docs/operating.md.
const runbookBase = "https://github.com/hookline/hookline/blob/main/docs/operating.md#"

// TestAlertsAreActionable: every alert waits (for:), has a severity, a
// summary, a description and a runbook_url at its line of docs/operating.md's table
// of alerts (an anchor named after it), and is shown both firing and quiet
// by alerts_test.yml.
func TestAlertsAreActionable(t *testing.T) {
	tests, err := os.ReadFile("prometheus/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var ut struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(tests, &ut); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range ut.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		n++
		if r.For == "" {
			t.Errorf("%s has no for:", r.Alert)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		if len(r.Annotations["summary"]) < 10 || len(r.Annotations["description"]) < 80 {
			t.Errorf("%s: summary or description missing or too short to say what to do", r.Alert)
		}
		if !fires[r.Alert] {
			t.Errorf("%s: alerts_test.yml never shows it firing", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: alerts_test.yml has no case where it stays quiet", r.Alert)
		}
		anchor := strings.ToLower(r.Alert)
		if !strings.Contains(string(readme), "| <a name=\""+anchor+"\"></a>`"+r.Alert+"` |") {
			t.Errorf("%s is not in docs/operating.md's alerts table with its anchor <a name=%q></a>", r.Alert, anchor)
		}
		if got := r.Annotations["runbook_url"]; got != runbookBase+anchor {
			t.Errorf("%s: runbook_url %q, want %s", r.Alert, got, runbookBase+anchor)
		}
	}
	if n < 8 {
		t.Fatalf("%d alerts in alerts.yml", n)
	}
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name    string `json:"name"`
			Type    string `json:"type"`
			Query   string `json:"query"`
			Current struct {
				Value string `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("grafana/dashboards/hookline.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("hookline.json: %v", err)
	}
	return d
}

// dashboardPanels are the dashboard's panels, rows' nested ones included,
// rows left out.
func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(loadDashboard(t).Panels)
	return out
}

// TestDashboard: the dashboard parses, its data source variable defaults to
// the provisioned Prometheus, every panel queries through that variable and
// has a query, and the panels fit the 24-column grid without ids repeated.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Fatalf("dashboard uid %q title %q", d.UID, d.Title)
	}
	ds := grafanaDatasource(t)
	vars := d.Templating.List
	if len(vars) == 0 || vars[0].Name != "datasource" || vars[0].Type != "datasource" || vars[0].Query != "prometheus" || vars[0].Current.Value != ds.UID {
		t.Fatalf("templating %+v: want a datasource variable of type prometheus defaulting to %s", vars, ds.UID)
	}
	panels := dashboardPanels(t)
	if len(panels) < 15 {
		t.Fatalf("%d panels", len(panels))
	}
	ids := map[int]bool{}
	titles := []string{}
	for _, p := range panels {
		titles = append(titles, p.Title)
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without expr or refId", p.Title)
			}
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, g)
		}
	}
	all := strings.Join(titles, "|")
	for _, want := range []string{"Requests/s by code", "Kafka ack time", "Records/s by status", "Consumer lag", "Transactions/s by result",
		"Duplicates/s", "Restore time", "Moved/s by tier", "Parked by tier", "Overdue", "Dead-lettered/s", "DLQ entries", "Oldest unresolved",
		"Records accepted/s by event type", "Delivered and dead-lettered/s by event type", "Destination call time by event type"} {
		if !strings.Contains(all, want) {
			t.Errorf("no panel %q", want)
		}
	}
}
