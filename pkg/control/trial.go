package control

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// trialPrefix starts the key of a trial report: "trial:<provider>/<route>".
// Follow skips these records (they are no operator setting).
const trialPrefix = "trial:"

// Trial is a processor's report of the trial calls of an auto-paused
// route, a record of the control topic keyed "trial:<provider>/<route>"
// (the latest counts, whichever processor wrote it; the topic is
// compacted). A processor writes one when what its trials find changes:
// a trial call answered (Answering), or one failed after an answer. It
// counts only while the route's setting is the auto-pause it was made
// under (Pause is that setting's At): a resume, or a later pause, makes
// it stale.
type Trial struct {
	Provider string `json:"provider"`
	Route    string `json:"route"`
	// Pause is the At of the auto-pause the trials were made under.
	Pause time.Time `json:"pause"`
	// Answering says the last trial call answered: the receiver answers
	// again.
	Answering bool `json:"answering"`
	// Instance is the processor that made the trial, At when it ended.
	Instance string    `json:"instance"`
	At       time.Time `json:"at"`
}

func (t Trial) key() string { return trialPrefix + t.Provider + "/" + RouteOr(t.Route) }

// TrialRecord is the control topic record of t.
func TrialRecord(topic string, t Trial) (*kgo.Record, error) {
	if checkProvider(t.Provider) != nil || CheckRoute(RouteOr(t.Route)) != nil || t.Instance == "" {
		return nil, fmt.Errorf("trial report %+v: want a provider name, a route name and an instance id", t)
	}
	return jsonRecord(topic, t.key(), t)
}

// DecodeTrial reads a trial report; ok is false for a record of another
// kind. A tombstone is no report (the zero Trial of its route).
func DecodeTrial(r *kgo.Record) (t Trial, ok bool, err error) {
	target, ok := strings.CutPrefix(string(r.Key), trialPrefix)
	if !ok {
		return Trial{}, false, nil
	}
	provider, route, found := strings.Cut(target, "/")
	if !found || checkProvider(provider) != nil || CheckRoute(route) != nil {
		return Trial{}, true, fmt.Errorf("control record %s: want trial:<provider>/<route>", r.Key)
	}
	if r.Value == nil {
		return Trial{Provider: provider, Route: route}, true, nil
	}
	if err := json.Unmarshal(r.Value, &t); err != nil {
		return Trial{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if t.Provider != provider || RouteOr(t.Route) != route {
		return Trial{}, true, fmt.Errorf("control record %s names provider %q, route %q", r.Key, t.Provider, t.Route)
	}
	return t, true, nil
}

// Trials is what a reader knows of the routes' trial calls, by route
// (Setting.Name of the route's setting). The zero value is nil: make one
// with make or use NewReports. It is not safe for concurrent use.
type Trials map[string]Trial

// Apply keeps t as its route's latest report.
func (ts Trials) Apply(t Trial) {
	ts[Setting{Provider: t.Provider, Route: RouteOr(t.Route)}.Name()] = t
}

// Answering says when a trial call of the route whose setting is s was
// answered, if the route is auto-paused (s) and the latest trial made
// under that pause answered; ok false otherwise.
func (ts Trials) Answering(s Setting) (at time.Time, ok bool) {
	if !s.Paused || s.By != AutoPauseBy {
		return time.Time{}, false
	}
	t, found := ts[Setting{Provider: s.Provider, Route: RouteOr(s.Route)}.Name()]
	if !found || !t.Answering || !t.Pause.Equal(s.At) {
		return time.Time{}, false
	}
	return t.At, true
}

// Clone is a copy of ts that later reports kept in ts do not change.
func (ts Trials) Clone() Trials { return maps.Clone(ts) }
