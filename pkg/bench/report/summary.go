package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A Headline is one figure of the summary table: an entry of the report,
// how to call it, and the target the issues set for it (none when Bound
// is 0).
type Headline struct {
	Name  string  // the entry's name in the report
	Label string  // what the table calls it
	Most  bool    // the target is an upper bound (else a lower bound)
	Bound float64 // the target; 0 for none
}

// Headlines are the figures the README's "Measured figures" table shows,
// in its order: the targets issue 36 set, and the throughput figures
// sizing starts from.
var Headlines = []Headline{
	{"bench-ingest/ratio ingest/minimal req/s", "ingest req/s / a minimal gin + franz-go handler's, by round", false, 0.95},
	{"bench-ingest/ratio ingest/minimal p99", "ingest p99 / the minimal handler's, by round", true, 1.1},
	{"bench-processor/first-seen events/s", "processor, first-seen events/s (one processor, no destination)", false, 0},
	{"bench-processor/ratio processor/ProducerPerformance", "processor events/s / Kafka's ProducerPerformance records/s", false, 0},
	{"bench-e2e/closed loop e2e events/s", "end to end events/s, closed loop (ingest, processor, destination)", false, 0},
	{"bench-e2e/open loop 202 to outcome p50 by round", "half load open loop, 202 → outcome p50, by round", true, 20},
	{"bench-e2e/open loop 202 to outcome p99 by round", "half load open loop, 202 → outcome p99, by round", true, 100},
	{"bench-e2e/open loop machine busy by round", "the machine's cores busy in those rounds (the services, the broker and the load generator), by round", false, 0},
	{"bench-e2e/ratio ordered/unordered half load p99 by round", "ordered / unordered twin p99 at half load, by round", true, 1.2},
	{"bench-e2e/cost processor CPU per event at 1000/s over the processor alone", "processor CPU per event at 1,000/s / saturated, by round", true, 3},
	{"bench-processor/ratio fan-out CPU per delivery 3 routes/per event 1 route pooled", "fan-out: CPU per delivery with 3 topic routes / per event with 1, pooled over the run's rounds", true, 0.5},
	{"bench-processor/ratio fan-out CPU per delivery 3 routes/per event 1 route by round", "the same, by round (the spread)", false, 0},
	{"bench-processor/ratio fan-out events/s 3 routes/1 route pooled", "fan-out: events/s with 3 topic routes / with 1, pooled over the run's rounds", false, 0.6},
	{"bench-processor/ratio fan-out events/s 3 routes/1 route by round", "the same, by round (the spread)", false, 0},
	{"bench-idle/idle CPU ingest", "idle ingest, by round", true, 0.5},
	{"bench-idle/idle CPU processor", "idle processor, by round", true, 0.5},
	{"bench-idle/idle CPU retrier", "idle retrier, by round", true, 0.5},
	{"bench-idle/idle CPU dlq serve", "idle `dlq serve`, by round", true, 0.5},
	{"bench-adaptive/adaptive C=32 goodput/allowed", "adaptive delivery: goodput / what the receiver allows, C = 32", false, 0.9},
	{"bench-adaptive/adaptive C=8 goodput/allowed", "adaptive delivery, C = 8", false, 0.9},
	{"bench-adaptive/adaptive C=64 goodput/allowed", "adaptive delivery, C = 64", false, 0.9},
	{"bench-adaptive/adaptive 429 share", "adaptive delivery: calls refused (429)", true, 5},
}

// WriteSummary writes the Headlines of f as a markdown table: the figure,
// its value (each run's, when it has runs), the target, and whether every
// run met it. A headline the file lacks is listed as "not in this report".
func WriteSummary(w io.Writer, f File) error {
	byName := make(map[string]Entry, len(f.Entries))
	for _, e := range f.Entries {
		byName[e.Name] = e
	}
	var b strings.Builder
	m := f.Machine
	fmt.Fprintf(&b, "Commit %s, %s; %d cores, %s, %s, Kafka %s; load average %s at the start, %s at the end.\n\n",
		m.Commit, m.Date, m.Cores, m.CPUModel, m.GoVersion, m.KafkaVersion, loads(m.LoadStart), loads(m.LoadEnd))
	b.WriteString("| figure | this run | target | |\n|---|---|---|---|\n")
	for _, h := range Headlines {
		e, ok := byName[h.Name]
		if !ok {
			fmt.Fprintf(&b, "| %s | not in this report | %s | |\n", h.Label, target(h))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", h.Label, value(e), target(h), verdict(h, e))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func loads(l []float64) string {
	if len(l) == 0 {
		return "unknown"
	}
	return figure(l[0])
}

// value is the entry's runs (or its value) with its unit.
func value(e Entry) string {
	vs := e.Runs
	if len(vs) == 0 {
		vs = []float64{e.Value}
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = figure(v)
	}
	unit := e.Unit
	switch unit {
	case "ratio":
		unit = ""
	case "% of a core", "% of the machine", "%":
		unit = " %"
	default:
		unit = " " + unit
	}
	return strings.Join(parts, ", ") + unit
}

func target(h Headline) string {
	switch {
	case h.Bound == 0:
		return ""
	case h.Most:
		return "≤ " + figure(h.Bound)
	default:
		return "≥ " + figure(h.Bound)
	}
}

// verdict is "met" when every run meets the target, "not met (k of n)"
// when k runs do, and "" without a target.
func verdict(h Headline, e Entry) string {
	if h.Bound == 0 {
		return ""
	}
	vs := e.Runs
	if len(vs) == 0 {
		vs = []float64{e.Value}
	}
	k := 0
	for _, v := range vs {
		if (h.Most && v <= h.Bound) || (!h.Most && v >= h.Bound) {
			k++
		}
	}
	if k == len(vs) {
		return "met"
	}
	if len(vs) == 1 {
		return "**not met**"
	}
	return fmt.Sprintf("**not met** (%d of %d)", k, len(vs))
}

// figure prints v with two significant decimals below 10, one below 100, and
// none (with thousands separated by commas) above.
func figure(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		s := strconv.FormatFloat(v, 'f', 0, 64)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		if neg {
			s = "-" + s
		}
		return s
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// The README's summary sits between these two lines.
const (
	SummaryStart = "<!-- bench summary: made by `make bench-readme` from docs/bench-report.json; do not edit -->"
	SummaryEnd   = "<!-- end of bench summary -->"
)

// ReplaceSummary returns doc with the text between SummaryStart and
// SummaryEnd replaced by f's summary table.
func ReplaceSummary(doc []byte, f File) ([]byte, error) {
	s := string(doc)
	i := strings.Index(s, SummaryStart)
	j := strings.Index(s, SummaryEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("bench report: no %q ... %q block", SummaryStart, SummaryEnd)
	}
	var b strings.Builder
	b.WriteString(s[:i+len(SummaryStart)])
	b.WriteString("\n")
	if err := WriteSummary(&b, f); err != nil {
		return nil, err
	}
	b.WriteString("\n")
	b.WriteString(s[j:])
	return []byte(b.String()), nil
}
