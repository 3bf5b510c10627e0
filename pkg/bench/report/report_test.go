package report

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddRuns(t *testing.T) {
	for _, tc := range []struct {
		name            string
		runs            []float64
		want            bool
		value, min, max float64
		keptRuns        int
	}{
		{"odd count", []float64{3, 1, 2}, true, 2, 1, 3, 3},
		{"even count takes the mean of the middle two", []float64{4, 1, 3, 2}, true, 2.5, 1, 4, 4},
		{"one run", []float64{7}, true, 7, 7, 7, 1},
		{"NaN and Inf dropped", []float64{math.NaN(), 5, math.Inf(1)}, true, 5, 5, 5, 1},
		{"nothing left", []float64{math.NaN()}, false, 0, 0, 0, 0},
		{"none", nil, false, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder("p")
			r.AddRuns("x", "ratio", tc.runs)
			got := r.Entries()
			if !tc.want {
				if len(got) != 0 {
					t.Fatalf("recorded %+v, want nothing", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("recorded %d entries, want 1", len(got))
			}
			e := got[0]
			if e.Name != "p/x" || e.Unit != "ratio" || e.Value != tc.value || *e.Median != tc.value || *e.Min != tc.min || *e.Max != tc.max || len(e.Runs) != tc.keptRuns {
				t.Fatalf("got %+v (min %v median %v max %v), want value %v min %v max %v, %d runs", e, *e.Min, *e.Median, *e.Max, tc.value, tc.min, tc.max, tc.keptRuns)
			}
		})
	}
}

func TestAddSkipsNonFinite(t *testing.T) {
	r := NewRecorder("p")
	r.Add("a", 1, "x")
	r.Add("nan", math.NaN(), "x")
	r.Add("inf", math.Inf(-1), "x")
	if got := r.Entries(); len(got) != 1 || got[0].Name != "p/a" {
		t.Fatalf("got %+v, want only p/a", got)
	}
}

func TestWriteMergesPrograms(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "report.json")
	a := NewRecorder("a")
	a.Add("rate", 10, "events/s")
	a.Add("cpu", 5, "µs/event")
	if err := a.Write(path); err != nil {
		t.Fatal(err)
	}
	b := NewRecorder("b")
	b.AddRuns("ratio", "ratio", []float64{1, 2, 3})
	if err := b.Write(path); err != nil {
		t.Fatal(err)
	}
	again := NewRecorder("a")
	again.Add("rate", 20, "events/s") // a rerun of a replaces its figure in place
	if err := again.Write(path); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range f.Entries {
		names = append(names, e.Name)
	}
	if got, want := strings.Join(names, ","), "a/rate,a/cpu,b/ratio"; got != want {
		t.Fatalf("entries %s, want %s", got, want)
	}
	if f.Entries[0].Value != 20 {
		t.Fatalf("a/rate = %v, want the rerun's 20", f.Entries[0].Value)
	}
	if f.Machine.Cores < 1 || f.Machine.GoVersion == "" || f.Machine.Date == "" {
		t.Fatalf("machine description incomplete: %+v", f.Machine)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"valid", `{"format":1,"machine":{"cores":2},"entries":[{"name":"a/x","value":1.5,"unit":"ms"}]}`, ""},
		{"no entries", `{"format":1,"machine":{},"entries":[]}`, ""},
		{"other format", `{"format":2,"entries":[]}`, "format 2"},
		{"no format", `{"entries":[]}`, "format 0"},
		{"unnamed entry", `{"format":1,"entries":[{"value":1}]}`, "no name"},
		{"duplicate", `{"format":1,"entries":[{"name":"a","value":1},{"name":"a","value":2}]}`, `"a" twice`},
		{"not JSON", `figures`, "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	file := func(es ...Entry) File { return File{Format: FormatVersion, Entries: es} }
	e := func(name string, v float64) Entry { return Entry{Name: name, Value: v, Unit: "u"} }
	nan := math.NaN()
	for _, tc := range []struct {
		name     string
		old, new File
		want     []Row
	}{
		{"within threshold", file(e("a", 100)), file(e("a", 105)), []Row{{Name: "a", Unit: "u", Old: 100, New: 105, Ratio: 1.05}}},
		{"up beyond", file(e("a", 100)), file(e("a", 120)), []Row{{Name: "a", Unit: "u", Old: 100, New: 120, Ratio: 1.2, Moved: true}}},
		{"down beyond", file(e("a", 100)), file(e("a", 80)), []Row{{Name: "a", Unit: "u", Old: 100, New: 80, Ratio: 0.8, Moved: true}}},
		{"zero to zero", file(e("a", 0)), file(e("a", 0)), []Row{{Name: "a", Unit: "u", Ratio: nan}}},
		{"zero to something", file(e("a", 0)), file(e("a", 3)), []Row{{Name: "a", Unit: "u", New: 3, Ratio: nan, Moved: true}}},
		{"one side only, old order then new", file(e("gone", 1), e("a", 2)), file(e("a", 2), e("added", 3)), []Row{
			{Name: "gone", Unit: "u", Old: 1, New: nan, Ratio: nan, OnlyIn: "old"},
			{Name: "a", Unit: "u", Old: 2, New: 2, Ratio: 1},
			{Name: "added", Unit: "u", Old: nan, New: 3, Ratio: nan, OnlyIn: "new"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.old, tc.new, 0.10)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d rows %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Name != w.Name || g.Unit != w.Unit || !same(g.Old, w.Old) || !same(g.New, w.New) || !same(g.Ratio, w.Ratio) || g.Moved != w.Moved || g.OnlyIn != w.OnlyIn {
					t.Errorf("row %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) < 1e-9
}

func TestPrintMarksMoved(t *testing.T) {
	old := File{Format: FormatVersion, Entries: []Entry{{Name: "a", Value: 100}, {Name: "b", Value: 100}}}
	cur := File{Format: FormatVersion, Entries: []Entry{{Name: "a", Value: 150}, {Name: "b", Value: 101}}}
	var buf bytes.Buffer
	Print(&buf, old, cur, Compare(old, cur, 0.1), 0.1)
	out := buf.String()
	for _, want := range []string{"a ", "1.500", "<- moved more than 10%", "1 of 2 figures moved more than 10%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "<- moved") != 1 {
		t.Errorf("want one figure marked:\n%s", out)
	}
}

func TestSummaryVerdicts(t *testing.T) {
	h := Headline{Name: "x/ratio", Label: "x", Bound: 0.95}
	most := Headline{Name: "x/p99", Label: "p99", Most: true, Bound: 100}
	for _, c := range []struct {
		h    Headline
		e    Entry
		want string
	}{
		{h, Entry{Value: 0.96}, "met"},
		{h, Entry{Value: 0.94}, "**not met**"},
		{h, Entry{Value: 0.96, Runs: []float64{0.97, 0.96, 0.95}}, "met"},
		{h, Entry{Value: 0.96, Runs: []float64{0.97, 0.96, 0.90}}, "**not met** (2 of 3)"},
		{most, Entry{Value: 99, Runs: []float64{99, 100, 101}}, "**not met** (2 of 3)"},
		{Headline{Name: "x/rate"}, Entry{Value: 5}, ""},
	} {
		if got := verdict(c.h, c.e); got != c.want {
			t.Errorf("verdict(%+v, %+v) = %q, want %q", c.h, c.e, got, c.want)
		}
	}
	for v, want := range map[float64]string{0.876: "0.88", 29.798: "29.8", 213.748: "214", 53872.9: "53,873", -1234.4: "-1,234", 1e6: "1,000,000"} {
		if got := figure(v); got != want {
			t.Errorf("figure(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestReplaceSummary(t *testing.T) {
	f := File{Format: FormatVersion, Machine: Machine{Commit: "abc", Cores: 2}, Entries: []Entry{
		{Name: Headlines[0].Name, Value: 0.9, Unit: "ratio", Runs: []float64{0.9, 0.96}},
	}}
	doc := []byte("intro\n" + SummaryStart + "\nold table\n" + SummaryEnd + "\nrest\n")
	out, err := ReplaceSummary(doc, f)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"intro\n" + SummaryStart + "\nCommit abc", "| " + Headlines[0].Label + " | 0.90, 0.96 | ≥ 0.95 | **not met** (1 of 2) |",
		"| " + Headlines[1].Label + " | not in this report |", "\n\n" + SummaryEnd + "\nrest\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old table") {
		t.Errorf("the old table is still there:\n%s", s)
	}
	again, err := ReplaceSummary(out, f)
	if err != nil || string(again) != s {
		t.Errorf("a second rewrite changed it (%v):\n%s", err, again)
	}
	if _, err := ReplaceSummary([]byte("no block"), f); err == nil {
		t.Error("a document without the block: no error")
	}
}
