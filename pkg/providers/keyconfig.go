package providers

import (
	"fmt"
	"slices"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/keys"
	"github.com/hookline/hookline/pkg/providers/rule"
)

// partConfig is one entry of idempotency_key.parts: {json, header,
// optional, body_hash, events}.
type partConfig struct {
	JSON     stringList  `yaml:"json"`
	Header   stringList  `yaml:"header"`
	Optional bool        `yaml:"optional"`
	BodyHash bool        `yaml:"body_hash"`
	Events   *stringList `yaml:"events"`
}

// maxPartAlternatives bounds the pointers and headers of one part.
const maxPartAlternatives = 8

// build checks one part; field is its place ("idempotency_key.parts[2]").
func (c *partConfig) build(field string) (keys.Part, error) {
	if c == nil {
		return keys.Part{}, fmt.Errorf("%s: empty: give json, header or body_hash", field)
	}
	k := keys.Part{Optional: c.Optional, BodyHash: c.BodyHash}
	switch n := len(c.JSON) + len(c.Header); {
	case n == 0 && !c.BodyHash:
		return keys.Part{}, fmt.Errorf("%s: give json: <JSON pointer>, header: <name> (a list: alternatives, the first present wins) or body_hash: true", field)
	case n > maxPartAlternatives:
		return keys.Part{}, fmt.Errorf("%s: %d alternatives, at most %d", field, n, maxPartAlternatives)
	case c.Optional && c.BodyHash:
		return keys.Part{}, fmt.Errorf("%s: optional and body_hash both set: when no alternative is present the part is either empty (optional) or the body's hash (body_hash)", field)
	case n == 0 && c.Optional:
		return keys.Part{}, fmt.Errorf("%s: optional needs json or header to be optional", field)
	case n > 0:
		alts, err := (&ruleConfig{JSON: c.JSON, Header: c.Header}).rules(field)
		if err != nil {
			return keys.Part{}, err
		}
		for i, r := range alts {
			if slices.ContainsFunc(alts[:i], func(o *rule.Rule) bool { return o.String() == r.String() }) {
				return keys.Part{}, fmt.Errorf("%s: %s is listed twice", field, r)
			}
		}
		k.Alts = alts
	}
	if c.Events != nil {
		if len(*c.Events) == 0 {
			return keys.Part{}, fmt.Errorf("%s.events: empty: list the event types (globs) the part applies to, or leave events out for every event", field)
		}
		for _, e := range *c.Events {
			g, err := glob.Compile(e)
			if err != nil {
				return keys.Part{}, fmt.Errorf("%s.events: %w", field, err)
			}
			k.Events = append(k.Events, g)
		}
	}
	return k, nil
}

// buildParts reads idempotency_key.parts and checks the whole rule with
// checkParts.
func buildParts(cfgs []*partConfig, typeRule *rule.Rule) ([]keys.Part, error) {
	switch {
	case len(cfgs) == 0:
		return nil, fmt.Errorf("idempotency_key.parts: empty: list at least one part")
	case len(cfgs) > maxKeyParts:
		return nil, fmt.Errorf("idempotency_key.parts: %d parts, at most %d", len(cfgs), maxKeyParts)
	}
	parts := make([]keys.Part, 0, len(cfgs))
	for i, c := range cfgs {
		k, err := c.build(fmt.Sprintf("idempotency_key.parts[%d]", i))
		if err != nil {
			return nil, err
		}
		parts = append(parts, k)
	}
	if err := keys.CheckParts(parts, typeRule); err != nil {
		return nil, err
	}
	return parts, nil
}
