package deliver

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/retry"
)

// Defaults of HTTPOptions.
const (
	DefaultTimeout         = 10 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
)

// Limits on what is read of a destination's answer.
const (
	// maxDrain is how much of any response body is read before it is
	// closed: enough for an error message and for a short body to let the
	// connection be reused; a longer body costs a new connection.
	maxDrain = 4 << 10
	// MaxErrorBody bounds the part of a response body quoted in an error.
	MaxErrorBody = 512
)

// DefaultMaxRetryAfter is the longest wait a destination's Retry-After is
// honoured for when HTTPOptions.MaxRetryAfter is not set
// (HOOKLINE_RETRY_AFTER_MAX): a receiver asking for a day is not told no,
// but its record is tried again within the hour, and the retry tier it
// waits in (the first at least that long) is one of the default tiers.
const DefaultMaxRetryAfter = time.Hour

// Headers the HTTP handler sets on every call. Names are canonical.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderAttempt        = "X-Hookline-Attempt"
	HeaderProvider       = "X-Hookline-Provider"
	HeaderEventType      = "X-Hookline-Event-Type"
	HeaderRoute          = "X-Hookline-Route"
	UserAgent            = "hookline/1"
)

// Headers of the Standard Webhooks signature, set on every call of a
// destination with HTTPOptions.SigningSecrets (and then never forwarded from
// the provider). Names are canonical.
const (
	HeaderWebhookID        = "Webhook-Id"        // the idempotency key
	HeaderWebhookTimestamp = "Webhook-Timestamp" // the call's time, Unix seconds
	HeaderWebhookSignature = "Webhook-Signature" // "v1,<base64>", one per secret, space-separated
)

// ErrCircuitOpen is returned, without calling the destination, while the
// circuit breaker is open (or half-open with its probe in flight). It is
// retryable, inside a *retry.RetryAfterError carrying the cool-down left when
// there is some. Match it with errors.Is.
var ErrCircuitOpen = errors.New("circuit open")

// errTimeout is the cause of a call's own deadline, to tell it apart from
// the caller's.
var errTimeout = errors.New("destination timeout")

