package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/keys"
	"github.com/hookline/hookline/pkg/providers/route"
	"github.com/hookline/hookline/pkg/providers/rule"
	"github.com/hookline/hookline/pkg/providers/signature"
	"github.com/hookline/hookline/pkg/retry"
)

// Registry is the set of configured providers, read-only after Load.
type Registry struct {
	byName map[string]*Provider
	names  []string
	maxTTL time.Duration
	topics []string // of topic destinations, sorted, each once
}

// Get returns the provider named name (the {provider} of the URL). Cost: one
// map lookup.
func (r *Registry) Get(name string) (*Provider, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Names returns the provider names, sorted. Cost: a copy of the list.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// MaxDedupTTL returns the longest dedup_ttl of any provider (each defaults to
// 7 days): the dedup changelog must retain at least this long. Cost: none,
// it is computed by Load.
func (r *Registry) MaxDedupTTL() time.Duration { return r.maxTTL }

// Load reads the providers file (DESIGN §5) at path and resolves each
// provider's verification secrets (secret_env) with lookupEnv
// (os.LookupEnv in production; nil means os.LookupEnv): ingest's view. The
// routes' signing secrets are not read (ingest signs nothing): each
// Route.Signing has its variable names and no Secrets. Errors name the
// file, the provider, the route and the field; they never contain a
// secret. Cost: one read and parse of the file.
func Load(path string, lookupEnv func(string) (string, bool)) (*Registry, error) {
	return load(path, lookupEnv, verifySecrets)
}

// LoadForProcessor reads the providers file like Load, but with the
// routes' signing secrets (signing.secret_env) and without the
// verification secrets: the processor signs calls and verifies no
// request, so it needs no provider's secret_env in its environment (Verify
// on its providers always fails). A signing variable that is unset, empty
// or not a Standard Webhooks secret is an error naming the provider, the
// route and the variable. nil lookupEnv means os.LookupEnv.
func LoadForProcessor(path string, lookupEnv func(string) (string, bool)) (*Registry, error) {
	return load(path, lookupEnv, signingSecrets)
}

// LoadWithoutSecrets reads the providers file like Load but leaves every
// secret unread: for services that neither verify nor sign (dlq reads
// dedup TTLs, routes and destinations), so they need no secret in their
// environment. Verify on its providers always fails.
func LoadWithoutSecrets(path string) (*Registry, error) {
	return load(path, nil, 0)
}

// secretsMode says which secrets a load reads.
type secretsMode uint8

const (
	verifySecrets  secretsMode = 1 << iota // the providers' secret_env (ingest)
	signingSecrets                         // the routes' signing.secret_env (processor)
)

func load(path string, lookupEnv func(string) (string, bool), mode secretsMode) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("providers file: %w", err)
	}
	r, err := parse(data, filepath.Dir(path), lookupEnv, mode)
	if err != nil {
		return nil, fmt.Errorf("providers file %s: %w", path, err)
	}
	return r, nil
}

// Parse is Load over the file's contents: it checks every provider block
// (KnownFields, so a misspelt field is an error) and reports every problem
// found, one line each naming its provider, providers in name order. Cost:
// one YAML parse, plus a second one of the node tree to place an error.
// Schema files (schema:) are read relative to the current directory.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*Registry, error) {
	return parse(data, ".", lookupEnv, verifySecrets)
}

