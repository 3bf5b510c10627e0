package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers/transform"
)

// Route is one route of a provider in the harness's providers file (issue
// 22's `routes:`): an HTTP route delivers to the system's destination at
// Destination.RouteURL(Name), which checks that each call names the route
// it was sent for; a topic route writes each delivery to a topic of the
// system's own.
type Route struct {
	// Name is the route's name in the file, [a-z0-9_-]{1,40}.
	Name string
	// Events are the route's event-type globs ('*' any run of characters);
	// nil leaves `events` out: every event.
	Events []string
	// Where is the route's where: JSON pointer -> the value the body must
	// hold there (a string, bool or float64, as encoding/json decodes it);
	// nil leaves it out.
	Where map[string]any
	// Otherwise writes otherwise: true: the route takes every event that
	// no other route of its provider takes (Events must be nil).
	Otherwise bool
	// Topic, when set, makes a topic route: destination {topic: T} where T
	// is the system's prefix followed by Topic (the processor uses it as
	// written, so parallel systems never share it). System.RouteTopic
	// gives the whole name.
	Topic string
	// Timeout and MaxInflight are an HTTP route's destination.timeout and
	// destination.max_inflight (0: left out, the processor's defaults).
	Timeout     time.Duration
	MaxInflight int
	// AutoPauseAfter is the HTTP route's destination.auto_pause_after (0:
	// left out, the default).
	AutoPauseAfter time.Duration
	// TrialEvery is the HTTP route's destination.trial_every, the pace of
	// the trial calls while it is auto-paused (0: left out, the default).
	TrialEvery time.Duration
	// Priority is the route's class ("" leaves it out: normal).
	Priority string
	// Tiers is the route's retry.tiers (nil leaves retry out: every tier of
	// HOOKLINE_RETRY_TIERS).
	Tiers []string
	// Transform is the route's transform script (its source: written
	// beside the providers file); "" leaves transform out. The ledger
	// expects a topic route's records to be its output for the body sent
	// (Request with the body alone: a script for these tests reads only
	// request.body).
	Transform string
}

// matches says whether an event of type typ with body is delivered on r:
// the contract's globs, where '*' is any run of characters and every other
// character stands for itself, and every condition of Where holding in the
// body (a body that is not JSON holds none).
func (r Route) matches(typ string, body []byte) bool {
	if r.Events != nil && !slices.ContainsFunc(r.Events, func(glob string) bool { return globMatch(glob, typ) }) {
		return false
	}
	if len(r.Where) == 0 {
		return true
	}
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	for ptr, want := range r.Where {
		if got, ok := lookPointer(doc, ptr); !ok || got != want {
			return false
		}
	}
	return true
}

