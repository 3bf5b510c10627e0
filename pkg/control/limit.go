package control

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// limitPrefix starts the key of a limit report:
// "limit:<provider>/<route>:<instance>". Follow skips these records (they
// are no operator setting).
const limitPrefix = "limit:"

// LimitKeptFor is how old a limit report may be and still be where a
// restarted processor starts its route's adaptive limit: a restart or a
// deploy takes minutes; after a longer stop the receiver may have changed
// and the limit is learned again from the start.
const LimitKeptFor = time.Hour

// Limit is one processor's report of the adaptive concurrency limit it
// learned for one route's destination (docs/processor.md, adaptive
// concurrency), a record of the control topic keyed
// "limit:<provider>/<route>:<instance>" (the latest per key counts, the
// topic is compacted). A processor writes one when its limit changed,
// at most every few seconds; when it starts again under the same instance
// id, its route's limit starts from the report instead of from the
// bottom.
type Limit struct {
	Provider string `json:"provider"`
	Route    string `json:"route"`
	Instance string `json:"instance"`
	Limit    int    `json:"limit"`
	// Threshold is where the limiter's slow start ends (its
	// max_inflight while no cut ended it): a restart goes on doubling
	// below it; 0 (a report without it) counts as max_inflight.
	Threshold int       `json:"threshold,omitempty"`
	At        time.Time `json:"at"`
}

func (l Limit) key() string {
	return limitPrefix + l.Provider + "/" + RouteOr(l.Route) + ":" + l.Instance
}

// LimitRecord is the control topic record of l.
func LimitRecord(topic string, l Limit) (*kgo.Record, error) {
	if checkProvider(l.Provider) != nil || CheckRoute(RouteOr(l.Route)) != nil || l.Instance == "" || l.Limit < 1 {
		return nil, fmt.Errorf("limit report %+v: want a provider name, a route name, an instance id and a limit of at least 1", l)
	}
	return jsonRecord(topic, l.key(), l)
}

// LimitTombstone deletes the report of l's provider, route and instance
// from the compacted topic (a stale one: LimitKeptFor).
func LimitTombstone(topic string, l Limit) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(l.key())}
}

// DecodeLimit reads a limit report; ok is false for a record of another
// kind. A tombstone is no report (Limit 0).
func DecodeLimit(r *kgo.Record) (l Limit, ok bool, err error) {
	rest, ok := strings.CutPrefix(string(r.Key), limitPrefix)
	if !ok {
		return Limit{}, false, nil
	}
	target, instance, found := strings.Cut(rest, ":")
	provider, route, slash := strings.Cut(target, "/")
	if !found || !slash || instance == "" || checkProvider(provider) != nil || CheckRoute(route) != nil {
		return Limit{}, true, fmt.Errorf("control record %s: want limit:<provider>/<route>:<instance>", r.Key)
	}
	if r.Value == nil {
		return Limit{Provider: provider, Route: route, Instance: instance, At: r.Timestamp}, true, nil
	}
	if err := json.Unmarshal(r.Value, &l); err != nil {
		return Limit{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if l.Provider != provider || RouteOr(l.Route) != route || l.Instance != instance {
		return Limit{}, true, fmt.Errorf("control record %s names provider %q, route %q, instance %q", r.Key, l.Provider, l.Route, l.Instance)
	}
	return l, true, nil
}
