// Package ordering names the entity of an event of an ordered provider:
// the value its ordering rule finds (Entity), which the processor delivers
// in order per route. Whether a provider is ordered, and by which rule, is
// the providers package's.
package ordering

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"unicode"

	"github.com/hookline/hookline/pkg/providers/rule"
)

// MaxEntityLen bounds an entity as the header hookline.entity carries it:
// a longer one, or one with a control character, is carried as
// sha256:<hex> of its bytes (two entities still never share a value).
const MaxEntityLen = 200

// Entity is the entity of one event: what r finds in the event's body (a
// JSON pointer; a string or a number) or the request's headers; "" when r
// is nil (the provider is not ordered) or finds nothing there (a body that
// is not JSON, a pointer to nothing or to an object): the event is then
// its own entity, never refused for it.
func Entity(r *rule.Rule, h http.Header, body []byte) string {
	if r == nil {
		return ""
	}
	v, err := r.Value(h, body, false)
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
