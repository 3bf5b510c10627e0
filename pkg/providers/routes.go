package providers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/route"
	"github.com/hookline/hookline/pkg/providers/transform"
	"github.com/hookline/hookline/pkg/topics"
)

// Route is one way out for a provider's events: the events it takes (event
// type globs and where conditions, or every event no other route takes),
// where they go and with which policy. Each route an event matches gets its
// own delivery. A Route is never changed after Load, so it is safe for
// concurrent use.
type Route struct {
	Name   string   // ^[a-z0-9_-]{1,40}$, unique within the provider
	Events []string // the globs as written; nil: every event
	// Otherwise is otherwise: true: the route takes every event that no
	// other route of its provider matches (Events and where are then
	// unset). At most one route of a provider has it.
	Otherwise   bool
	Destination *Destination // URL set (HTTP) or Topic set (Kafka), never both
	Signing     *Signing     // nil: calls are not signed
	Priority    Priority
	Retry       *RetryPolicy // nil: every tier; non-nil with no Tiers: a single attempt
	// HoldOnDead is on_dead: hold, for an ordered provider: an entity
	// whose head went to the DLQ stays held until the head is replayed
	// and done. False (on_dead: release, the default): the entity's later
	// records are delivered at once.
	HoldOnDead bool
	// Transform is the route's transformation (transform:, a JavaScript
	// file relative to the providers file), compiled at load; nil: the
	// route sends the request as received.
	Transform *transform.Script

	// Filter is filter: conditions on the body and the request headers
	// (route.Filter); nil: none.
	Filter *route.Filter

	match route.Matcher // Events compiled, where and Filter
}

// Matches reports whether an event goes to the route: its type matches one
// of Events (or Events is nil), every where condition holds on the body
// parsed as JSON (a body that is not JSON, or a pointer that resolves to
// nothing, does not match), and its filter holds on the body and headers;
// for the otherwise route, no other route of its provider matches. An
// empty event type matches only a route without Events. Cost: no
// allocation for a route without where or filter; with them, one parse of
// the body; for the otherwise route, a match per other route.
func (rt *Route) Matches(req route.Request) bool {
	var doc route.Doc
	return rt.match.Match(req, &doc)
}

// RequestOf is the request a record carries, as a route's rule sees it: its
// event type header, its value, and the request headers ingest copied
// with it (a filter's headers among them). Cost: a closure; each header
// read is a scan of the record's headers.
func RequestOf(r *kgo.Record) route.Request {
	return route.Request{
		EventType: headers.Value(r, headers.EventType),
		Body:      r.Value,
		Header:    func(name string) (string, bool) { return headers.Get(r, headers.HTTPName(name)) },
	}
}

// HTTPRequest is the request an HTTP delivery would be, as a route's rule
// sees it. Only the headers ForwardHeaders copies reach the processor; a
// filter's headers are always among them, so a filter reads the same
// either way.
func HTTPRequest(eventType string, body []byte, h http.Header) route.Request {
	return route.Request{
		EventType: eventType,
		Body:      body,
		Header: func(name string) (string, bool) {
			vs := h.Values(name)
			if len(vs) == 0 {
				return "", false
			}
			return vs[0], true
		},
	}
}

// RouteVerdict is one route's answer for an event (Provider.Explain):
// whether it takes it and which part of its rule decided. YieldedTo is, for
// the otherwise route that did not match, the first other route that did.
type RouteVerdict struct {
	Route *Route
	route.Verdict
	YieldedTo string
}

// Explain gives, for each route in name order, whether the event goes to
// it and why: the processor's own matching (Match takes exactly the routes
// Explain says match). Cost: Match's, and a slice of the routes.
func (p *Provider) Explain(req route.Request) []RouteVerdict {
	var (
		doc       route.Doc
		out       = make([]RouteVerdict, 0, len(p.routes))
		matched   string
		otherwise = -1
	)
	for _, rt := range p.routes {
		if rt.Otherwise {
			otherwise = len(out)
			out = append(out, RouteVerdict{Route: rt})
			continue
		}
		v := rt.match.Explain(req, &doc)
		if v.Matched && matched == "" {
			matched = rt.Name
		}
		out = append(out, RouteVerdict{Route: rt, Verdict: v})
	}
	if otherwise >= 0 {
		out[otherwise].Verdict = route.Verdict{Matched: matched == "", By: route.ByOtherwise, Yielded: -1}
		out[otherwise].YieldedTo = matched
	}
	return out
}