// notForwarded reports whether a provider header (lower-case name) is never
// sent on: credentials, what the transport sets itself, and hop-by-hop
// headers (RFC 9110 §7.6.1). Headers named in a forwarded Connection header
// are dropped too (see header).
func notForwarded(name string) bool {
	switch name {
	case "authorization", "proxy-authorization", "cookie",
		"host", "content-length", "expect",
		"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
		"te", "trailer", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// HTTPOptions configures an HTTP destination. The zero value of every field
// but URL is a usable default.
type HTTPOptions struct {
	// URL is the absolute http or https URL the deliveries are POSTed to.
	// Userinfo in it is sent as basic auth and redacted from errors; the
	// query is sent but left out of errors.
	URL string
	// Timeout bounds one call, from sending the request to reading the
	// answer; default 10s. Waiting for the rate limiter is not included.
	Timeout time.Duration
	// RatePerSecond limits the calls started per second with a token bucket;
	// 0 means unlimited. Waiting for a token respects the caller's context.
	RatePerSecond float64
	// Burst is the token bucket's size; default 1 when RatePerSecond is set.
	Burst int
	// BreakerFailures is how many consecutive retryable failures open the
	// circuit; default 5; negative disables the breaker.
	BreakerFailures int
	// BreakerCooldown is how long the circuit stays open before one probe
	// call is let through (half-open); default 30s.
	BreakerCooldown time.Duration
	// Client makes the calls. nil means a client with a keep-alive pool of
	// 128 connections to the destination. A given client is copied with
	// redirects turned off (a POST is never redirected); its Transport and
	// Timeout are kept.
	Client *http.Client
	// SigningSecrets, when set, sign every call with the Standard Webhooks
	// symmetric scheme: webhook-id (the idempotency key), webhook-timestamp
	// (the call's time in Unix seconds, taken for each attempt) and
	// webhook-signature ("v1,<base64 HMAC-SHA256 of id.timestamp.body>",
	// one per secret in this order, space-separated). They are the decoded
	// keys (of a "whsec_<base64>" secret, the decoded base64), the current
	// one first and those being rotated out after it; none may be empty.
	// These three headers then replace any a provider sent; without
	// signing, a provider's are forwarded like its other headers. Cost:
	// one HMAC-SHA256 pass over the body per secret and call.
	SigningSecrets [][]byte
	// MaxRetryAfter caps the wait a 429 or 503's Retry-After asks for;
	// default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Now is the clock for the breaker, Retry-After dates and the
	// signature's timestamp; nil is time.Now. For tests.
	Now func() time.Time
}

// HTTP POSTs deliveries to one destination URL (DESIGN §6). It is safe for
// concurrent use. Each call costs one HTTP round trip on a pooled connection
// plus a header map; the breaker and the rate limiter cost a mutex each, and
// signing one HMAC pass over the body per secret.
type HTTP struct {
	url     string // as configured, for requests
	label   string // for errors: redacted, without query
	timeout time.Duration
	maxRA   time.Duration // MaxRetryAfter
	client  *http.Client
	limiter *rate.Limiter // nil: unlimited
	breaker *breaker      // nil: disabled
	signer  *signer       // nil: calls are not signed
	now     func() time.Time
}

// NewHTTP validates o and returns an HTTP destination; the error names every
// option that is wrong.
func NewHTTP(o HTTPOptions) (*HTTP, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("http destination: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		bad("URL", "required")
	case err != nil:
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // its text repeats the URL, password and all
		}
		bad("URL", "%v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		bad("URL", "%q: scheme must be http or https", redact(u))
	case u.Host == "":
		bad("URL", "%q: no host", redact(u))
	}
	if o.Timeout < 0 {
		bad("Timeout", "%s is negative", o.Timeout)
	}
	if o.RatePerSecond < 0 || math.IsNaN(o.RatePerSecond) || math.IsInf(o.RatePerSecond, 0) {
		bad("RatePerSecond", "%v: must be a finite number >= 0 (0 is unlimited)", o.RatePerSecond)
	}
	if o.Burst < 0 {
		bad("Burst", "%d is negative", o.Burst)
	}
	if o.BreakerCooldown < 0 {
		bad("BreakerCooldown", "%s is negative", o.BreakerCooldown)
	}
	if o.MaxRetryAfter < 0 {
		bad("MaxRetryAfter", "%s is negative", o.MaxRetryAfter)
	}
	for i, key := range o.SigningSecrets {
		if len(key) == 0 {
			bad(fmt.Sprintf("SigningSecrets[%d]", i), "empty")
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	h := &HTTP{
		url:     o.URL,
		label:   redact(u),
		timeout: cmp.Or(o.Timeout, DefaultTimeout),
		maxRA:   cmp.Or(o.MaxRetryAfter, DefaultMaxRetryAfter),
		client:  o.Client,
		now:     o.Now,
	}
	if h.client == nil {
		h.client = &http.Client{Transport: newTransport()}
	} else {
		c := *o.Client
		h.client = &c
	}
	h.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if h.now == nil {
		h.now = time.Now
	}
	if o.RatePerSecond > 0 {
		h.limiter = rate.NewLimiter(rate.Limit(o.RatePerSecond), cmp.Or(o.Burst, 1))
	}
	h.breaker = newBreaker(cmp.Or(o.BreakerFailures, DefaultBreakerFailures), cmp.Or(o.BreakerCooldown, DefaultBreakerCooldown))
	if len(o.SigningSecrets) > 0 {
		keys := make([][]byte, len(o.SigningSecrets))
		for i, key := range o.SigningSecrets {
			keys[i] = bytes.Clone(key)
		}
		h.signer = newSigner(keys)
	}
	return h, nil
}

// newTransport is the default transport: http.DefaultTransport's settings
// (proxy from the environment, dial and TLS timeouts, HTTP/2 over TLS) with a
// pool sized for a processor running many deliveries to one host at once.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 128
	t.MaxIdleConnsPerHost = 128
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// BreakerOpen reports whether the circuit breaker refuses calls (open, or
// half-open), for a metrics gauge. Always false when the breaker is disabled.
func (h *HTTP) BreakerOpen() bool { return h.breaker.isOpen() }

// Refusing reports, changing nothing, whether a call now would be refused by
// the breaker: open with cool-down left, or half-open with its probe in
// flight. The processor parks a destination's records while it holds.
func (h *HTTP) Refusing() bool {
	_, refused := h.breaker.refuses(h.now())
	return refused
}

// Handle POSTs d.Body to the destination and classifies the answer (DESIGN
// §6): 2xx is success (nil); a timeout, a connection error, 408, 429 and 5xx
// are retryable, 429 and 503 with Retry-After as a *retry.RetryAfterError; 3xx
// (not followed) and other 4xx are a *retry.PermanentError wrapping a
// *StatusError. While the circuit is open it returns ErrCircuitOpen without a
// call. When ctx ends first, the error is retryable and wraps ctx.Err(), so
// errors.Is(err, context.Canceled) tells a shutdown apart.
func (h *HTTP) Handle(ctx context.Context, d Delivery) error {
	hdr, err := h.header(d)
	if err != nil {
		return retry.Permanent(err)
	}
	if ctx.Err() != nil {
		return h.abandoned(ctx)
	}

	// An open circuit refuses before the rate limiter is waited on, and the
	// breaker admits the call only once it holds a token, so a call that
	// queued while the circuit opened does not go through.
	if wait, refused := h.breaker.refuses(h.now()); refused {
		return h.circuitOpen(wait)
	}
	if h.limiter != nil {
		if err := h.limiter.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return h.abandoned(ctx)
			}
			// The wait would outlast ctx's deadline; Wait took no token.
			return fmt.Errorf("destination %s: rate limit: %v: %w", h.label, err, context.DeadlineExceeded)
		}
	}
	t, wait, ok := h.breaker.allow(h.now())
	if !ok {
		return h.circuitOpen(wait)
	}
	res := ignored
	defer func() { h.breaker.done(t, res, h.now()) }()

	callCtx, cancel := context.WithTimeoutCause(ctx, h.timeout, errTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, h.url, bytes.NewReader(d.Body))
	if err != nil { // the URL was validated: cannot happen
		return retry.Permanent(fmt.Errorf("destination %s: %w", h.label, err))
	}
	if h.signer != nil { // the call's own time: each attempt, after any wait
		h.signer.set(hdr, d.Key, h.now().Unix(), d.Body)
	}
	req.Header = hdr

	resp, err := h.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return h.abandoned(ctx)
		case context.Cause(callCtx) == errTimeout:
			res = failed
			return fmt.Errorf("destination %s: no answer within %s: %w", h.label, h.timeout, context.DeadlineExceeded)
		}
		res = failed
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the URL, with the query
		}
		return fmt.Errorf("destination %s: %w", h.label, err)
	}
	defer resp.Body.Close()

	code := resp.StatusCode
	if code >= 200 && code < 300 {
		res = succeeded
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxDrain))
	se := &StatusError{URL: h.label, StatusCode: code, Status: resp.Status, Body: oneLine(body, MaxErrorBody)}
	switch {
	case code >= 300 && code < 400:
		res = succeeded
		se.Location = resp.Header.Get("Location")
		return retry.Permanent(se)
	case code == http.StatusRequestTimeout:
		res = failed
		return se
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		// A 429 is a destination that works and is busy: its load is the
		// adaptive limit's business (the admission chain), and counting
		// it would open the breaker on the few refusals a limit finding
		// the receiver's capacity costs. A 503 is a failure.
		res = failed
		if code == http.StatusTooManyRequests {
			res = succeeded
		}
		now := h.now()
		if after := parseRetryAfter(resp.Header.Get("Retry-After"), now, h.maxRA); after > 0 {
			return &retry.RetryAfterError{Err: se, After: after, Until: now.Add(after)}
		}
		return se
	case code >= 400 && code < 500:
		res = succeeded // the destination works and answered: don't count it
		return retry.Permanent(se)
	default: // 5xx, and codes outside the standard classes: fail safe
		res = failed
		return se
	}
}

