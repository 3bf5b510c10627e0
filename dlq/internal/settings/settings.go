// Package settings is the dlq tool's side of the operators' per-provider
// settings (pkg/control: pause, resume, drain at a rate): the rate syntax
// the CLI and the API share, the providers a name is checked against, one
// reading of the control topic from its start to its end (`dlq provider
// list`), and the live view `dlq serve` keeps by following it (Live).
package settings

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
)

// MaxRate is the highest rate ParseRate takes, per second.
const MaxRate = 1e6

// ParseRate reads a rate per second written N, N/s, N/m or N/h (600/m is
// 10/s) that CheckRate takes. Callers that want a positive rate refuse 0
// themselves.
func ParseRate(v string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(v), "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want a number per second, such as 50 or 50/s or 600/m", v)
	}
	switch unit {
	case "", "s":
	case "m":
		n /= 60
	case "h":
		n /= 3600
	default:
		return 0, fmt.Errorf("%q: the unit after / is s, m or h", v)
	}
	if err := CheckRate(n); err != nil {
		return 0, fmt.Errorf("%q: %w", v, err)
	}
	return n, nil
}

// CheckRate refuses a rate per second below 0, above MaxRate or not a
// number.
func CheckRate(n float64) error {
	if !(n >= 0 && n <= MaxRate) {
		return fmt.Errorf("want a number per second from 0 to %g", float64(MaxRate))
	}
	return nil
}

// ErrUnknown is a provider name that is not in the providers file.
var ErrUnknown = errors.New("unknown provider")

// Known is the set of provider names a setting may name: those of the
// providers file, or any valid name when there is no file (Checked false).
type Known struct {
	path  string
	names []string
}

// LoadKnown reads the provider names of the providers file at path
// (HOOKLINE_PROVIDERS), without its secrets; "" gives a Known that checks
// nothing. Cost: one read and parse of the file.
func LoadKnown(path string) (Known, error) {
	if path == "" {
		return Known{}, nil
	}
	reg, err := providers.LoadWithoutSecrets(path)
	if err != nil {
		return Known{}, fmt.Errorf("HOOKLINE_PROVIDERS=%s: %w", path, err)
	}
	return Known{path: path, names: reg.Names()}, nil
}

// Checked says whether names are checked against a providers file.
func (k Known) Checked() bool { return k.path != "" }

// Names are the providers of the file, sorted (none without a file).
func (k Known) Names() []string { return slices.Clone(k.names) }

// Check refuses a name that cannot be a provider (ErrUnknown when the
// providers file lacks it; another error for a name no setting may carry).
func (k Known) Check(name string) error {
	if err := (control.Setting{Provider: name}).Validate(); err != nil {
		return err
	}
	if k.Checked() && !slices.Contains(k.names, name) {
		return fmt.Errorf("%w %q: the providers file %s has %s", ErrUnknown, name, k.path, strings.Join(k.names, ", "))
	}
	return nil
}

// View is one provider's setting as the CLI prints it and the API answers
// it: State is running, paused or draining (Rate calls per second).
type View struct {
	Provider string     `json:"provider"`
	State    string     `json:"state"`
	Paused   bool       `json:"paused"`
	Rate     float64    `json:"rate"`
	Text     string     `json:"text"` // "running", "paused", "draining at 5/s"
	By       string     `json:"by,omitempty"`
	At       *time.Time `json:"at,omitempty"` // when it was set; none for a provider never set
}

// ViewOf is the View of s.
func ViewOf(s control.Setting) View {
	v := View{Provider: s.Provider, State: "running", Paused: s.Paused, Text: s.String(), By: s.By}
	switch {
	case s.Paused:
		v.State = "paused"
	case s.Rate > 0:
		v.State, v.Rate = "draining", s.Rate
	}
	if !s.At.IsZero() {
		at := s.At.UTC()
		v.At = &at
	}
	return v
}

// Views lists the settings of every provider of k and every provider of
// got, sorted by name; a provider without a setting is running.
func (k Known) Views(got map[string]control.Setting) []View {
	names := k.Names()
	for n := range got {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]View, 0, len(names))
	for _, n := range names {
		s, ok := got[n]
		if !ok {
			s = control.Setting{Provider: n}
		}
		out = append(out, ViewOf(s))
	}
	return out
}
