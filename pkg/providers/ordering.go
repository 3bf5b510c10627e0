package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"unicode"
)

// MaxEntityLen bounds an entity as the header hookline.entity carries it:
// a longer one, or one with a control character, is carried as
// sha256:<hex> of its bytes (two entities still never share a value).
const MaxEntityLen = 200

// Ordered reports whether the provider has ordering: its events of one
// entity are called in order on each route.
func (p *Provider) Ordered() bool { return p.orderRule != nil }

// entity is the entity of one event of an ordered provider: what the
// ordering rule finds in the event's body (a JSON pointer; a string or a
// number) or the request's headers; "" when the provider is not ordered
// or the rule finds nothing there (a body that is not JSON, a pointer to
// nothing or to an object): the event is then its own entity, never
// refused for it.
func (p *Provider) entity(h http.Header, body []byte) string {
	if p.orderRule == nil {
		return ""
	}
	v, err := p.orderRule.Value(h, body, false)
	if err != nil || v == "" {
		return ""
	}
	if len(v) > MaxEntityLen || hasControl(v) {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return v
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return true
		}
	}
	return false
}