// parse reads the file's contents; dir is the file's directory, which
// schema: paths are relative to.
func parse(data []byte, dir string, lookupEnv func(string) (string, bool), mode secretsMode) (*Registry, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var file fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the file is empty: want a providers: mapping")
		}
		return nil, annotateYAMLError(err, data)
	}
	if len(file.Providers) == 0 {
		return nil, fmt.Errorf("providers: no providers defined")
	}
	r := &Registry{byName: make(map[string]*Provider, len(file.Providers))}
	for name := range file.Providers {
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	var errs []error
	for _, name := range r.names {
		p, perrs := file.Providers[name].build(name, dir, lookupEnv, mode)
		for _, err := range perrs {
			errs = append(errs, fmt.Errorf("provider %q: %w", name, err))
		}
		if len(perrs) > 0 {
			continue
		}
		p.nameForward()
		r.byName[name] = p
		r.maxTTL = max(r.maxTTL, p.MaxDedupTTL())
		for _, rt := range p.routes {
			if t := rt.Destination.Topic; t != "" && !slices.Contains(r.topics, t) {
				r.topics = append(r.topics, t)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.Sort(r.topics)
	return r, nil
}

// fileConfig is the providers file.
type fileConfig struct {
	Providers map[string]*providerConfig `yaml:"providers"`
}

// providerConfig is one provider's block; durations are strings so that a bad
// one is reported with the provider and field it belongs to.
type providerConfig struct {
	Preset         string             `yaml:"preset"`
	SecretEnv      stringList         `yaml:"secret_env"`
	DedupTTL       *dedupTTLConfig    `yaml:"dedup_ttl"`
	ReplayWindow   string             `yaml:"replay_window"`
	Destination    *destinationConfig `yaml:"destination"`
	Signature      *signature.Config  `yaml:"signature"`
	IdempotencyKey *ruleConfig        `yaml:"idempotency_key"`
	EventType      *ruleConfig        `yaml:"event_type"`
	RateLimit      *rateLimitConfig   `yaml:"rate_limit"`
	Tolerance      string             `yaml:"tolerance"`
	Redrive        *redriveConfig     `yaml:"redrive"`
	Priority       string             `yaml:"priority"`
	Retry          *retryConfig       `yaml:"retry"`
	// Routes, by name, replace destination, priority and retry (routes.go).
	Routes map[string]*routeConfig `yaml:"routes"`
	// Schema, OnInvalid and SchemaFormats check bodies against JSON
	// Schemas (schema.go).
	Schema        *schemaConfig `yaml:"schema"`
	OnInvalid     string        `yaml:"on_invalid"`
	SchemaFormats string        `yaml:"schema_formats"`
	// Ordering names each event's entity (ordering.go).
	Ordering *ruleConfig `yaml:"ordering"`
	// PlacementFrom acknowledges a change of placement (ordering added,
	// removed or given another rule) made after it (ordering.go).
	PlacementFrom string `yaml:"placement_from"`
}

// retryConfig is a route's or a provider's retry: {tiers: [5m, 1h]};
// tiers: [] is a single attempt. Tiers is a pointer so that tiers: [] is
// told apart from tiers left out.
type retryConfig struct {
	Tiers *[]string `yaml:"tiers"`
}

// destinationConfig is {url, timeout, max_inflight, adaptive, rate_limit}
// or {topic}.
type destinationConfig struct {
	Topic       string           `yaml:"topic"`
	URL         string           `yaml:"url"`
	Timeout     string           `yaml:"timeout"`
	MaxInflight int              `yaml:"max_inflight"`
	Adaptive    *bool            `yaml:"adaptive"`
	RateLimit   *rateLimitConfig `yaml:"rate_limit"`
	// AutoPauseAfter is a duration, "0" for never; nil: the default.
	AutoPauseAfter *string `yaml:"auto_pause_after"`
	// TrialEvery is a duration, "0" for no trial call; nil: the default.
	TrialEvery *string `yaml:"trial_every"`
}

// ruleConfig is idempotency_key or event_type: {header: <name>} or
// {json: <pointer>}; for idempotency_key, each may also be a list, and both
// may be given, for a composite key (JSON pointers first, then headers),
// or instead {parts: [...]}, a composite key whose parts have alternatives,
// fallbacks and event types (keys.go).
type ruleConfig struct {
	Header stringList    `yaml:"header"`
	JSON   stringList    `yaml:"json"`
	Parts  []*partConfig `yaml:"parts"`
}

type rateLimitConfig struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
}

// stringList accepts a sequence or, for a single entry, a scalar.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = stringList{n.Value}
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// validName reports whether name can be a provider name: it goes in the URL
// path, so ^[a-z0-9][a-z0-9_-]{0,62}$.
func validName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// build checks one block and turns it into a Provider, or returns every
// problem found; schema files are read relative to dir. Errors name the
// field and never contain a secret value.
func (c *providerConfig) build(name, dir string, lookupEnv func(string) (string, bool), mode secretsMode) (*Provider, []error) {
	one := func(format string, args ...any) []error { return []error{fmt.Errorf(format, args...)} }
	if !validName(name) {
		return nil, one("name must match ^[a-z0-9][a-z0-9_-]{0,62}$ (it is a URL path segment)")
	}
	if c == nil {
		return nil, one("empty block: preset and secret_env are required")
	}
	if c.Preset == "" {
		return nil, one("preset: required (one of %s)", strings.Join(Presets(), ", "))
	}
	pre, ok := presetFor(c.Preset)
	if !ok {
		return nil, one("preset: unknown preset %q (want one of %s)", c.Preset, strings.Join(Presets(), ", "))
	}
	p := &Provider{
		Name:       name,
		Preset:     c.Preset,
		DedupTTL:   DefaultDedupTTL,
		Priority:   PriorityNormal,
		scheme:     pre.scheme,
		tolerance:  signature.DefaultTolerance,
		accept:     pre.accept,
		events:     pre.events,
		keyHeaders: pre.keyHeaders,
		keyDocs:    pre.keyDocs,
		forward:    pre.forward,
		keyParts:   pre.keyParts,
		typeRule:   pre.typeRule,
	}
	var errs []error
	fail := func(err error) { errs = append(errs, err) }

	if c.Preset == PresetGeneric {
		errs = append(errs, c.buildGeneric(p)...)
	} else {
		for _, f := range [...]struct {
			name string
			set  bool
		}{{"signature", c.Signature != nil}, {"idempotency_key", c.IdempotencyKey != nil}, {"event_type", c.EventType != nil}} {
			if f.set {
				fail(fmt.Errorf("%s: only a generic provider takes %s (preset %s has its own)", f.name, f.name, c.Preset))
			}
		}
	}

	switch {
	case c.Signature != nil && c.Signature.None && len(c.SecretEnv) > 0:
		fail(fmt.Errorf("secret_env: set, but signature is none: an unsigned provider takes no secret"))
	case p.scheme != nil && len(c.SecretEnv) == 0:
		fail(fmt.Errorf("secret_env: required: the environment variables holding the signing secrets"))
	}
	for _, env := range c.SecretEnv {
		if mode&verifySecrets == 0 {
			break
		}
		s, err := readSecret(pre, env, lookupEnv)
		if err != nil {
			fail(fmt.Errorf("secret_env: %w", err))
			continue
		}
		p.secrets = append(p.secrets, s)
	}

	if r, err := c.Ordering.build("ordering"); err != nil {
		fail(err)
	} else {
		p.orderRule = r
	}
	if c.PlacementFrom != "" {
		at, err := time.Parse(time.RFC3339, c.PlacementFrom)
		if err != nil {
			fail(fmt.Errorf("placement_from: %q is not a time: write it like 2026-11-28T17:30:00Z (RFC 3339)", c.PlacementFrom))
		}
		p.PlacementFrom = at.UTC()
	}
	if c.Tolerance != "" {
		if !pre.timestamped() {
			fail(fmt.Errorf("tolerance: preset %s signs no timestamp (only stripe, standard, slack and retell do)", c.Preset))
		}
		d, err := parseDuration(c.Tolerance)
		if err != nil {
			fail(fmt.Errorf("tolerance: %w", err))
		}
		p.tolerance = d
	}
	if c.Priority != "" {
		pr, err := ParsePriority(c.Priority)
		if err != nil {
			fail(fmt.Errorf("priority: %w", err))
		}
		p.Priority = pr
	}
	if c.Destination != nil {
		d, derrs := c.Destination.build()
		errs = append(errs, derrs...)
		p.Destination = d
	}
	if c.RateLimit != nil {
		rl, err := c.RateLimit.build()
		if err != nil {
			fail(err)
		}
		p.RateLimit = rl
	}
	if c.Retry != nil {
		rp, err := c.Retry.build()
		if err != nil {
			fail(err)
		}
		p.Retry = rp
	}
	if c.Redrive != nil {
		rd, rerrs := c.Redrive.build()
		errs = append(errs, rerrs...)
		p.Redrive = rd
	}
	if c.Routes != nil {
		errs = append(errs, c.buildRoutes(p, dir, lookupEnv, mode)...)
	}
	errs = append(errs, c.buildSchemas(p, dir)...)
	errs = append(errs, c.buildTTLs(p)...)
	if len(errs) > 0 {
		return nil, errs
	}
	if c.Routes == nil {
		p.defaultRoute()
	}
	p.indexEventTypes()
	return p, nil
}

// build checks the tiers' syntax and order; whether they are tiers of
// HOOKLINE_RETRY_TIERS is for RetrySchedules, which knows the schedule.
// tiers: [] gives a policy without tiers: a single attempt.
func (c *retryConfig) build() (*RetryPolicy, error) {
	if c.Tiers == nil {
		return nil, fmt.Errorf("retry.tiers: required: the retry tiers to use, in order, such as [5m, 1h], or [] for a single attempt (leave retry out for every tier)")
	}
	rp := &RetryPolicy{}
	for i, t := range *c.Tiers {
		d, err := parseDuration(t)
		if err != nil {
			return nil, fmt.Errorf("retry.tiers: %w", err)
		}
		if i > 0 && d <= rp.Tiers[i-1] {
			return nil, fmt.Errorf("retry.tiers: %s is not longer than %s: list tiers in increasing order", t, (*c.Tiers)[i-1])
		}
		rp.Tiers = append(rp.Tiers, d)
	}
	return rp, nil
}

// RetrySchedules returns, for each route with a retry policy (the route
// "default" has the provider-level one), the retry schedule all restricted
// to the policy's tiers (retry.Schedule.Only; no tiers: a schedule that
// sends every retryable failure to the DLQ as exhausted), keyed by
// route.Key(provider, route); routes without one are not in the map and use
// all. The error names every provider and route whose tiers are not a
// subset of all in order, and the allowed values; a provider-level retry
// is checked even when the provider has no destination. Cost: one Only
// per policy.
func (r *Registry) RetrySchedules(all retry.Schedule) (map[string]retry.Schedule, error) {
	out := map[string]retry.Schedule{}
	var errs []error
	for _, name := range r.names {
		p := r.byName[name]
		if p.Retry != nil && p.routes == nil {
			if _, err := all.Only(p.Retry.Tiers); err != nil {
				errs = append(errs, fmt.Errorf("provider %q: retry.tiers: %w", name, err))
			}
		}
		for _, rt := range p.routes {
			if rt.Retry == nil {
				continue
			}
			s, err := all.Only(rt.Retry.Tiers)
			switch {
			case err != nil && rt.Retry == p.Retry:
				errs = append(errs, fmt.Errorf("provider %q: retry.tiers: %w", name, err))
			case err != nil:
				errs = append(errs, fmt.Errorf("provider %q: route %q: retry.tiers: %w", name, rt.Name, err))
			default:
				out[route.Key(name, rt.Name)] = s
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("providers file: %w", errors.Join(errs...))
	}
	return out, nil
}

// buildGeneric sets the generic provider's scheme, rules, accepted content
// types and forwarded headers from its config.
func (c *providerConfig) buildGeneric(p *Provider) []error {
	var errs []error
	if c.Signature == nil {
		errs = append(errs, fmt.Errorf("signature: required for a generic provider: {header, algorithm, encoding, prefix}, or {none: true} to accept unsigned deliveries"))
	} else {
		s, err := c.Signature.Scheme()
		if err != nil {
			errs = append(errs, err)
		}
		p.scheme = s
		if s != nil {
			p.forward = appendForward(p.forward, c.Signature.Header)
		}
	}
	var err error
	if p.typeRule, err = c.EventType.build("event_type"); err != nil {
		errs = append(errs, err)
	}
	if p.keyRule, p.keyParts, err = c.IdempotencyKey.buildKey(p.typeRule); err != nil {
		errs = append(errs, err)
	}
	srcs := []*rule.Rule{p.keyRule, p.typeRule}
	for _, k := range p.keyParts {
		srcs = append(srcs, k.Alts...)
	}
	for _, r := range srcs {
		switch {
		case r == nil:
		case r.HeaderName() != "":
			p.forward = appendForward(p.forward, r.HeaderName())
			p.keyHeaders = append(p.keyHeaders, r.HeaderName())
			p.keyDocs = append(p.keyDocs, ruleDoc(r, p))
		default:
			p.accept = []string{mediaJSON} // a JSON rule needs a JSON body
		}
	}
	p.forward = appendForward(p.forward, headerIdempotencyKey)
	if p.keyParts == nil { // a single key falls back to Idempotency-Key
		p.keyHeaders = append(p.keyHeaders, headerIdempotencyKey)
		p.keyDocs = append(p.keyDocs, RequestHeader{Name: headerIdempotencyKey,
			Description: "The idempotency key's suffix when the providers file's idempotency_key gives none; without either, the SHA-256 of the body."})
	}
	return errs
}

// appendForward adds a header to a forward list, lower-case, once, and never
// a credential header.
func appendForward(list []string, name string) []string {
	name = strings.ToLower(name)
	switch name {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return list
	}
	if slices.Contains(list, name) {
		return list
	}
	return append(list, name)
}

// build reads event_type: one header or one JSON pointer.
func (c *ruleConfig) build(field string) (*rule.Rule, error) {
	switch {
	case c == nil:
		return nil, nil
	case c.Parts != nil:
		return nil, fmt.Errorf("%s.parts: only idempotency_key has parts", field)
	case len(c.Header)+len(c.JSON) > 1:
		return nil, fmt.Errorf("%s: give one header or one json pointer (only idempotency_key takes several)", field)
	}
	rules, err := c.rules(field)
	if err != nil {
		return nil, err
	}
	return rules[0], nil
}

// buildKey reads idempotency_key: one json or header entry gives single
// (which falls back to Idempotency-Key and the body hash when absent), two
// or more give parts (a composite key, every part required), and parts:
// gives the parts it lists, checked by keys.CheckParts against typeRule (the
// provider's event_type, nil without one).
func (c *ruleConfig) buildKey(typeRule *rule.Rule) (single *rule.Rule, parts []keys.Part, err error) {
	if c == nil {
		return nil, nil, nil
	}
	if c.Parts != nil {
		if len(c.Header)+len(c.JSON) > 0 {
			return nil, nil, fmt.Errorf("idempotency_key: parts and json or header both set: give parts, or json and header (a composite key of required parts)")
		}
		parts, err := buildParts(c.Parts, typeRule)
		return nil, parts, err
	}
	rules, err := c.rules("idempotency_key")
	switch {
	case err != nil:
		return nil, nil, err
	case len(rules) == 1:
		return rules[0], nil, nil
	case len(rules) > maxKeyParts:
		return nil, nil, fmt.Errorf("idempotency_key: %d parts, at most %d", len(rules), maxKeyParts)
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.String()] {
			return nil, nil, fmt.Errorf("idempotency_key: %s is listed twice", r)
		}
		seen[r.String()] = true
		parts = append(parts, keys.Part{Alts: []*rule.Rule{r}})
	}
	return nil, parts, nil
}

// maxKeyParts bounds a composite idempotency_key.
const maxKeyParts = 8

// rules checks every pointer and header of c, pointers first.
func (c *ruleConfig) rules(field string) ([]*rule.Rule, error) {
	if len(c.Header)+len(c.JSON) == 0 {
		return nil, fmt.Errorf("%s: give header: <name> or json: <JSON pointer>", field)
	}
	var out []*rule.Rule
	for _, j := range c.JSON {
		r, err := rule.JSON(j)
		if err != nil {
			return nil, fmt.Errorf("%s.json: %w", field, err)
		}
		out = append(out, r)
	}
	for _, h := range c.Header {
		if !signature.ValidHeaderName(h) {
			return nil, fmt.Errorf("%s.header: %q is not a valid HTTP header name", field, h)
		}
		out = append(out, rule.Header(h))
	}
	return out, nil
}

// build checks a destination: {topic} alone, or {url} with its options.
func (c *destinationConfig) build() (*Destination, []error) {
	if c.Topic != "" {
		return c.buildTopic()
	}
	d := &Destination{URL: c.URL, Timeout: DefaultDestinationTimeout, AutoPauseAfter: DefaultAutoPauseAfter, TrialEvery: DefaultTrialEvery}
	var errs []error
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("destination.url: required (or destination.topic for a Kafka topic)"))
	} else if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("destination.url: %q is not an absolute http or https URL", c.URL))
	}
	if c.Timeout != "" {
		t, err := parseDuration(c.Timeout)
		if err != nil {
			errs = append(errs, fmt.Errorf("destination.timeout: %w", err))
		} else if t > MaxDestinationTimeout {
			errs = append(errs, fmt.Errorf("destination.timeout: %s is over the %s a call may take", c.Timeout, MaxDestinationTimeout))
		}
		d.Timeout = t
	}
	if c.MaxInflight < 0 || c.MaxInflight > MaxDestinationInflight {
		errs = append(errs, fmt.Errorf("destination.max_inflight: want 1 to %d (or leave it out for HOOKLINE_MAX_INFLIGHT), got %d", MaxDestinationInflight, c.MaxInflight))
	}
	d.MaxInflight = c.MaxInflight
	d.Fixed = c.Adaptive != nil && !*c.Adaptive
	if c.AutoPauseAfter != nil {
		if *c.AutoPauseAfter == "0" {
			d.AutoPauseAfter = 0
		} else if a, err := parseDuration(*c.AutoPauseAfter); err != nil {
			errs = append(errs, fmt.Errorf("destination.auto_pause_after: %w (or 0 for never)", err))
		} else {
			d.AutoPauseAfter = a
		}
	}
	if c.TrialEvery != nil {
		if *c.TrialEvery == "0" {
			d.TrialEvery = 0
		} else if a, err := parseDuration(*c.TrialEvery); err != nil {
			errs = append(errs, fmt.Errorf("destination.trial_every: %w (or 0 for no trial call)", err))
		} else {
			d.TrialEvery = a
		}
	}
	if c.RateLimit != nil {
		rl, err := c.RateLimit.build()
		if err != nil {
			errs = append(errs, fmt.Errorf("destination.%w", err))
		}
		d.RateLimit = rl
	}
	return d, errs
}