// circuitOpen is the error of a call the breaker refused, retryable no
// sooner than the cool-down left.
func (h *HTTP) circuitOpen(wait time.Duration) error {
	err := fmt.Errorf("destination %s: %w", h.label, ErrCircuitOpen)
	if wait > 0 {
		return retry.RetryAfter(err, wait)
	}
	return err
}

// abandoned is the error when the caller's ctx ended before the call did.
// It is retryable and says nothing about the destination.
func (h *HTTP) abandoned(ctx context.Context) error {
	return fmt.Errorf("destination %s: call abandoned: %w", h.label, ctx.Err())
}

// header builds the request headers: the provider's, minus credentials and
// hop-by-hop ones and any that cannot be sent, then hookline's own (the
// signature's are set by Handle, at the call's time). It fails when one of
// hookline's values cannot travel in a header, or when a signed call has no
// key.
func (h *HTTP) header(d Delivery) (http.Header, error) {
	if h.signer != nil && d.Key == "" {
		return nil, fmt.Errorf("destination %s: no idempotency key to sign as %s", h.label, HeaderWebhookID)
	}
	// Room for 7 headers of hookline's and the signature's 3.
	hdr := make(http.Header, len(d.Headers)+10)
	var dropped []string // named in a forwarded Connection header
	for _, rh := range d.Headers {
		if strings.EqualFold(rh.Key, "connection") {
			for _, name := range strings.Split(string(rh.Value), ",") {
				dropped = append(dropped, strings.ToLower(strings.TrimSpace(name)))
			}
		}
	}
	for _, rh := range d.Headers {
		name := strings.ToLower(rh.Key)
		if notForwarded(name) || slices.Contains(dropped, name) ||
			!httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(string(rh.Value)) {
			continue
		}
		hdr.Add(name, string(rh.Value))
	}
	own := [...]struct{ name, value string }{
		{HeaderIdempotencyKey, d.Key},
		{HeaderAttempt, strconv.Itoa(d.Attempt)},
		{HeaderProvider, d.Provider},
		{HeaderEventType, d.EventType},
		{HeaderRoute, d.Route},
		{"User-Agent", UserAgent},
		{"Content-Type", d.ContentType},
	}
	for _, kv := range own {
		if !httpguts.ValidHeaderFieldValue(kv.value) {
			return nil, fmt.Errorf("destination %s: %s %q cannot be sent in an HTTP header", h.label, kv.name, kv.value)
		}
		if kv.value == "" {
			hdr.Del(kv.name)
			continue
		}
		hdr.Set(kv.name, kv.value)
	}
	return hdr, nil
}

