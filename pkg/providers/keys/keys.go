// Package keys makes and checks idempotency keys: the rules every key
// obeys (Check, MaxLen), the body's hash as the key of last resort
// (BodyHash), and composite keys of parts (Part, CheckParts, Compose).
// Which rule a provider keys on is the providers package's.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/rule"
)

// MaxLen is the longest idempotency key accepted, in bytes.
const MaxLen = 512

// Check enforces the key rules: not empty, at most MaxLen bytes, no
// control characters (the key travels as an HTTP header to destinations).
func Check(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("idempotency key is empty")
	case len(key) > MaxLen:
		return fmt.Errorf("idempotency key is %d bytes, more than %d", len(key), MaxLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("idempotency key is not valid UTF-8")
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("idempotency key contains a control character")
		}
	}
	return nil
}

// BodyHash is "sha256:<hex of body>", the key of last resort, which callers
// namespace with the provider's name ("<name>:sha256:<hex>").
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Part is one part of a composite idempotency_key: the value of its
// first alternative that is present (a JSON pointer or a header, in order),
// else, when none is, the empty string (optional), the body's hash
// (BodyHash) or an error. A part with globs applies only to events
// whose type matches one of them and is left out of the key of every other
// event.
type Part struct {
	Alts     []*rule.Rule // tried in order; none with a part of {body_hash: true} alone
	Optional bool
	BodyHash bool
	Events   []glob.Glob // nil: every event
}

// Always reports whether the part has a value in every key: it applies to
// every event and is never empty.
func (k Part) Always() bool { return !k.Optional && k.Events == nil }

// String names the part as messages do: its alternatives joined by "or",
// then "body hash" when that is its fallback.
func (k Part) String() string {
	var names []string
	for _, r := range k.Alts {
		names = append(names, r.String())
	}
	if k.BodyHash {
		names = append(names, "body hash")
	}
	return strings.Join(names, " or ")
}

// carriesType reports whether the part is the event type itself: present
// in every key (required, no events), and read from nowhere but where
// event_type reads it.
func (k Part) carriesType(typeRule *rule.Rule) bool {
	return typeRule != nil && k.Always() && !k.BodyHash && len(k.Alts) == 1 && k.Alts[0].String() == typeRule.String()
}

// CheckParts refuses, at start, a key rule that lets two different events
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
func CheckParts(parts []Part, typeRule *rule.Rule) error {
	hasType := slices.ContainsFunc(parts, func(k Part) bool { return k.carriesType(typeRule) })
	hasHash := slices.ContainsFunc(parts, func(k Part) bool { return k.BodyHash })
	seen := map[string]int{}
	for i, k := range parts {
		field := fmt.Sprintf("idempotency_key.parts[%d]", i)
		id := k.String() + " optional=" + fmt.Sprint(k.Optional) + " events=" + globsString(k.Events)
		if j, ok := seen[id]; ok {
			return fmt.Errorf("%s: the same part as parts[%d]", field, j)
		}
		seen[id] = i
		switch {
		case k.Events != nil && typeRule == nil:
			return fmt.Errorf("%s.events: the part applies by event type, but the provider has no event_type", field)
		case k.Events != nil && !hasType:
			return fmt.Errorf("%s.events: the part is left out of the key of events of other types, so two of those would share a key whenever the other parts match: add the event type as a part of its own, {%s}, required and without events", field, typeRule.YAML())
		case k.Optional && !hasType && !hasHash:
			if typeRule == nil {
				return fmt.Errorf("%s.optional: events without %s would be keyed on the other parts alone: add a part with body_hash: true (an id, else the body's hash), or an event_type and the event type as a part", field, k)
			}
			return fmt.Errorf("%s.optional: events without %s would be keyed on the other parts alone: add the event type as a part of its own, {%s}, or a part with body_hash: true (an id, else the body's hash)", field, k, typeRule.YAML())
		}
	}
	return nil
}

func globsString(gs []glob.Glob) string {
	var s []string
	for _, g := range gs {
		s = append(s, g.Pattern())
	}
	return strings.Join(s, ",")
}

// Compose builds the key of parts for an event of type typ:
// <name>:<part>:<part>..., each part's value with "%" and ":"
// percent-encoded so that no two different lists of values give one key.
// A part whose events do not match typ is left out (it has no place in the
// key); an optional part without a value keeps its place, empty; a part
// with body_hash and no value is "sha256:<hex of the body>". A required
// part that is absent, null or empty is an error naming every such
// part. Cost: one lookup (one parse of the body) per JSON alternative
// tried, and one SHA-256 of the body per body-hash fallback.
func Compose(name string, parts []Part, typ string, h http.Header, body []byte) (string, error) {
	var b strings.Builder
	b.WriteString(name)
	var missing []string
	for _, k := range parts {
		if k.Events != nil && !glob.MatchAny(k.Events, typ) {
			continue
		}
		var v string
		for _, r := range k.Alts {
			got, err := r.Value(h, body, true)
			if err != nil {
				return "", err
			}
			if got != "" {
				v = got
				break
			}
		}
		if v == "" && k.BodyHash {
			v = BodyHash(body)
		}
		if v == "" && !k.Optional {
			missing = append(missing, k.String())
			continue
		}
		b.WriteByte(':')
		b.WriteString(keyPartEscaper.Replace(v))
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("idempotency key part missing or empty: %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

var keyPartEscaper = strings.NewReplacer("%", "%25", ":", "%3A")
