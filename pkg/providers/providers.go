// Package providers knows the webhook providers hookline accepts: their
// presets (stripe, github, shopify, standard, slack, gocardless, calcom,
// retell and a configurable generic HMAC), how each signs a request, which content types
// it sends, how a delivery becomes records with idempotency keys and event
// types, which of its headers travel on, and the providers file (DESIGN §5)
// that names them.
//
// Ingest calls, per request and in this order: Registry.Get with the name
// from the URL, CheckContentType, Verify over the raw body before anything
// parses it, Events, ForwardHeaders. The processor calls Match for each
// record to find the routes (routes.go) it is delivered to. Every method of a Provider is safe for
// concurrent use: a Provider is never changed after Load.
//
// Secrets are read from the environment variables the file names and held
// as signature.Secret; every way of printing a Provider or its secrets
// shows "[redacted]".
//
// This package loads and validates the providers file and keeps each
// provider's presets and configuration; the mechanisms live below it, each
// imported from here and none importing this package: signature (schemes,
// verifying and signing), keys (idempotency keys, composite parts), rule
// (a header or JSON pointer read from a request), route (which events a
// route takes, route names), schema (payload schemas), ordering (an
// event's entity), glob (event type patterns) and jsonptr (JSON pointers).
// typelabel (the metrics' bounded event_type label) is beside them but
// imported by the services, not here: it takes NamedEventTypes as plain
// globs.
package providers

import (
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/keys"
	"github.com/hookline/hookline/pkg/providers/ordering"
	"github.com/hookline/hookline/pkg/providers/rule"
	"github.com/hookline/hookline/pkg/providers/schema"
	"github.com/hookline/hookline/pkg/providers/signature"
)

// Defaults for the providers file.
const (
	DefaultDedupTTL           = 7 * 24 * time.Hour
	DefaultDestinationTimeout = 10 * time.Second
	// DefaultAutoPauseAfter is how long every call of an HTTP route may
	// fail before the processor pauses the route
	// (destination.auto_pause_after): longer than any outage the circuit
	// breaker rides out on its own, far inside the days a lane keeps its
	// records.
	DefaultAutoPauseAfter = time.Hour
	// DefaultTrialEvery is the pace of the trial calls of an auto-paused
	// route (destination.trial_every): one a minute tells the operator
	// within a minute that the receiver answers again, and costs a
	// receiver still gone one failed call a minute per processor.
	DefaultTrialEvery = time.Minute
	// MaxDestinationTimeout bounds destination.timeout: the longest job a
	// destination may take to answer one call.
	MaxDestinationTimeout = 10 * time.Minute
	// MaxDestinationInflight bounds destination.max_inflight.
	MaxDestinationInflight = 4096
)

// Provider is one configured webhook sender, named by the URL path
// /webhooks/{name}.
type Provider struct {
	Name   string
	Preset string
	// DedupTTL is how long a key is remembered: dedup_ttl, or its "*"
	// entry; default 168h. DedupTTLFor gives an event type's.
	DedupTTL time.Duration
	// Destination is the provider-level destination, which Routes gives as
	// the route "default"; nil for a provider with routes, and for one that
	// delivers nowhere (the outcome record is the only effect).
	Destination *Destination
	RateLimit   *RateLimit // nil: unlimited
	Redrive     *Redrive   // nil: no automatic re-drive (redrive.go)
	// Priority is the provider's class when the processor is overloaded:
	// priority in the file (default normal), or for a provider with routes
	// the highest of its routes' (a record's class before its routes are
	// known).
	Priority Priority
	// PlacementFrom is placement_from: it acknowledges a change of the
	// provider's placement (by key, or by entity with OrderingRule) made
	// after it; zero: none.
	PlacementFrom time.Time
	// Retry is the provider-level retry policy (retry in the file), which
	// the route "default" has; nil: every tier of HOOKLINE_RETRY_TIERS, and
	// always nil for a provider with routes.
	Retry *RetryPolicy

	// routes are the routes in name order: those of the file, or the
	// route "default" made from Destination; nil when there is neither.
	routes []*Route
	// named are the event type patterns the entry names (NamedEventTypes).
	named []glob.Glob

	secrets   []signature.Secret // first is used by Sign; any one verifying is enough
	scheme    *signature.Scheme  // nil: unsigned (generic with signature: {none: true})
	tolerance time.Duration
	accept    []string // media types; nil accepts any
	events    eventsFunc
	// keyHeaders are the request headers the key or the event type may be
	// read from (a generic single key's Idempotency-Key fallback included).
	keyHeaders []string
	keyDocs    []RequestHeader // keyHeaders as RequestHeaders lists them
	forward    []string
	// forwardNames and forwardKeys are forward as the request's header map
	// spells each name (canonical) and as the record names it (http.),
	// made once the provider is built (nameForward).
	forwardNames, forwardKeys []string
	keyRule                   *rule.Rule // generic only
	typeRule                  *rule.Rule // generic, retell
	// keyParts is a composite idempotency_key (generic: two or more json or
	// header entries, or parts; retell's own); nil for a single keyRule.
	keyParts []keys.Part
	// schemas are schema: compiled, in file order (schema.go); empty: bodies
	// are not checked. rejectInvalid is on_invalid: reject.
	schemas       schema.Set
	rejectInvalid bool
	// orderRule is ordering: the rule that names an event's entity; nil:
	// the provider is not ordered (ordering.go).
	orderRule *rule.Rule
	// ttls are dedup_ttl's entries other than "*", in file order, and
	// ttlGlobs their globs (ttl.go); replayWindow is replay_window, nil
	// when not set.
	ttls         []ttlEntry
	ttlGlobs     []glob.Glob
	replayWindow *time.Duration
}