// buildTopic checks a topic destination: the topic's name, and none of the
// HTTP destination's fields.
func (c *destinationConfig) buildTopic() (*Destination, []error) {
	var errs []error
	if err := checkTopic(c.Topic); err != nil {
		errs = append(errs, fmt.Errorf("destination.topic: %w", err))
	}
	for _, f := range [...]struct {
		name string
		set  bool
	}{{"url", c.URL != ""}, {"timeout", c.Timeout != ""}, {"max_inflight", c.MaxInflight != 0}, {"adaptive", c.Adaptive != nil}, {"rate_limit", c.RateLimit != nil}, {"auto_pause_after", c.AutoPauseAfter != nil}, {"trial_every", c.TrialEvery != nil}} {
		if f.set {
			errs = append(errs, fmt.Errorf("destination.%s: a topic destination takes no %s (it makes no HTTP call)", f.name, f.name))
		}
	}
	return &Destination{Topic: c.Topic}, errs
}

func (c *rateLimitConfig) build() (*RateLimit, error) {
	if c.PerSecond <= 0 || math.IsInf(c.PerSecond, 0) || math.IsNaN(c.PerSecond) {
		return nil, fmt.Errorf("rate_limit.per_second: must be a positive number, got %v", c.PerSecond)
	}
	burst := c.Burst
	switch {
	case burst < 0:
		return nil, fmt.Errorf("rate_limit.burst: must be positive, got %d", burst)
	case burst == 0:
		burst = max(1, int(math.Ceil(c.PerSecond)))
	}
	return &RateLimit{PerSecond: c.PerSecond, Burst: burst}, nil
}

