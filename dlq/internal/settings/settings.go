// Package settings is the dlq tool's side of the operators' settings of a
// provider (every route of it) or of one route (pkg/control: pause, resume,
// drain at a rate): the rate syntax the CLI and the API share, the
// providers and routes a name is checked against, one reading of the
// control topic from its start to its end (`dlq provider list`, `dlq route
// list`), and the live view `dlq serve` keeps by following it (Live).
//
// Settings are kept by name (control.Setting.Name): "stripe" for a
// provider-wide one, "stripe/billing" for a route's (a provider name has no
// '/', so the two never meet).
package settings

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
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

// ErrUnknown is a provider, or a route of a provider, that is not in the
// providers file.
var ErrUnknown = errors.New("not in the providers file")

// Known is the providers and routes a setting may name: those of the
// providers file, or any valid name when there is no file (Checked false).
type Known struct {
	path     string
	names    []string
	routes   map[string][]string // provider -> its routes, sorted
	priority map[string]string   // "provider/route" -> its priority class
}

// LoadKnown reads the provider names of the providers file at path
// (HOOKLINE_PROVIDERS), and their routes, without its secrets; "" gives a
// Known that checks nothing. Cost: one read and parse of the file.
func LoadKnown(path string) (Known, error) {
	if path == "" {
		return Known{}, nil
	}
	reg, err := providers.LoadWithoutSecrets(path)
	if err != nil {
		return Known{}, fmt.Errorf("HOOKLINE_PROVIDERS=%s: %w", path, err)
	}
	k := Known{path: path, names: reg.Names(), routes: map[string][]string{}, priority: map[string]string{}}
	for _, n := range k.names {
		p, _ := reg.Get(n)
		k.routes[n] = routesOf(p)
		for _, rt := range p.Routes() {
			k.priority[route.Key(n, rt.Name)] = rt.Priority.String()
		}
	}
	return k, nil
}

// Priority is the priority class of a route of the providers file
// (critical, high, normal or low: docs/processor.md, "Priority classes");
// "" for a route the file does not have, or without a file.
func (k Known) Priority(provider, name string) string {
	return k.priority[route.Key(provider, name)]
}

// routesOf lists the names of p's routes, in name order: those of its
// routes:, or the route default its provider-level destination makes;
// none for a provider that delivers nowhere.
func routesOf(p *providers.Provider) []string {
	var out []string
	for _, rt := range p.Routes() {
		out = append(out, rt.Name)
	}
	return out
}

// Checked says whether names are checked against a providers file.
func (k Known) Checked() bool { return k.path != "" }

// Names are the providers of the file, sorted (none without a file).
func (k Known) Names() []string { return slices.Clone(k.names) }

// Routes are the routes of every provider of the file, as
// control.Setting{Provider, Route}, sorted (none without a file).
func (k Known) Routes() []control.Setting {
	var out []control.Setting
	for _, n := range k.names {
		for _, r := range k.routes[n] {
			out = append(out, control.Setting{Provider: n, Route: r})
		}
	}
	return out
}

// Check refuses a provider (route "") or a route of a provider that
// cannot be set: ErrUnknown when the providers file lacks it, another
// error for a name no setting may carry.
func (k Known) Check(provider, route string) error {
	if err := (control.Setting{Provider: provider, Route: route}).Validate(); err != nil {
		return err
	}
	if !k.Checked() {
		return nil
	}
	if !slices.Contains(k.names, provider) {
		return fmt.Errorf("unknown provider %q: %w %s, which has %s", provider, ErrUnknown, k.path, strings.Join(k.names, ", "))
	}
	if route != "" && !slices.Contains(k.routes[provider], route) {
		return fmt.Errorf("unknown route %q: %w %s, where %s has the routes %s", provider+"/"+route, ErrUnknown, k.path, provider, strings.Join(k.routes[provider], ", "))
	}
	return nil
}

// View is one provider's or route's setting as the CLI prints it and the
// API answers it: State is running, paused or draining (Rate calls per
// second).
type View struct {
	Provider string `json:"provider"`
	// Route is set on a route's setting, absent on a provider-wide one.
	Route  string     `json:"route,omitempty"`
	State  string     `json:"state"`
	Paused bool       `json:"paused"`
	Rate   float64    `json:"rate"`
	Text   string     `json:"text"` // "running", "paused", "draining at 5/s"
	By     string     `json:"by,omitempty"`
	At     *time.Time `json:"at,omitempty"` // when it was set; none for one never set
	// Why says why a processor set it (by auto-pause): since when every
	// call failed and the last error.
	Why string `json:"why,omitempty"`
}

// Name is "provider" or "provider/route".
func (v View) Name() string { return control.Setting{Provider: v.Provider, Route: v.Route}.Name() }

// ViewOf is the View of s.
func ViewOf(s control.Setting) View {
	v := View{Provider: s.Provider, Route: s.Route, State: "running", Paused: s.Paused, Text: s.String(), By: s.By, Why: s.Why}
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

// Views lists the provider-wide settings of every provider of k and every
// provider of got (settings by name), sorted by name; a provider without
// a setting is running.
func (k Known) Views(got map[string]control.Setting) []View {
	var want []control.Setting
	for _, n := range k.names {
		want = append(want, control.Setting{Provider: n})
	}
	return views(want, got, false)
}

// RouteViews lists the settings of every route of k and every route of
// got, sorted by provider and route; a route without a setting is running
// (as far as its own setting goes: a provider-wide one holds it too).
func (k Known) RouteViews(got map[string]control.Setting) []View {
	return views(k.Routes(), got, true)
}

// views lists want and the settings of got of the same kind (a route's
// or a provider-wide one), by name, one per name.
func views(want []control.Setting, got map[string]control.Setting, routes bool) []View {
	byName := map[string]control.Setting{}
	for _, s := range want {
		byName[s.Name()] = s
	}
	for _, s := range got {
		if (s.Route != "") == routes {
			byName[s.Name()] = s
		}
	}
	out := make([]View, 0, len(byName))
	for _, s := range byName {
		out = append(out, ViewOf(s))
	}
	slices.SortFunc(out, func(a, b View) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Route, b.Route))
	})
	return out
}