// Priority is a provider's class: under overload the processor gives its
// capacity to higher classes first, by weight (see the processor's docs).
type Priority uint8

// The classes, lowest first. The zero value is PriorityNormal's default
// only through the providers file; code builds Provider values with an
// explicit class.
const (
	PriorityLow Priority = iota
	PriorityNormal
	PriorityHigh
	PriorityCritical
	// NumPriorities is the number of classes.
	NumPriorities = 4
)

var priorityNames = [NumPriorities]string{"low", "normal", "high", "critical"}

// String is the class's name in the providers file.
func (p Priority) String() string {
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}

// ParsePriority reads a class's name.
func ParsePriority(s string) (Priority, error) {
	for i, n := range priorityNames {
		if s == n {
			return Priority(i), nil
		}
	}
	return 0, fmt.Errorf("want one of critical, high, normal, low, got %q", s)
}

// Destination is where the processor delivers a route's events: an HTTP
// URL, or a Kafka topic. Exactly one of URL and Topic is set; the other
// fields are the HTTP destination's and zero for a topic.
type Destination struct {
	URL string
	// Topic is a topic destination's Kafka topic, used as written
	// (HOOKLINE_TOPIC_PREFIX does not apply); "" for an HTTP destination.
	Topic   string
	Timeout time.Duration // one call; default 10s, at most MaxDestinationTimeout
	// MaxInflight bounds the concurrent calls to this destination
	// (destination.max_inflight); 0 means the processor's default
	// (HOOKLINE_MAX_INFLIGHT).
	MaxInflight int
	// Fixed keeps the calls in flight at MaxInflight (destination.adaptive:
	// false); by default the processor adapts them between 1 and
	// MaxInflight to what the destination answers (docs/processor.md,
	// adaptive concurrency).
	Fixed bool
	// AutoPauseAfter is how long every call may fail before the processor
	// pauses the route as `dlq route pause` does
	// (destination.auto_pause_after); 0: never.
	AutoPauseAfter time.Duration
	// TrialEvery is the pace of the trial calls while the route is
	// auto-paused (destination.trial_every): each sends the head record of
	// the route's lane, and a success marks the route answering again; 0:
	// no trial call.
	TrialEvery time.Duration
	// RateLimit bounds the calls the processor makes to this destination
	// (destination.rate_limit in the file); nil: unlimited.
	RateLimit *RateLimit
}

// RateLimit bounds the requests ingest accepts from a provider: a token
// bucket refilled at PerSecond holding at most Burst.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// RetryPolicy is a route's (or the provider-level) retry: {tiers: [...]}:
// the retry tiers its failures go through, in order, a subset of
// HOOKLINE_RETRY_TIERS that Registry.RetrySchedules checks; after the last
// one comes the DLQ. No tiers (tiers: []) means a single attempt: a
// retryable failure goes straight to the DLQ as exhausted.
type RetryPolicy struct {
	Tiers []time.Duration // strictly increasing; empty: one attempt
}

// Header is a provider header copied onto a record as http.<Name>.
type Header struct {
	Name  string // lower-case, e.g. "stripe-signature"
	Value string
}

// Delivery is what one verified request becomes.
type Delivery struct {
	// Events are the records to produce, in request order: one, or one per
	// element of a batch.
	Events []Event
	// Batch says the body was a batch (GoCardless events[]): ingest then
	// answers every key in idempotency_keys, even for a batch of one.
	Batch bool
	// Challenge, when non-nil, is the body to answer with (200) and nothing
	// is produced (Slack url_verification).
	Challenge            []byte
	ChallengeContentType string
}