// parseDuration reads a positive Go duration ("720h", "5m").
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write it like 720h, 5m or 10s)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

// readSecret reads and decodes one secret. Errors name the variable, never
// its value.
func readSecret(pre preset, env string, lookupEnv func(string) (string, bool)) (signature.Secret, error) {
	if env == "" {
		return nil, fmt.Errorf("an entry is empty: want an environment variable name")
	}
	v, ok := lookupEnv(env)
	switch {
	case !ok:
		return nil, fmt.Errorf("environment variable %s is not set", env)
	case v == "":
		return nil, fmt.Errorf("environment variable %s is empty", env)
	}
	s, err := pre.decodeSecret([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", env, err)
	}
	return s, nil
}

var (
	yamlLine       = regexp.MustCompile(`^line (\d+): `)
	yamlFieldError = regexp.MustCompile(`field (\S+) not found in type \S+`)
	yamlDuplicate  = regexp.MustCompile(`^line \d+: mapping key "(?:[^"\\]|\\.)*" already defined at line (\d+)$`)
)

// annotateYAMLError rewrites yaml.v3's type errors ("line 7: field secert_env
// not found in type providers.providerConfig") to name the provider, and
// the route, whose block holds the line, and the unknown field plainly. A
// route name given twice (a duplicate mapping key, which yaml.v3 reports)
// is said as such.
func annotateYAMLError(err error, data []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	spans := providerSpans(data)
	msgs := make([]string, 0, len(te.Errors))
	for _, msg := range te.Errors {
		msg = yamlFieldError.ReplaceAllString(msg, "unknown field $1")
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			if s, ok := spanOf(spans, line); ok {
				prefix := fmt.Sprintf("provider %q: ", s.name)
				if rt, ok := spanOf(s.routes, line); ok {
					prefix += fmt.Sprintf("route %q: ", rt.name)
					if d := yamlDuplicate.FindStringSubmatch(msg); d != nil && line == rt.first {
						msg = fmt.Sprintf("line %d: the route is defined twice (first at line %s): route names are unique within a provider", line, d[1])
					}
				}
				msg = prefix + msg
			}
		}
		msgs = append(msgs, msg)
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// span is the line range of a provider's block, or of a route's within it.
type span struct {
	name        string
	first, last int
	routes      []span
}

// spanOf returns the span holding line; the last one when blocks overlap
// (a key given twice).
func spanOf(spans []span, line int) (span, bool) {
	for i := len(spans) - 1; i >= 0; i-- {
		if s := spans[i]; s.first <= line && line <= s.last {
			return s, true
		}
	}
	return span{}, false
}

// providerSpans returns the line range of each provider's block, and of
// each of its routes.
func providerSpans(data []byte) []span {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	spans, nodes := mappingSpans(root.Content[0], "providers")
	for i := range spans {
		spans[i].routes, _ = mappingSpans(nodes[i], "routes")
	}
	return spans
}

// mappingSpans returns, for the mapping under key in the mapping n, the
// span and the value node of each entry.
func mappingSpans(n *yaml.Node, key string) ([]span, []*yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	var (
		spans []span
		nodes []*yaml.Node
	)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != key {
			continue
		}
		m := n.Content[i+1]
		for j := 0; j+1 < len(m.Content); j += 2 {
			k, v := m.Content[j], m.Content[j+1]
			spans = append(spans, span{name: k.Value, first: k.Line, last: lastLine(v)})
			nodes = append(nodes, v)
		}
	}
	return spans, nodes
}

func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}
