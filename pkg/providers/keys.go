package providers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// keyPart is one part of a composite idempotency_key: the value of its
// first alternative that is present (a JSON pointer or a header, in order),
// else, when none is, the empty string (optional), the body's hash
// (bodyHash) or a MalformedError. A part with globs applies only to events
// whose type matches one of them and is left out of the key of every other
// event.
type keyPart struct {
	alts     []*rule // tried in order; none with a part of {body_hash: true} alone
	optional bool
	bodyHash bool
	globs    []glob // nil: every event
}

// always reports whether the part has a value in every key: it applies to
// every event and is never empty.
func (k keyPart) always() bool { return !k.optional && k.globs == nil }

// String names the part as messages do: its alternatives joined by "or",
// then "body hash" when that is its fallback.
func (k keyPart) String() string {
	var names []string
	for _, r := range k.alts {
		names = append(names, r.String())
	}
	if k.bodyHash {
		names = append(names, "body hash")
	}
	return strings.Join(names, " or ")
}

// carriesType reports whether the part is the event type itself: present
// in every key (required, no events), and read from nowhere but where
// event_type reads it.
func (k keyPart) carriesType(typeRule *rule) bool {
	return typeRule != nil && k.always() && !k.bodyHash && len(k.alts) == 1 && k.alts[0].String() == typeRule.String()
}

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
func (c *partConfig) build(field string) (keyPart, error) {
	if c == nil {
		return keyPart{}, fmt.Errorf("%s: empty: give json, header or body_hash", field)
	}
	k := keyPart{optional: c.Optional, bodyHash: c.BodyHash}
	switch n := len(c.JSON) + len(c.Header); {
	case n == 0 && !c.BodyHash:
		return keyPart{}, fmt.Errorf("%s: give json: <JSON pointer>, header: <name> (a list: alternatives, the first present wins) or body_hash: true", field)
	case n > maxPartAlternatives:
		return keyPart{}, fmt.Errorf("%s: %d alternatives, at most %d", field, n, maxPartAlternatives)
	case c.Optional && c.BodyHash:
		return keyPart{}, fmt.Errorf("%s: optional and body_hash both set: when no alternative is present the part is either empty (optional) or the body's hash (body_hash)", field)
	case n == 0 && c.Optional:
		return keyPart{}, fmt.Errorf("%s: optional needs json or header to be optional", field)
	case n > 0:
		alts, err := (&ruleConfig{JSON: c.JSON, Header: c.Header}).rules(field)
		if err != nil {
			return keyPart{}, err
		}
		for i, r := range alts {
			if slices.ContainsFunc(alts[:i], func(o *rule) bool { return o.String() == r.String() }) {
				return keyPart{}, fmt.Errorf("%s: %s is listed twice", field, r)
			}
		}
		k.alts = alts
	}
	if c.Events != nil {
		if len(*c.Events) == 0 {
			return keyPart{}, fmt.Errorf("%s.events: empty: list the event types (globs) the part applies to, or leave events out for every event", field)
		}
		for _, e := range *c.Events {
			g, err := compileGlob(e)
			if err != nil {
				return keyPart{}, fmt.Errorf("%s.events: %w", field, err)
			}
			k.globs = append(k.globs, g)
		}
	}
	return k, nil
}

// buildParts reads idempotency_key.parts and checks the whole rule with
// checkParts.
func buildParts(cfgs []*partConfig, typeRule *rule) ([]keyPart, error) {
	switch {
	case len(cfgs) == 0:
		return nil, fmt.Errorf("idempotency_key.parts: empty: list at least one part")
	case len(cfgs) > maxKeyParts:
		return nil, fmt.Errorf("idempotency_key.parts: %d parts, at most %d", len(cfgs), maxKeyParts)
	}
	parts := make([]keyPart, 0, len(cfgs))
	for i, c := range cfgs {
		k, err := c.build(fmt.Sprintf("idempotency_key.parts[%d]", i))
		if err != nil {
			return nil, err
		}
		parts = append(parts, k)
	}
	if err := checkParts(parts, typeRule); err != nil {
		return nil, err
	}
	return parts, nil
}

