package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// breakerPrefix starts the key of a breaker report: "breaker:<provider>:<instance>".
// Follow skips these records (they are no operator setting).
const breakerPrefix = "breaker:"

// BreakerRefresh is how often a processor repeats the report of a breaker
// that stays open; BreakerStale is the age after which a reader ignores an
// open report (its processor stopped without saying the breaker closed).
const (
	BreakerRefresh = time.Minute
	BreakerStale   = 3 * BreakerRefresh
)

// Breaker is one processor's report of the circuit breaker of one
// provider's destination, a record of the control topic keyed
// "breaker:<provider>:<instance>" (the latest per key counts, the topic is
// compacted). A processor writes one when the breaker opens or closes, one
// per destination at its start (closed), and repeats an open one every
// BreakerRefresh. `dlq serve` reads them to re-drive a provider only while
// no processor's breaker is open.
type Breaker struct {
	Provider string    `json:"provider"`
	Instance string    `json:"instance"`
	Open     bool      `json:"open"`
	At       time.Time `json:"at"`
}

func (b Breaker) key() string { return breakerPrefix + b.Provider + ":" + b.Instance }

// BreakerRecord is the control topic record of b.
func BreakerRecord(topic string, b Breaker) (*kgo.Record, error) {
	if b.Provider == "" || strings.ContainsAny(b.Provider, " /:") || b.Instance == "" {
		return nil, fmt.Errorf("breaker report %+v: want a provider name and an instance id", b)
	}
	v, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(b.key()), Value: v}, nil
}

// DecodeBreaker reads a breaker report; ok is false for a record of
// another kind. A tombstone is a closed breaker.
func DecodeBreaker(r *kgo.Record) (b Breaker, ok bool, err error) {
	rest, ok := strings.CutPrefix(string(r.Key), breakerPrefix)
	if !ok {
		return Breaker{}, false, nil
	}
	provider, instance, found := strings.Cut(rest, ":")
	if !found {
		return Breaker{}, true, fmt.Errorf("control record %s: want breaker:<provider>:<instance>", r.Key)
	}
	if r.Value == nil {
		return Breaker{Provider: provider, Instance: instance, At: r.Timestamp}, true, nil
	}
	if err := json.Unmarshal(r.Value, &b); err != nil {
		return Breaker{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if b.Provider != provider || b.Instance != instance {
		return Breaker{}, true, fmt.Errorf("control record %s names provider %q, instance %q", r.Key, b.Provider, b.Instance)
	}
	return b, true, nil
}

// FollowBreakers reads the control topic from its start like Follow and
// calls apply for every breaker report, until ctx ends.
func FollowBreakers(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string,
	apply func(Breaker), bad func(error)) error {
	return follow(ctx, newClient, topic, func(r *kgo.Record) {
		b, ok, err := DecodeBreaker(r)
		switch {
		case err != nil:
			bad(err)
		case ok:
			apply(b)
		}
	}, nil, bad)
}

// Breakers is what a reader knows of every processor's breakers. The zero
// value is empty and ready; it is not safe for concurrent use.
type Breakers map[string]map[string]Breaker // provider -> instance -> latest

// Apply keeps b as its instance's latest report.
func (bs Breakers) Apply(b Breaker) {
	if bs[b.Provider] == nil {
		bs[b.Provider] = map[string]Breaker{}
	}
	bs[b.Provider][b.Instance] = b
}

// Closed reports whether no processor's breaker of provider is open at now
// (an open report older than BreakerStale does not count); when not, it
// names an instance that reports it open.
func (bs Breakers) Closed(provider string, now time.Time) (bool, string) {
	for inst, b := range bs[provider] {
		if b.Open && now.Sub(b.At) < BreakerStale {
			return false, inst
		}
	}
	return true, ""
}
