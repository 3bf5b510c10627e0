// Package report owns the benchmark report file: the figures the bench
// programs print, as named entries, with a description of the machine they
// ran on, and the comparison of two such files.
//
// A program records its figures with a Recorder and writes them with
// Recorder.Write to the file named by HOOKLINE_BENCH_REPORT (nothing is
// written when it is unset). Several programs write to the same file one
// after the other: each merges its entries into what is there, an entry of
// the same name replacing the older one.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// EnvPath names the report file the bench programs write to.
const EnvPath = "HOOKLINE_BENCH_REPORT"

// FormatVersion is the version of the file format; a reader refuses others.
const FormatVersion = 1

// Entry is one figure. Value is the figure itself; when the program measured
// it several times, Runs holds each run in order and Value is their median.
type Entry struct {
	Name   string    `json:"name"`
	Value  float64   `json:"value"`
	Unit   string    `json:"unit,omitempty"`
	Runs   []float64 `json:"runs,omitempty"`
	Min    *float64  `json:"min,omitempty"`
	Median *float64  `json:"median,omitempty"`
	Max    *float64  `json:"max,omitempty"`
}

// File is the whole report.
type File struct {
	Format  int     `json:"format"`
	Machine Machine `json:"machine"`
	Entries []Entry `json:"entries"`
}

// Recorder collects one program's entries; every name is prefixed with the
// program's name and a slash.
type Recorder struct {
	program string
	entries []Entry
}

// NewRecorder returns a recorder for program (e.g. "bench-e2e").
func NewRecorder(program string) *Recorder { return &Recorder{program: program} }

// Add records one figure. A NaN or infinite value (a ratio over zero) is
// left out: JSON cannot hold it.
func (r *Recorder) Add(name string, value float64, unit string) {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return
	}
	r.entries = append(r.entries, Entry{Name: r.program + "/" + name, Value: value, Unit: unit})
}

// AddRuns records a figure measured in several runs: the runs in order, their
// minimum, median and maximum, and the median as the value. Runs that are
// NaN or infinite are dropped; with none left nothing is recorded.
func (r *Recorder) AddRuns(name, unit string, runs []float64) {
	e, ok := runsEntry(r.program+"/"+name, unit, runs)
	if ok {
		r.entries = append(r.entries, e)
	}
}

func runsEntry(name, unit string, runs []float64) (Entry, bool) {
	kept := make([]float64, 0, len(runs))
	for _, v := range runs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return Entry{}, false
	}
	lo, med, hi := Spread(kept)
	return Entry{Name: name, Value: med, Unit: unit, Runs: kept, Min: &lo, Median: &med, Max: &hi}, true
}

// Spread is the minimum, median (the mean of the middle two for an even
// count) and maximum of xs, which must not be empty.
func Spread(xs []float64) (lo, med, hi float64) {
	s := slices.Sorted(slices.Values(xs))
	return s[0], (s[(len(s)-1)/2] + s[len(s)/2]) / 2, s[len(s)-1]
}

// Entries returns what was recorded so far.
func (r *Recorder) Entries() []Entry { return slices.Clone(r.entries) }

// WriteEnv writes the entries to the file HOOKLINE_BENCH_REPORT names, and
// does nothing when it is unset.
func (r *Recorder) WriteEnv() error {
	path := os.Getenv(EnvPath)
	if path == "" {
		return nil
	}
	return r.Write(path)
}

// Write merges the entries into the report at path, creating it (with the
// machine's description, load average at start only) when it does not exist.
func (r *Recorder) Write(path string) error {
	f, err := Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		f = File{Format: FormatVersion, Machine: Describe()}
	} else if err != nil {
		return err
	}
	f.Merge(r.entries)
	return f.Write(path)
}

// Merge adds entries to f, replacing any of the same name in place.
func (f *File) Merge(entries []Entry) {
	at := make(map[string]int, len(f.Entries))
	for i, e := range f.Entries {
		at[e.Name] = i
	}
	for _, e := range entries {
		if i, ok := at[e.Name]; ok {
			f.Entries[i] = e
			continue
		}
		at[e.Name] = len(f.Entries)
		f.Entries = append(f.Entries, e)
	}
}

// Read reads a report file.
func Read(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("bench report: %w", err)
	}
	return Parse(b)
}

// Parse decodes a report and checks its format version and entry names.
func Parse(b []byte) (File, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("bench report: %w", err)
	}
	if f.Format != FormatVersion {
		return File{}, fmt.Errorf("bench report: format %d, want %d", f.Format, FormatVersion)
	}
	seen := map[string]bool{}
	for i, e := range f.Entries {
		if e.Name == "" {
			return File{}, fmt.Errorf("bench report: entry %d has no name", i)
		}
		if seen[e.Name] {
			return File{}, fmt.Errorf("bench report: entry %q twice", e.Name)
		}
		seen[e.Name] = true
	}
	return f, nil
}

// Write writes f to path through a temporary file and a rename, so that a
// reader never sees half a report.
func (f File) Write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("bench report: %w", err)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench report: %w", err)
	}
	return nil
}