// checkParts refuses, at start, a key rule that lets two different events
// share a key only because a part was left out of it (docs/providers.md,
// "Key rules that leave a part out"):
//
//   - a part with events (left out for the other event types) needs
//     event_type, and the event type in the key: a part of its own, in
//     every key, read exactly where event_type reads it. Without it, events
//     of two types the part is left out for share a key whenever the other
//     parts match (Retell's call_started and call_analyzed of one call).
//   - an optional part (empty when absent) needs the event type in the key
//     as above, or a part with body_hash (an identity of the delivery:
//     its id, else its bytes). Without either, the events that lack it are
//     keyed on the other parts alone, which then tell no kind of event
//     from another.
//
// Together these give every key at least one part that is always there
// (the event type, or a body-hash part), so the events that have none of
// the other parts never all share one key.
//
// Two parts that are the same (alternatives, fallback and events) are
// refused too. What no static check can see is whether the parts that
// remain identify an event: a rule of one part {json: /call_id} gives
// every event of a call one key, as its author asked.
func checkParts(parts []keyPart, typeRule *rule) error {
	hasType := slices.ContainsFunc(parts, func(k keyPart) bool { return k.carriesType(typeRule) })
	hasHash := slices.ContainsFunc(parts, func(k keyPart) bool { return k.bodyHash })
	seen := map[string]int{}
	for i, k := range parts {
		field := fmt.Sprintf("idempotency_key.parts[%d]", i)
		id := k.String() + " optional=" + fmt.Sprint(k.optional) + " events=" + globsString(k.globs)
		if j, ok := seen[id]; ok {
			return fmt.Errorf("%s: the same part as parts[%d]", field, j)
		}
		seen[id] = i
		switch {
		case k.globs != nil && typeRule == nil:
			return fmt.Errorf("%s.events: the part applies by event type, but the provider has no event_type", field)
		case k.globs != nil && !hasType:
			return fmt.Errorf("%s.events: the part is left out of the key of events of other types, so two of those would share a key whenever the other parts match: add the event type as a part of its own, {%s}, required and without events", field, ruleYAML(typeRule))
		case k.optional && !hasType && !hasHash:
			if typeRule == nil {
				return fmt.Errorf("%s.optional: events without %s would be keyed on the other parts alone: add a part with body_hash: true (an id, else the body's hash), or an event_type and the event type as a part", field, k)
			}
			return fmt.Errorf("%s.optional: events without %s would be keyed on the other parts alone: add the event type as a part of its own, {%s}, or a part with body_hash: true (an id, else the body's hash)", field, k, ruleYAML(typeRule))
		}
	}
	return nil
}

func globsString(gs []glob) string {
	var s []string
	for _, g := range gs {
		s = append(s, g.pattern)
	}
	return strings.Join(s, ",")
}

// ruleYAML writes a rule as the providers file does: json: /p or header: H.
func ruleYAML(r *rule) string {
	if r.header != "" {
		return "header: " + r.header
	}
	return "json: " + r.path
}

// partsKey builds the key of parts for an event of type typ:
// <name>:<part>:<part>..., each part's value with "%" and ":"
// percent-encoded so that no two different lists of values give one key.
// A part whose events do not match typ is left out (it has no place in the
// key); an optional part without a value keeps its place, empty; a part
// with body_hash and no value is "sha256:<hex of the body>". A required
// part that is absent, null or empty is a MalformedError naming every such
// part. Cost: one lookup (one parse of the body) per JSON alternative
// tried, and one SHA-256 of the body per body-hash fallback.
func partsKey(p *Provider, typ string, h http.Header, body []byte) (string, error) {
	var b strings.Builder
	b.WriteString(p.Name)
	var missing []string
	for _, k := range p.keyParts {
		if k.globs != nil && !matchesAny(k.globs, typ) {
			continue
		}
		var v string
		for _, r := range k.alts {
			got, err := r.value(h, body, true)
			if err != nil {
				return "", err
			}
			if got != "" {
				v = got
				break
			}
		}
		if v == "" && k.bodyHash {
			v = bodyHash(body)
		}
		if v == "" && !k.optional {
			missing = append(missing, k.String())
			continue
		}
		b.WriteByte(':')
		b.WriteString(keyPartEscaper.Replace(v))
	}
	if len(missing) > 0 {
		return "", malformed("idempotency key part missing or empty: %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

var keyPartEscaper = strings.NewReplacer("%", "%25", ":", "%3A")
