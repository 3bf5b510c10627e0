// Package glob is the event type pattern of a providers file (a route's
// events, a key part's events, a schema's mapping): '*' matches any run of
// characters, every other character itself.
package glob

import (
	"fmt"
	"strings"

	"github.com/hookline/hookline/pkg/headers"
)

// Glob is an event type pattern: '*' matches any run of characters (dots
// included, none too), every other character itself.
type Glob struct {
	pattern string
	parts   []string // pattern split at each '*'
}

// Compile checks an events entry: a possible event type (at most 256
// printable bytes, headers.CheckEventType) where '*' is the wildcard, not
// empty and without "**".
func Compile(pattern string) (Glob, error) {
	switch {
	case pattern == "":
		return Glob{}, fmt.Errorf("an entry is empty: want an event type or a glob such as invoice.*")
	case strings.Contains(pattern, "**"):
		return Glob{}, fmt.Errorf("%q: ** is the same as *: write one", pattern)
	}
	if err := headers.CheckEventType(pattern); err != nil {
		return Glob{}, fmt.Errorf("%q can match no event type: %w", pattern, err)
	}
	return Glob{pattern: pattern, parts: strings.Split(pattern, "*")}, nil
}

// MustCompile is Compile for a pattern written in the code (a preset's);
// it panics when the pattern is not one.
func MustCompile(pattern string) Glob {
	g, err := Compile(pattern)
	if err != nil {
		panic(err)
	}
	return g
}

// Pattern is the pattern as written.
func (g Glob) Pattern() string { return g.pattern }

// Literal reports whether the pattern has no '*'.
func (g Glob) Literal() bool { return len(g.parts) == 1 }

// Match reports whether s matches the pattern. Cost: a prefix and suffix
// check and one search per inner part; no allocation.
func (g Glob) Match(s string) bool {
	if g.Literal() {
		return s == g.pattern
	}
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, part := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, last)
}

// MatchAny reports whether eventType matches one of globs; an empty
// eventType matches none.
func MatchAny(globs []Glob, eventType string) bool {
	if eventType == "" {
		return false
	}
	for _, g := range globs {
		if g.Match(eventType) {
			return true
		}
	}
	return false
}

// MostSpecific returns the index of the pattern that applies to eventType
// when several may (a schema's or a dedup_ttl's mapping): the one written
// literally as eventType, else the matching glob with the most characters
// besides '*', the first listed on a tie; an empty eventType matches "*"
// alone. -1: none applies. Cost: one Match per pattern.
func MostSpecific(globs []Glob, eventType string) int {
	best, bestLen := -1, -1
	for i, g := range globs {
		switch {
		case eventType == "" && g.pattern != "*":
			continue
		case g.Literal() && g.pattern == eventType:
			return i
		case !g.Match(eventType):
			continue
		}
		if n := len(g.pattern) - strings.Count(g.pattern, "*"); n > bestLen {
			best, bestLen = i, n
		}
	}
	return best
}
