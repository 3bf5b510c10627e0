package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Row is one figure of a comparison. Ratio is New/Old (NaN when Old is 0 or
// the figure is in one file only); Moved says |Ratio-1| exceeded the
// threshold. OnlyIn is "old" or "new" for a figure only one file has.
type Row struct {
	Name     string
	Unit     string
	Old, New float64
	Ratio    float64
	Moved    bool
	OnlyIn   string
}

// Compare pairs the entries of two reports by name: the old file's order
// first, then those only the new one has.
func Compare(old, new File, threshold float64) []Row {
	byName := make(map[string]Entry, len(new.Entries))
	for _, e := range new.Entries {
		byName[e.Name] = e
	}
	var rows []Row
	seen := make(map[string]bool, len(old.Entries))
	for _, o := range old.Entries {
		seen[o.Name] = true
		n, ok := byName[o.Name]
		if !ok {
			rows = append(rows, Row{Name: o.Name, Unit: o.Unit, Old: o.Value, New: math.NaN(), Ratio: math.NaN(), OnlyIn: "old"})
			continue
		}
		r := Row{Name: o.Name, Unit: n.Unit, Old: o.Value, New: n.Value, Ratio: math.NaN()}
		switch {
		case o.Value != 0:
			r.Ratio = n.Value / o.Value
			r.Moved = math.Abs(r.Ratio-1) > threshold
		case n.Value != 0:
			r.Moved = true // from zero to something
		}
		rows = append(rows, r)
	}
	for _, n := range new.Entries {
		if !seen[n.Name] {
			rows = append(rows, Row{Name: n.Name, Unit: n.Unit, Old: math.NaN(), New: n.Value, Ratio: math.NaN(), OnlyIn: "new"})
		}
	}
	return rows
}

// Print writes the comparison as a table: each figure's old and new value,
// the ratio, and a mark on the figures that moved beyond the threshold; then
// the two machines and a count of what moved.
func Print(w io.Writer, old, new File, rows []Row, threshold float64) {
	fmt.Fprintf(w, "old: %s\nnew: %s\n\n", machineLine(old.Machine), machineLine(new.Machine))
	width := len("figure")
	for _, r := range rows {
		width = max(width, len(r.Name))
	}
	fmt.Fprintf(w, "%-*s %14s %14s %8s  %s\n", width, "figure", "old", "new", "new/old", "unit")
	moved := 0
	for _, r := range rows {
		mark := ""
		switch {
		case r.OnlyIn != "":
			mark = "  only in " + r.OnlyIn
		case r.Moved:
			mark = fmt.Sprintf("  <- moved more than %.0f%%", threshold*100)
			moved++
		}
		fmt.Fprintf(w, "%-*s %14s %14s %8s  %s%s\n", width, r.Name, num(r.Old), num(r.New), ratio(r.Ratio), r.Unit, mark)
	}
	fmt.Fprintf(w, "\n%d of %d figures moved more than %.0f%%\n", moved, len(rows), threshold*100)
}

func machineLine(m Machine) string {
	load := func(l []float64) string {
		if len(l) == 0 {
			return "?"
		}
		s := make([]string, len(l))
		for i, v := range l {
			s[i] = fmt.Sprintf("%.2f", v)
		}
		return strings.Join(s, " ")
	}
	return fmt.Sprintf("%s, commit %s, %d cores %s, %s, Kafka %s, %s, load %s -> %s",
		m.Date, m.Commit, m.Cores, m.CPUModel, m.GoVersion, m.KafkaVersion, m.OS, load(m.LoadStart), load(m.LoadEnd))
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.4g", v)
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}
