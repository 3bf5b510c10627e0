package control

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// breakerPrefix starts the key of a breaker report:
// "breaker:<provider>:<instance>" for the route default (and every report
// written before routes), "breaker:<provider>/<route>:<instance>" for
// another route. Follow skips these records (they are no operator setting).
const breakerPrefix = "breaker:"

// BreakerRefresh is how often a processor repeats the report of a breaker
// that stays open; BreakerStale is the age after which a reader ignores an
// open report (its processor stopped without saying the breaker closed).
const (
	BreakerRefresh = time.Minute
	BreakerStale   = 3 * BreakerRefresh
)

// Breaker is one processor's report of the circuit breaker of one route's
// destination, a record of the control topic keyed
// "breaker:<provider>:<instance>" for the route default or
// "breaker:<provider>/<route>:<instance>" (the latest per key counts, the
// topic is compacted). A processor writes one when the breaker opens or
// closes, one per destination at its start (closed), and repeats an open
// one every BreakerRefresh. `dlq serve` reads them to re-drive a route's
// DLQ entries only while no processor's breaker of that route is open.
type Breaker struct {
	Provider string `json:"provider"`
	// Route is the route whose destination it is; empty (every report
	// written before routes) is the route default.
	Route    string    `json:"route,omitempty"`
	Instance string    `json:"instance"`
	Open     bool      `json:"open"`
	At       time.Time `json:"at"`
}

func (b Breaker) key() string {
	target := b.Provider
	if r := RouteOr(b.Route); r != headers.DefaultRoute {
		target += "/" + r
	}
	return breakerPrefix + target + ":" + b.Instance
}

// BreakerRecord is the control topic record of b.
func BreakerRecord(topic string, b Breaker) (*kgo.Record, error) {
	if checkProvider(b.Provider) != nil || b.Route != "" && CheckRoute(b.Route) != nil || b.Instance == "" {
		return nil, fmt.Errorf("breaker report %+v: want a provider name, a route name or none, and an instance id", b)
	}
	return jsonRecord(topic, b.key(), b)
}

// DecodeBreaker reads a breaker report, of either key form; ok is false
// for a record of another kind. A tombstone is a closed breaker.
func DecodeBreaker(r *kgo.Record) (b Breaker, ok bool, err error) {
	rest, ok := strings.CutPrefix(string(r.Key), breakerPrefix)
	if !ok {
		return Breaker{}, false, nil
	}
	target, instance, found := strings.Cut(rest, ":")
	provider, route, _ := strings.Cut(target, "/")
	if !found || checkProvider(provider) != nil || strings.Contains(target, "/") && CheckRoute(route) != nil {
		return Breaker{}, true, fmt.Errorf("control record %s: want breaker:<provider>:<instance> or breaker:<provider>/<route>:<instance>", r.Key)
	}
	if r.Value == nil {
		return Breaker{Provider: provider, Route: route, Instance: instance, At: r.Timestamp}, true, nil
	}
	if err := json.Unmarshal(r.Value, &b); err != nil {
		return Breaker{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if b.Provider != provider || RouteOr(b.Route) != RouteOr(route) || b.Instance != instance {
		return Breaker{}, true, fmt.Errorf("control record %s names provider %q, route %q, instance %q", r.Key, b.Provider, b.Route, b.Instance)
	}
	return b, true, nil
}

// breakerSlot names one report within a provider: a route's breaker in one
// processor instance.
type breakerSlot struct{ route, instance string }

// Breakers is what a reader knows of every processor's breakers, by
// provider, then route and instance (a report without a route counted as
// the route default's). The zero value is empty and ready; it is not safe
// for concurrent use.
type Breakers map[string]map[breakerSlot]Breaker

// Apply keeps b as its route's and instance's latest report.
func (bs Breakers) Apply(b Breaker) {
	if bs[b.Provider] == nil {
		bs[b.Provider] = map[breakerSlot]Breaker{}
	}
	bs[b.Provider][breakerSlot{RouteOr(b.Route), b.Instance}] = b
}

// Closed reports whether no processor's breaker of any route of provider
// is open at now (an open report older than BreakerStale does not count);
// when not, it names an instance that reports one open.
func (bs Breakers) Closed(provider string, now time.Time) (bool, string) {
	return bs.closed(provider, "", now)
}

// ClosedRoute is Closed for one route of provider ("" is headers.DefaultRoute):
// the reports without a route are the route default's.
func (bs Breakers) ClosedRoute(provider, route string, now time.Time) (bool, string) {
	return bs.closed(provider, RouteOr(route), now)
}

// closed looks at every route of provider when route is "", else at route.
func (bs Breakers) closed(provider, route string, now time.Time) (bool, string) {
	for slot, b := range bs[provider] {
		if (route == "" || slot.route == route) && b.Open && now.Sub(b.At) < BreakerStale {
			return false, slot.instance
		}
	}
	return true, ""
}

// Breaker states RouteState reports.
const (
	BreakerOpen       = "open"
	BreakerClosed     = "closed"
	BreakerUnreported = "unreported"
)

// RouteState says what the processors report of the breaker of route
// ("" is headers.DefaultRoute) of provider at now: BreakerOpen, naming an
// instance that reports it open (a report under BreakerStale old), else
// BreakerClosed when any processor reported on it, else
// BreakerUnreported (no processor has run that route since the topic was
// compacted, or none reports breakers).
func (bs Breakers) RouteState(provider, route string, now time.Time) (state, instance string) {
	if closed, inst := bs.ClosedRoute(provider, route, now); !closed {
		return BreakerOpen, inst
	}
	for slot := range bs[provider] {
		if slot.route == RouteOr(route) {
			return BreakerClosed, ""
		}
	}
	return BreakerUnreported, ""
}

// Clone is a copy of bs that later Apply calls on bs do not change.
func (bs Breakers) Clone() Breakers {
	out := make(Breakers, len(bs))
	for p, slots := range bs {
		out[p] = maps.Clone(slots)
	}
	return out
}