// StatusError is a destination's answer other than 2xx. Handle returns it
// bare (retryable), or inside a *retry.PermanentError or a
// *retry.RetryAfterError; errors.As finds it in all three, for a metric by
// status code.
type StatusError struct {
	URL        string // the destination, redacted and without its query
	StatusCode int
	Status     string // e.g. "503 Service Unavailable"
	Body       string // the start of the body on one line, at most MaxErrorBody bytes
	Location   string // the Location of a 3xx answer
}

// Error says what happened in one line: "destination http://x/y: HTTP 503:
// <start of body>".
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("destination %s: HTTP %d", e.URL, e.StatusCode)
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		msg += " redirect not followed"
		if e.Location != "" {
			msg += " (Location: " + oneLine([]byte(e.Location), 200) + ")"
		}
	}
	switch text, _ := strings.CutPrefix(e.Status, strconv.Itoa(e.StatusCode)+" "); {
	case e.Body != "":
		msg += ": " + e.Body
	case text != "" && (e.StatusCode < 300 || e.StatusCode >= 400):
		msg += " " + text
	}
	return msg
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date
// (RFC 9110 §10.2.3), as a delay from now, at most limit. It is 0 for a
// date in the past and for anything it cannot read.
func parseRetryAfter(v string, now time.Time, limit time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return time.Duration(min(n, uint64(limit/time.Second))) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), limit)
}

// oneLine renders the start of b for an error message: valid UTF-8, control
// characters and runs of white space as one space, at most n bytes, cut on a
// rune boundary with "…" when cut.
func oneLine(b []byte, n int) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "\uFFFD"))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// redact renders u for errors and logs: the password hidden, no query or
// fragment (they often carry tokens).
func redact(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "", false, "", ""
	return c.Redacted()
}