// Event is one record to produce.
type Event struct {
	Key  string // idempotency key, namespaced by provider
	Type string // provider's event type, "" when unknown
	// Body is the exact bytes of the event: the request body, or for a batch
	// the bytes of that element, sliced from the request body (not a copy).
	Body []byte
	// Entity is the event's entity for an ordered provider (ordering:),
	// "" when the provider is not ordered or the event has none (it is
	// then its own entity).
	Entity string
}

// CheckContentType reports whether the provider sends this Content-Type
// (parameters such as charset are ignored; for JSON, any application/*+json
// also passes). It returns a *ContentTypeError otherwise (415). Cost: one
// media-type parse, none when the header is one of the accepted types as
// they are written (lower case, no parameter: what the parse would give).
func (p *Provider) CheckContentType(contentType string) error {
	if p.accept == nil || slices.Contains(p.accept, contentType) {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		for _, want := range p.accept {
			if mt == want || (want == mediaJSON && strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
				return nil
			}
		}
	}
	return &ContentTypeError{Got: contentType, Want: slices.Clone(p.accept)}
}

// Verify checks the request's signature over the raw body with each of the
// provider's secrets (any one verifying is enough), in constant time, and for
// timestamped presets checks the timestamp is within the tolerance of now in
// either direction. It returns a *signature.Error (401) with Reason missing,
// malformed, mismatch or stale. An explicitly unsigned generic provider
// always verifies. Cost: one HMAC over the body per secret tried.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) error {
	if p.scheme == nil {
		return nil
	}
	return p.scheme.Verify(p.secrets, h, body, now, p.tolerance)
}

// CheckSignatureHeaders checks what Verify checks without the body: the
// signature headers are present and well formed, and a timestamped
// preset's timestamp is within the tolerance. Ingest calls it before it
// reads the body, so a request without a valid signature header costs no
// body read and no HMAC, then VerifyBody with its result, which checks the
// body without parsing the headers again. Same errors as Verify.
func (p *Provider) CheckSignatureHeaders(h http.Header, now time.Time) (signature.Parsed, error) {
	if p.scheme == nil {
		return signature.Parsed{}, nil
	}
	return p.scheme.Precheck(h, now, p.tolerance)
}

// VerifyBody is Verify for a request whose headers passed
// CheckSignatureHeaders, which returned sig: the body's HMAC against every
// secret and every signature in sig. Same errors as Verify. Cost: one HMAC
// over the body per secret; nothing for an unsigned provider.
func (p *Provider) VerifyBody(sig signature.Parsed, body []byte) error {
	if p.scheme == nil {
		return nil
	}
	return p.scheme.VerifyParsed(p.secrets, sig, body)
}

// Events derives the records of a verified request: idempotency keys, event
// types, and the split of a batch. A Slack url_verification gives a Delivery
// with Challenge set and no events. It returns a *MalformedError (400) when
// the body or headers give no valid key or event type; every key returned
// is non-empty, at most keys.MaxLen bytes and free of control characters, and
// every event type passes headers.CheckEventType (at most 256 bytes,
// printable). Cost: at most one
// parse of the body (one per element for a batch); github and shopify read
// only headers.
func (p *Provider) Events(h http.Header, body []byte) (Delivery, error) {
	d, err := p.events(p, h, body)
	if err != nil {
		return Delivery{}, err
	}
	for i := range d.Events {
		ev := &d.Events[i]
		ev.Entity = ordering.Entity(p.orderRule, h, ev.Body)
		if err := keys.Check(ev.Key); err != nil {
			return Delivery{}, malformed("%v", err)
		}
		if err := headers.CheckEventType(ev.Type); err != nil {
			if d.Batch {
				return Delivery{}, malformed("events[%d]: %v", i, err)
			}
			return Delivery{}, malformed("%v", err)
		}
	}
	return d, nil
}

// RecognisesReplays reports whether a captured delivery of this provider
// can be sent again and be taken for a new one: the provider signs, and
// its signature either carries no timestamp (github, shopify, gocardless,
// calcom, generic: a captured body and signature verify for ever) or
// leaves a header the idempotency key or event type is read from unsigned
// (then a replay within the tolerance could choose a new key). Ingest
// remembers the SignedDigest of such a provider's accepted deliveries and
// answers the same one again as a duplicate. An unsigned provider needs
// no capture to forge a delivery: there is nothing to recognise. Cost:
// a look at a few header names.
func (p *Provider) RecognisesReplays() bool {
	return p.scheme != nil && (!p.scheme.Timestamped() || len(p.unsignedKeyHeaders()) > 0)
}