// Routes returns the provider's routes in name order: those of its
// routes:, or the one route "default" its provider-level destination makes
// (with the provider's Destination, Priority and Retry); nil when it
// delivers nowhere. Cost: none; the slice is the provider's own: never
// modify it.
func (p *Provider) Routes() []*Route { return p.routes }

// WithoutDefault reports whether the provider has routes but none named
// default: what its route default left waiting (a provider-level
// destination moved to routes:) goes to the routes its events match.
func (p *Provider) WithoutDefault() bool {
	if len(p.routes) == 0 {
		return false
	}
	_, ok := p.Route(route.Default)
	return !ok
}

// Route returns the route called name. Cost: a binary search over the
// routes.
func (p *Provider) Route(name string) (*Route, bool) {
	i, ok := slices.BinarySearchFunc(p.routes, name, func(rt *Route, name string) int { return cmp.Compare(rt.Name, name) })
	if !ok {
		return nil, false
	}
	return p.routes[i], true
}

// Match appends to dst the routes an event goes to, in name order (see
// Route.Matches): those it matches, else the provider's otherwise route if
// it has one. It returns the extended slice; none appended: the event is
// unrouted. Cost: no allocation when dst has room and no route has a
// where or a filter; with them, one parse of the body whatever the number
// of routes.
func (p *Provider) Match(req route.Request, dst []*Route) []*Route {
	var (
		doc       route.Doc
		n         = len(dst)
		otherwise *Route
	)
	for _, rt := range p.routes {
		if rt.Otherwise { // rt.match would match every other route again
			otherwise = rt
			continue
		}
		if rt.match.Match(req, &doc) {
			dst = append(dst, rt)
		}
	}
	if len(dst) == n && otherwise != nil {
		dst = append(dst, otherwise)
	}
	return dst
}

// RouteTopics returns the topics of every topic destination, sorted, each
// once. Cost: a copy of the list.
func (r *Registry) RouteTopics() []string { return slices.Clone(r.topics) }

// Signing is a route's signing: {secret_env: [...]}: the processor signs
// each HTTP call of the route as Standard Webhooks do, one signature per
// secret (processor/internal/deliver). Like a Provider it never prints its
// secrets.
type Signing struct {
	Envs    []string // the variable names, for logs
	Secrets [][]byte // decoded keys, in the listed order; empty when loaded without secrets
}

// String names the variables, never the secrets. String, GoString, Format
// and LogValue have value receivers so that a Signing value prints as
// safely as a pointer.
func (s Signing) String() string {
	return fmt.Sprintf("signing with %s (%d secrets)", strings.Join(s.Envs, ", "), len(s.Secrets))
}

// GoString is String: %#v must not print the secrets either.
func (s Signing) GoString() string { return s.String() }

// Format prints String for every verb.
func (s Signing) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue gives slog the variable names only.
func (s Signing) LogValue() slog.Value { return slog.AnyValue(s.Envs) }

// MarshalJSON writes String: the variable names only.
func (s Signing) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// routeConfig is one entry of a provider's routes.
type routeConfig struct {
	Events      *stringList          `yaml:"events"`
	Where       map[string]yaml.Node `yaml:"where"`
	Filter      yaml.Node            `yaml:"filter"` // Kind 0: not set
	Otherwise   bool                 `yaml:"otherwise"`
	Destination *destinationConfig   `yaml:"destination"`
	Signing     *signingConfig       `yaml:"signing"`
	Priority    string               `yaml:"priority"`
	Retry       *retryConfig         `yaml:"retry"`
	OnDead      string               `yaml:"on_dead"`
	// Transform is a JavaScript file, relative to the providers file;
	// TransformTimeout and TransformMemory bound each call.
	Transform        string `yaml:"transform"`
	TransformTimeout string `yaml:"transform_timeout"`
	TransformMemory  string `yaml:"transform_memory"`
}

// signingConfig is a route's signing: {secret_env: [...]}.
type signingConfig struct {
	SecretEnv stringList `yaml:"secret_env"`
}

