package providers

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/glob"
)

// Dedup TTLs and replay windows. A provider's dedup_ttl is one duration
// for every event, or a mapping from event types or globs (as a route's
// events write them) to durations, the most specific entry winning as in
// schema: (glob.MostSpecific); "*" sets the provider's default, which is
// DefaultDedupTTL when the mapping has no "*":
//
//	dedup_ttl: 720h
//	dedup_ttl: {call_ended: 168h, call_analyzed: 72h}
//
// replay_window is how long ingest takes the same signed bytes for a
// replay of a delivery it accepted (RecognisesReplays providers only):
// a duration, or 0 for never. Its default is DefaultReplayWindow where a
// replay can carry a new key (a key or event type header the signature
// does not cover), else the event's dedup TTL (ReplayWindow).

// DefaultReplayWindow is replay_window's default for a provider whose
// key or event type may come from a header its signature does not cover
// (github, shopify, generic header keys): identical signed bytes under
// another key within the hour are a replay, later ones a new event.
const DefaultReplayWindow = time.Hour

// ttlEntry is one entry of a dedup_ttl mapping other than "*".
type ttlEntry struct {
	events glob.Glob
	ttl    time.Duration
}

// dedupTTLConfig is dedup_ttl: a duration, or a mapping of globs to
// durations (in file order).
type dedupTTLConfig struct {
	one     string
	entries [][2]string // glob, duration
}

func (c *dedupTTLConfig) UnmarshalYAML(n *yaml.Node) error {
	var err error
	c.one, c.entries, err = globMapping(n, "dedup_ttl", "a duration", "TTLs")
	return err
}

// buildTTLs reads dedup_ttl and replay_window into p. Call it after the
// signature and key rules are set (the replay window's default and
// whether it may be set depend on them).
func (c *providerConfig) buildTTLs(p *Provider) []error {
	var errs []error
	if t := c.DedupTTL; t != nil && t.one != "" {
		d, err := parseDuration(t.one)
		if err != nil {
			errs = append(errs, fmt.Errorf("dedup_ttl: %w", err))
		}
		p.DedupTTL = d
	} else if t != nil {
		seen := map[string]bool{}
		for _, e := range t.entries {
			d, err := parseDuration(e[1])
			if err != nil {
				errs = append(errs, fmt.Errorf("dedup_ttl[%q]: %w", e[0], err))
				continue
			}
			if seen[e[0]] {
				errs = append(errs, fmt.Errorf("dedup_ttl[%q]: listed twice", e[0]))
				continue
			}
			seen[e[0]] = true
			if e[0] == "*" {
				p.DedupTTL = d
				continue
			}
			g, err := glob.Compile(e[0])
			if err != nil {
				errs = append(errs, fmt.Errorf("dedup_ttl: %w", err))
				continue
			}
			p.ttls = append(p.ttls, ttlEntry{events: g, ttl: d})
			p.ttlGlobs = append(p.ttlGlobs, g)
		}
	}
	if c.ReplayWindow != "" {
		switch {
		case p.scheme == nil:
			errs = append(errs, fmt.Errorf("replay_window: the provider signs nothing: there is no capture to replay, nothing is recognised"))
		case !p.RecognisesReplays():
			errs = append(errs, fmt.Errorf("replay_window: preset %s signs a timestamp and every header its key comes from: a replay is refused once its tolerance passed, and within it keeps its key", c.Preset))
		}
		if c.ReplayWindow == "0" {
			p.replayWindow = new(time.Duration)
		} else if d, err := parseDuration(c.ReplayWindow); err != nil {
			errs = append(errs, fmt.Errorf("replay_window: %w (or 0: identical signed bytes are never a replay)", err))
		} else {
			p.replayWindow = &d
		}
	}
	return errs
}

// DedupTTLFor is how long a key of this event type is remembered: the
// most specific entry of dedup_ttl's mapping that matches it, else the
// provider's default (DedupTTL). Cost: one glob match per entry.
func (p *Provider) DedupTTLFor(eventType string) time.Duration {
	if i := glob.MostSpecific(p.ttlGlobs, eventType); i >= 0 {
		return p.ttls[i].ttl
	}
	return p.DedupTTL
}

// MaxDedupTTL is the longest dedup TTL any event of the provider can
// get: what the changelog must retain for it. Cost: one pass over
// dedup_ttl's entries.
func (p *Provider) MaxDedupTTL() time.Duration {
	d := p.DedupTTL
	for _, e := range p.ttls {
		d = max(d, e.ttl)
	}
	return d
}

// ReplayWindow is how long after ingest accepted a delivery of these
// event types the same signed bytes are taken for its replay (0: never;
// only meaningful where RecognisesReplays). replay_window when set; else
// DefaultReplayWindow when a replay could carry another key (a key or
// event type header the signature does not cover: two real events with
// identical bodies arrive so, under two delivery ids); else the longest
// dedup TTL of the event types: the same bytes then make the same keys,
// which the processor drops as duplicates for that long anyway, so the
// window loses nothing the keys would not. Cost: as DedupTTLFor per type.
func (p *Provider) ReplayWindow(eventTypes ...string) time.Duration {
	switch {
	case p.replayWindow != nil:
		return *p.replayWindow
	case len(p.unsignedKeyHeaders()) > 0:
		return DefaultReplayWindow
	}
	var d time.Duration
	for _, t := range eventTypes {
		d = max(d, p.DedupTTLFor(t))
	}
	if d == 0 {
		d = p.DedupTTL
	}
	return d
}