// lookPointer finds the value at a JSON pointer (RFC 6901) in doc, as
// encoding/json decoded it into any.
func lookPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// globMatch matches s against glob, '*' being any run of characters.
func globMatch(glob, s string) bool {
	parts := strings.Split(glob, "*")
	if len(parts) == 1 {
		return glob == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// routesEntry is provider's entry in the providers file with routes
// instead of a provider-level destination.
func (s *System) routesEntry(provider, secretEnv string, routes []Route) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    preset: %s\n    secret_env: [%s]\n", provider, provider, secretEnv)
	for _, line := range s.lines[provider] {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	b.WriteString("    routes:\n")
	for _, r := range routes {
		fmt.Fprintf(&b, "      %s:\n", r.Name)
		if r.Events != nil {
			fmt.Fprintf(&b, "        events: [%s]\n", quoted(r.Events))
		}
		if r.Otherwise {
			b.WriteString("        otherwise: true\n")
		}
		if r.Where != nil {
			w, err := json.Marshal(r.Where) // JSON is YAML; keys sorted
			if err != nil {
				s.tb.Fatalf("e2e: route %s: where: %v", r.Name, err)
			}
			fmt.Fprintf(&b, "        where: %s\n", w)
		}
		if r.Topic != "" {
			fmt.Fprintf(&b, "        destination: {topic: %q}\n", s.Prefix+r.Topic)
		} else {
			d := fmt.Sprintf("url: %q", s.Dest.RouteURL(r.Name))
			if r.Timeout > 0 {
				d += ", timeout: " + r.Timeout.String()
			}
			if r.MaxInflight > 0 {
				d += fmt.Sprintf(", max_inflight: %d", r.MaxInflight)
			}
			if r.AutoPauseAfter > 0 {
				d += ", auto_pause_after: " + r.AutoPauseAfter.String()
			}
			if r.TrialEvery > 0 {
				d += ", trial_every: " + r.TrialEvery.String()
			}
			fmt.Fprintf(&b, "        destination: {%s}\n", d)
		}
		if r.Priority != "" {
			fmt.Fprintf(&b, "        priority: %s\n", r.Priority)
		}
		if r.Tiers != nil {
			fmt.Fprintf(&b, "        retry: {tiers: [%s]}\n", strings.Join(r.Tiers, ", "))
		}
		if r.Transform != "" {
			file := fmt.Sprintf("transform-%s-%s.js", provider, r.Name)
			if err := os.WriteFile(filepath.Join(s.Dir, file), []byte(r.Transform), 0o600); err != nil {
				s.tb.Fatalf("e2e: route %s: %v", r.Name, err)
			}
			fmt.Fprintf(&b, "        transform: %s\n", file)
		}
	}
	return b.String()
}

// Transformed is what route's transform sends for body (the body itself
// when the route has none): the processor's own code, run on the body
// sent, so a delivered body can be compared byte for byte.
func (s *System) Transformed(tb testing.TB, provider, route string, body []byte) []byte {
	tb.Helper()
	for _, r := range s.routes[provider] {
		if r.Name != route || r.Transform == "" {
			continue
		}
		s.scriptsMu.Lock()
		sc, ok := s.scripts[provider+"/"+route]
		if !ok {
			var err error
			if sc, err = transform.Compile(route+".js", r.Transform, transform.Limits{Timeout: transform.MaxTimeout}); err != nil {
				s.scriptsMu.Unlock()
				tb.Fatalf("e2e: route %s: %v", route, err)
			}
			if s.scripts == nil {
				s.scripts = map[string]*transform.Script{}
			}
			s.scripts[provider+"/"+route] = sc
		}
		s.scriptsMu.Unlock()
		res, err := sc.Run(transform.Request{Body: body})
		if err != nil || res.Skip {
			tb.Fatalf("e2e: route %s: transform of %s: %v (skip %v)", route, body, err, res.Skip)
		}
		return res.Request.Body
	}
	return body
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// checkRoutes refuses routes the kit cannot write or account for: routes
// of a provider not in MixedProviders, event filters on a provider whose
// events' types the kit does not know, a name empty or used twice.
func checkRoutes(tb testing.TB, routes map[string][]Route) {
	tb.Helper()
	for p, rs := range routes {
		if !slices.Contains(MixedProviders, p) {
			tb.Fatalf("e2e: routes for %s: the harness gives routes to the providers of MixedProviders only", p)
		}
		seen := map[string]bool{}
		otherwise := 0
		for _, r := range rs {
			if r.Otherwise {
				otherwise++
				if r.Events != nil || otherwise > 1 {
					tb.Fatalf("e2e: provider %s: route %s: an otherwise route takes no events, and a provider has at most one", p, r.Name)
				}
			}
			if seen[r.Name] || r.Name == "" {
				tb.Fatalf("e2e: provider %s: route name %q empty or used twice", p, r.Name)
			}
			seen[r.Name] = true
			if r.Events != nil && NewEvent(p, "x").Type == "" {
				tb.Fatalf("e2e: provider %s: route %s filters by event type, and the kit does not know its events' types", p, r.Name)
			}
		}
	}
}

// RouteTopic is the topic of provider's topic route (as the providers file
// names it), or "" when it is not one.
func (s *System) RouteTopic(provider, route string) string {
	for _, r := range s.routes[provider] {
		if r.Name == route && r.Topic != "" {
			return s.Prefix + r.Topic
		}
	}
	return ""
}

// routesOf are the routes an accepted key of event type typ and body is
// delivered on: its provider's routes that match, else its otherwise route,
// or the provider's one route default when the harness gave it none. The
// provider is the key's part before the first ':' (every key of the
// harness's providers begins so).
func (s *System) routesOf(key, typ string, body []byte) []string {
	p, _, _ := strings.Cut(key, ":")
	rs, ok := s.routes[p]
	if !ok {
		return []string{headers.DefaultRoute}
	}
	var (
		out       []string
		otherwise string
	)
	for _, r := range rs {
		switch {
		case r.Otherwise:
			otherwise = r.Name
		case r.matches(typ, body):
			out = append(out, r.Name)
		}
	}
	if len(out) == 0 && otherwise != "" {
		out = append(out, otherwise)
	}
	return out
}

// topicRoutes maps each topic route's topic to its route.
func (s *System) topicRoutes() map[string]string {
	out := map[string]string{}
	for _, rs := range s.routes {
		for _, r := range rs {
			if r.Topic != "" {
				out[s.Prefix+r.Topic] = r.Name
			}
		}
	}
	return out
}