// validRouteName reports whether name can be a route's name:
// ^[a-z0-9_-]{1,40}$.
func validRouteName(name string) bool {
	if name == "" || len(name) > 40 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// buildRoutes checks a provider's routes and sets p.routes and p.Priority
// (the highest of the routes'). Errors name the route and the field.
func (c *providerConfig) buildRoutes(p *Provider, dir string, lookupEnv func(string) (string, bool), mode secretsMode) []error {
	var errs []error
	for _, f := range [...]struct {
		name string
		set  bool
	}{{"destination", c.Destination != nil}, {"priority", c.Priority != ""}, {"retry", c.Retry != nil}} {
		if f.set {
			errs = append(errs, fmt.Errorf("%s: set beside routes: a provider with routes takes no provider-level %s (give each route its own)", f.name, f.name))
		}
	}
	if len(c.Routes) == 0 {
		errs = append(errs, fmt.Errorf("routes: empty: give at least one route, or leave routes out and use destination"))
	}
	names := make([]string, 0, len(c.Routes))
	for name := range c.Routes {
		names = append(names, name)
	}
	slices.Sort(names)
	p.Priority = PriorityLow
	for _, name := range names {
		rt, rerrs := c.Routes[name].build(name, dir, lookupEnv, mode)
		for _, err := range rerrs {
			errs = append(errs, fmt.Errorf("route %q: %w", name, err))
		}
		if len(rerrs) > 0 {
			continue
		}
		p.routes = append(p.routes, rt)
		p.Priority = max(p.Priority, rt.Priority)
		if rt.Filter != nil {
			for _, h := range rt.Filter.HeaderNames() { // copied with the record, for the processor's filter
				p.forward = appendForward(slices.Clip(p.forward), h)
			}
		}
	}
	if err := p.yieldOtherwise(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// yieldOtherwise makes the otherwise route, if any, yield to every other
// route of p (its matcher's Unless); more than one is an error naming them.
func (p *Provider) yieldOtherwise() error {
	var otherwise, others []*Route
	for _, rt := range p.routes {
		if rt.Otherwise {
			otherwise = append(otherwise, rt)
		} else {
			others = append(others, rt)
		}
	}
	if len(otherwise) > 1 {
		return fmt.Errorf("routes %q: each has otherwise: true; a provider has at most one otherwise route", routeNames(otherwise))
	}
	for _, o := range otherwise {
		for _, rt := range others {
			o.match.Unless = append(o.match.Unless, rt.match)
		}
	}
	return nil
}

// routeNames are the names of rts, in their order.
func routeNames(rts []*Route) []string {
	names := make([]string, 0, len(rts))
	for _, rt := range rts {
		names = append(names, rt.Name)
	}
	return names
}

// defaultRoute makes the route "default" of a provider-level destination.
func (p *Provider) defaultRoute() {
	if p.Destination == nil {
		return
	}
	p.routes = []*Route{{Name: route.Default, Destination: p.Destination, Priority: p.Priority, Retry: p.Retry}}
}

func (c *routeConfig) build(name, dir string, lookupEnv func(string) (string, bool), mode secretsMode) (*Route, []error) {
	if !validRouteName(name) {
		return nil, []error{fmt.Errorf("name must match ^[a-z0-9_-]{1,40}$")}
	}
	if c == nil {
		return nil, []error{fmt.Errorf("empty block: destination is required")}
	}
	rt := &Route{Name: name, Priority: PriorityNormal, Otherwise: c.Otherwise}
	var errs []error
	if c.Otherwise && c.Events != nil {
		errs = append(errs, fmt.Errorf("events: set beside otherwise: true: the otherwise route takes every event no other route matches; give these events a route of their own"))
	}
	if c.Otherwise && c.Where != nil {
		errs = append(errs, fmt.Errorf("where: set beside otherwise: true: the otherwise route takes every event no other route matches; give this condition a route of its own"))
	}
	if c.Otherwise && c.Filter.Kind != 0 {
		errs = append(errs, fmt.Errorf("filter: set beside otherwise: true: the otherwise route takes every event no other route matches; give this filter a route of its own"))
	}
	if c.Events != nil {
		if len(*c.Events) == 0 {
			errs = append(errs, fmt.Errorf("events: empty: list event type globs, or leave events out for every event"))
		}
		for _, e := range *c.Events {
			g, err := glob.Compile(e)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("events: %w", err))
			case slices.Contains(rt.Events, e):
				errs = append(errs, fmt.Errorf("events: %q is listed twice", e))
			default:
				rt.Events = append(rt.Events, e)
				rt.match.Globs = append(rt.match.Globs, g)
			}
		}
	}
	var werrs []error
	rt.match.Where, werrs = route.ParseWhere(c.Where)
	errs = append(errs, werrs...)
	if c.Filter.Kind != 0 {
		f, ferrs := route.ParseFilter(&c.Filter)
		for _, err := range ferrs {
			errs = append(errs, fmt.Errorf("filter: %w", err))
		}
		rt.Filter, rt.match.Filter = f, f
	}
	if c.Destination == nil {
		errs = append(errs, fmt.Errorf("destination: required: {url: ...} or {topic: ...}"))
	} else {
		d, derrs := c.Destination.build()
		errs = append(errs, derrs...)
		rt.Destination = d
	}
	if c.Signing != nil {
		s, serrs := c.Signing.build(lookupEnv, mode)
		errs = append(errs, serrs...)
		if c.Destination != nil && c.Destination.Topic != "" {
			errs = append(errs, fmt.Errorf("signing: a topic destination takes no signing (it makes no HTTP call)"))
		}
		rt.Signing = s
	}
	if c.Priority != "" {
		pr, err := ParsePriority(c.Priority)
		if err != nil {
			errs = append(errs, fmt.Errorf("priority: %w", err))
		}
		rt.Priority = pr
	}
	if c.Retry != nil {
		rp, err := c.Retry.build()
		if err != nil {
			errs = append(errs, err)
		}
		rt.Retry = rp
	}
	if t, err := c.buildTransform(dir); err != nil {
		errs = append(errs, err)
	} else {
		rt.Transform = t
	}
	switch c.OnDead {
	case "", "release":
	case "hold":
		rt.HoldOnDead = true
	default:
		errs = append(errs, fmt.Errorf("on_dead: %q: want release (the default) or hold", c.OnDead))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return rt, nil
}

// buildTransform compiles the route's transform:, with its bounds
// (transform_timeout, transform_memory); nil when it has none. A file
// that cannot be read, does not compile or defines no transform function
// is an error naming the file.
func (c *routeConfig) buildTransform(dir string) (*transform.Script, error) {
	if c.Transform == "" {
		if c.TransformTimeout != "" || c.TransformMemory != "" {
			return nil, fmt.Errorf("transform_timeout, transform_memory: set without transform: nothing runs")
		}
		return nil, nil
	}
	var lim transform.Limits
	if c.TransformTimeout != "" {
		d, err := parseDuration(c.TransformTimeout)
		if err != nil || d <= 0 || d > transform.MaxTimeout {
			return nil, fmt.Errorf("transform_timeout: %q: want a duration above 0 and at most %s (default %s)", c.TransformTimeout, transform.MaxTimeout, transform.DefaultTimeout)
		}
		lim.Timeout = d
	}
	if c.TransformMemory != "" {
		n, err := envconf.ParseBytes(c.TransformMemory)
		if err != nil || n < 1<<20 || n > transform.MaxMemory {
			return nil, fmt.Errorf("transform_memory: %q: want from 1MiB to %s (default %s)", c.TransformMemory, envconf.Size(transform.MaxMemory), envconf.Size(transform.DefaultMemory))
		}
		lim.Memory = n
	}
	return transform.Load(dir, c.Transform, lim)
}

// build checks the variable names and, when mode reads signing secrets,
// reads and decodes each as a Standard Webhooks secret (the standard
// preset's decoding: whsec_<base64>, or bare base64). Errors name the
// variable, never its value.
func (c *signingConfig) build(lookupEnv func(string) (string, bool), mode secretsMode) (*Signing, []error) {
	if len(c.SecretEnv) == 0 {
		return nil, []error{fmt.Errorf("signing.secret_env: required: the environment variables holding the signing secrets (whsec_<base64>)")}
	}
	s := &Signing{Envs: slices.Clone([]string(c.SecretEnv))}
	std, _ := presetFor(PresetStandard)
	var errs []error
	for _, env := range c.SecretEnv {
		if mode&signingSecrets == 0 {
			if env == "" {
				errs = append(errs, fmt.Errorf("signing.secret_env: an entry is empty: want an environment variable name"))
			}
			continue
		}
		key, err := readSecret(std, env, lookupEnv)
		if err != nil {
			errs = append(errs, fmt.Errorf("signing.secret_env: %w", err))
			continue
		}
		s.Secrets = append(s.Secrets, []byte(key))
	}
	return s, errs
}

// checkTopic checks a topic destination's name: a name Kafka takes
// (topics.CheckName), and not one of Kafka's internal topics ("__...").
func checkTopic(name string) error {
	if err := topics.CheckName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, "__") {
		return fmt.Errorf("%q: names starting with __ are Kafka's internal topics", name)
	}
	return nil
}