// unsignedKeyHeaders returns the headers the key or event type may come
// from that the signature does not cover.
func (p *Provider) unsignedKeyHeaders() []string {
	var out []string
	for _, h := range p.keyHeaders {
		if p.scheme == nil || !p.scheme.Covers(h) {
			out = append(out, h)
		}
	}
	return out
}

// SignedDigest identifies a verified delivery by what its signature
// authenticates: the SHA-256 of the provider's name and exactly the bytes
// the HMAC covers (the body; for stripe, slack and standard also the
// timestamp, and the id for standard). Headers the signature does not
// cover, such as X-GitHub-Delivery, are not part of it, so a replay of a
// captured body and signature has its original's digest whatever delivery
// id it claims; nor is the signature's spelling (hex case, extra v1
// entries), which an attacker can vary without the secret. Call it after
// Verify; it fails only when the signature headers do not parse. For an
// unsigned provider it is the digest of the name and the body. Cost: one
// SHA-256 over the body.
func (p *Provider) SignedDigest(h http.Header, body []byte) ([sha256.Size]byte, error) {
	if p.scheme == nil {
		return signature.DigestOf(p.Name, body), nil
	}
	return p.scheme.Digest(p.Name, h, body)
}

// ForwardHeaders returns the provider's allowlisted headers present in h
// (the first value of each), lower-case names, in the allowlist's fixed
// order. Authorization and Cookie are never among them. Cost: one map lookup
// per allowlisted name.
func (p *Provider) ForwardHeaders(h http.Header) []Header {
	var out []Header
	for _, name := range p.forward {
		if v := h.Get(name); v != "" {
			out = append(out, Header{Name: name, Value: v})
		}
	}
	return out
}

// AppendForwarded appends to dst what ForwardHeaders returns, named for
// the record (headers.HTTPName): ingest's request path. Cost: one map
// lookup per allowlisted name, by the names as the request's header map
// spells them, made once (Get canonicalised each lower-case name, an
// allocation a name a request); nothing allocated when dst has room.
func (p *Provider) AppendForwarded(dst []headers.Forwarded, h http.Header) []headers.Forwarded {
	if len(p.forwardNames) != len(p.forward) { // a Provider not built by the registry
		for _, f := range p.ForwardHeaders(h) {
			dst = append(dst, headers.Forwarded{Key: headers.HTTPName(f.Name), Value: f.Value})
		}
		return dst
	}
	for i, canon := range p.forwardNames {
		if vs := h[canon]; len(vs) > 0 && vs[0] != "" {
			dst = append(dst, headers.Forwarded{Key: p.forwardKeys[i], Value: vs[0]})
		}
	}
	return dst
}

// nameForward makes forwardNames and forwardKeys from forward, once the
// provider is built.
func (p *Provider) nameForward() {
	p.forwardNames, p.forwardKeys = make([]string, len(p.forward)), make([]string, len(p.forward))
	for i, name := range p.forward {
		p.forwardNames[i], p.forwardKeys[i] = http.CanonicalHeaderKey(name), headers.HTTPName(name)
	}
}

// Sign sets on h the signature headers this provider would receive for body
// at now, signed with its first secret (for tests, load tools and docs). An
// unsigned provider sets nothing. Cost: one HMAC over the body.
func (p *Provider) Sign(body []byte, now time.Time, h http.Header) error {
	if p.scheme == nil {
		return nil
	}
	if len(p.secrets) == 0 {
		return fmt.Errorf("sign: provider %q has no secret", p.Name)
	}
	p.scheme.Sign(p.secrets[0], body, now, h)
	return nil
}

// SecretCount returns how many signing secrets are set (0 for an unsigned
// provider, and for every provider of LoadWithoutSecrets). Cost: none.
func (p *Provider) SecretCount() int { return len(p.secrets) }

// String describes the provider without its secrets. String, GoString,
// Format and LogValue have value receivers so that a Provider value prints as
// safely as a pointer.
func (p Provider) String() string {
	return fmt.Sprintf("provider %q (preset %s, %d secrets)", p.Name, p.Preset, len(p.secrets))
}

// GoString is String: %#v must not print the secrets either.
func (p Provider) GoString() string { return p.String() }

// Format prints String for every verb, so that no fmt verb reaches the
// unexported secret fields (fmt cannot call their redacting methods).
func (p Provider) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// LogValue gives slog the provider's name and preset only.
func (p Provider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", p.Name), slog.String("preset", p.Preset))
}
