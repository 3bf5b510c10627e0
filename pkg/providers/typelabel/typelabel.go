// Package typelabel bounds the event_type label of hookline's metrics
// (Labeller): a provider's event types as the providers file names them,
// the first few others the provider sends, and "other" for the rest, so a
// provider sending any number of types cannot grow a metric without bound.
package typelabel

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/providers/glob"
)

// Other is the label of an event type the Labeller gives no label of its
// own.
const Other = "other"

// Bounds of HOOKLINE_EVENT_TYPE_LABELS.
const (
	// DefaultSeen is how many event types per provider that its file
	// entry does not name get a label of their own, by default.
	DefaultSeen = 100
	// MaxSeen bounds HOOKLINE_EVENT_TYPE_LABELS.
	MaxSeen = 10_000
)

// MaxLen is the longest event type that gets a label of its own when the
// providers file does not name it; a longer one counts as unnamed.
const MaxLen = 128

// ReadEnv reads HOOKLINE_EVENT_TYPE_LABELS with r: how many event types
// per provider that the providers file does not name get a label of their
// own (0 to MaxSeen; default DefaultSeen).
func ReadEnv(r *envconf.Reader) int {
	return r.Int("HOOKLINE_EVENT_TYPE_LABELS", DefaultSeen, 0, MaxSeen)
}

// Labeller gives each event type of a provider its event_type label: the
// type itself when the providers file names it literally, or when it is
// one of the first maxSeen other types the provider sent since the
// Labeller was made; else the first glob of the file it matches (other
// than "*"), else Other. An empty type, one over MaxLen bytes, or one that
// is not printable UTF-8 is never a label of its own. So a provider's
// label values are at most the file's names, maxSeen more and Other. A
// Labeller is safe for concurrent use.
type Labeller struct {
	maxSeen   int
	providers map[string]*provider // not changed after New
}

// provider is one provider's names and the types seen.
type provider struct {
	literals map[string]string // type -> itself; not changed after New
	globs    []glob.Glob       // not changed after New
	// seen maps a type to a copy of its own, at most maxSeen of them:
	// read without a lock (a read lock's shared count was written by every
	// request, from both cores), added to under mu, which n counts.
	seen sync.Map
	full atomic.Bool // seen holds maxSeen entries: no more are added
	mu   sync.Mutex
	n    int // entries in seen
}

// New is a Labeller for the providers named has, each with the event type
// patterns its entry of the providers file names (literal ones and globs,
// in the file's order), keeping at most maxSeen other types per provider
// (maxSeen < 0 counts as 0). A provider New was not given gets Other for
// every type.
func New(named map[string][]glob.Glob, maxSeen int) *Labeller {
	l := &Labeller{maxSeen: max(maxSeen, 0), providers: make(map[string]*provider, len(named))}
	for name, globs := range named {
		p := &provider{literals: map[string]string{}}
		for _, g := range globs {
			switch {
			case g.Literal():
				p.literals[g.Pattern()] = g.Pattern()
			case g.Pattern() != "*": // matches every type: says nothing
				p.globs = append(p.globs, g)
			}
		}
		l.providers[name] = p
	}
	return l
}

// Label is eventType's label for provider (see Labeller). Cost: a map
// lookup or two without a lock, no allocation, when the type has been
// seen or is named; a copy of the type the first time it is seen; a match
// per glob of the file when it gets no label of its own.
func (l *Labeller) Label(provider, eventType string) string {
	p, ok := l.providers[provider]
	if !ok {
		return Other
	}
	if v, ok := p.literals[eventType]; ok {
		return v
	}
	if !labelable(eventType) {
		return p.glob(eventType)
	}
	if v, ok := p.seen.Load(eventType); ok {
		return v.(string)
	}
	if p.full.Load() {
		return p.glob(eventType)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.seen.Load(eventType); ok {
		return v.(string)
	}
	if p.n >= l.maxSeen {
		p.full.Store(true)
		return p.glob(eventType)
	}
	v := strings.Clone(eventType) // never hold on to the caller's buffer
	p.seen.Store(v, v)
	p.n++
	return v
}

// glob is the first glob eventType matches, else Other.
func (p *provider) glob(eventType string) string {
	if eventType == "" {
		return Other
	}
	for _, g := range p.globs {
		if g.Match(eventType) {
			return g.Pattern()
		}
	}
	return Other
}

// labelable reports whether eventType may be a label of its own: not
// empty, at most MaxLen bytes, printable UTF-8.
func labelable(eventType string) bool {
	if eventType == "" || len(eventType) > MaxLen || !utf8.ValidString(eventType) {
		return false
	}
	for _, r := range eventType {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
