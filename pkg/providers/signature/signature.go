// Package signature verifies and makes the signatures of webhook
// deliveries: one Scheme per way of signing (Stripe, Slack, Retell,
// Standard Webhooks, and Single, the one-header HMAC of github, shopify,
// gocardless, calcom and generic providers, built from a Config), the
// rotation over several secrets, the tolerance of signed timestamps, and
// the digest of what a signature authenticates. Which preset uses which
// scheme is the providers package's.
package signature

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTolerance is how far a signed timestamp (stripe, standard, slack,
// retell) may be from the receiver's clock, in either direction.
const DefaultTolerance = 5 * time.Minute

// Encoding is how a MAC is written in a header.
type Encoding int

const (
	Hex Encoding = iota
	Base64
)

func (e Encoding) encode(b []byte) string {
	if e == Base64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return hex.EncodeToString(b)
}

func (e Encoding) decode(s string) ([]byte, error) {
	if e == Base64 {
		return base64.StdEncoding.DecodeString(s)
	}
	return hex.DecodeString(s)
}

// signed is what a scheme reads from the request headers: the candidate
// signatures and, for the schemes that sign them, the message id and the
// timestamp exactly as sent.
type signed struct {
	id, ts string
	sigs   [][]byte
}

// Scheme is one way of signing a webhook: an HMAC over some content built
// from the raw body (and, for some, a timestamp and an id), carried in
// headers. Every preset is a scheme value; the HMAC, the comparison, the
// rotation over several secrets and the tolerance check live in verify and
// sign only.
type Scheme struct {
	newHash     func() hash.Hash
	timestamped bool
	// millis: the signed timestamp counts milliseconds (retell), not
	// seconds.
	millis bool
	// headers are the request headers the signature is read from, as the
	// HTTP document lists them (providers.Provider.RequestHeaders).
	headers []Header
	// covered are the request headers, besides the one carrying the
	// signature, whose values the HMAC covers (canonical names): a header
	// not listed can be changed without the signature noticing.
	covered []string
	// newID gives the message id to sign (standard only): the request's, or a
	// fresh one.
	newID   func(h http.Header) string
	parse   func(h http.Header) (signed, error)
	content func(in signed, body []byte) [][]byte
	write   func(h http.Header, in signed, mac []byte)
	// macs keeps keyed HMACs for reuse (macs.go).
	macs macPools
}

// Header is a request header a scheme reads, as ingest's HTTP document
// lists it.
type Header struct {
	Name string // as the provider spells it
	// Required: a delivery without it (or with it empty) is refused 401.
	Required    bool
	Description string
}

// Timestamped reports whether the scheme signs a timestamp, so that a
// tolerance applies.
func (s *Scheme) Timestamped() bool { return s.timestamped }

// Headers returns the request headers the signature is read from, as the
// HTTP document lists them. Cost: none; the slice is the scheme's own:
// never modify it.
func (s *Scheme) Headers() []Header { return s.headers }

// Parsed is what Precheck read of a request's signature headers, so that
// VerifyParsed checks the body against them without parsing them again.
// The zero value verifies nothing: use only one Precheck returned without
// error, for the same request.
type Parsed struct {
	in signed
}

// Precheck is what Verify checks without the body (see precheck); same
// errors as Verify. Its result verifies the body with VerifyParsed.
func (s *Scheme) Precheck(h http.Header, now time.Time, tol time.Duration) (Parsed, error) {
	in, err := s.precheck(h, now, tol)
	if err != nil {
		return Parsed{}, err
	}
	return Parsed{in: in}, nil
}

// mac is the one HMAC of the package: the keyed hash of parts, in order, as
// if they were one byte string. The HMAC keyed with key is taken from the
// scheme's pool for that key (a new one costs five allocations and the
// key's two padded blocks hashed) and reset after use.
func (s *Scheme) mac(key []byte, parts ...[]byte) []byte {
	pool := s.macs.pool(s.newHash, key)
	var m hash.Hash
	if pool != nil {
		m = pool.Get().(hash.Hash)
	} else {
		m = hmac.New(s.newHash, key)
	}
	for _, p := range parts {
		m.Write(p)
	}
	sum := m.Sum(nil)
	if pool != nil {
		m.Reset()
		pool.Put(m)
	}
	return sum
}

// maxMacKeys bounds the keys a scheme keeps HMACs for: a provider's secrets
// (rotation: a few); a caller signing with more keys makes new HMACs.
const maxMacKeys = 16

// macPools are a scheme's pools of keyed HMACs, one per key.
type macPools struct {
	mu sync.RWMutex
	m  map[string]*sync.Pool
}

// pool returns key's pool, made on first use, or nil when maxMacKeys keys
// have one already.
func (p *macPools) pool(newHash func() hash.Hash, key []byte) *sync.Pool {
	p.mu.RLock()
	pool := p.m[string(key)]
	p.mu.RUnlock()
	if pool != nil {
		return pool
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool = p.m[string(key)]; pool != nil {
		return pool
	}
	if len(p.m) >= maxMacKeys {
		return nil
	}
	if p.m == nil {
		p.m = map[string]*sync.Pool{}
	}
	k := slices.Clone(key)
	pool = &sync.Pool{New: func() any { return hmac.New(newHash, k) }}
	p.m[string(k)] = pool
	return pool
}

// Verify checks the request against every secret (rotation: any one
// verifying is enough) and every signature the header carries, comparing in
// constant time. A timestamped scheme then refuses a timestamp further than
// tol from now, in either direction. Cost: one HMAC over the body per secret.
func (s *Scheme) Verify(secrets []Secret, h http.Header, body []byte, now time.Time, tol time.Duration) error {
	in, err := s.precheck(h, now, tol)
	if err != nil {
		return err
	}
	return s.VerifyParsed(secrets, Parsed{in: in}, body)
}

// VerifyParsed is the rest of Verify once Precheck passed: the HMAC of the
// body (and what else the scheme signs) against every secret and every
// signature p holds, compared in constant time; Verify's error when none
// matches. The headers are not parsed again (ingest prechecks before the
// body is read). Cost: one HMAC over the body per secret.
func (s *Scheme) VerifyParsed(secrets []Secret, p Parsed, body []byte) error {
	if !s.matches(secrets, s.content(p.in, body), p.in.sigs) {
		return sigErr(ReasonMismatch, "no signature matches any configured secret")
	}
	return nil
}

// precheck is what can be checked of a signature without the body: its
// headers are there and well formed, and a timestamped scheme's timestamp
// is within tol of now in either direction. A request that fails it costs
// no body read and no HMAC.
func (s *Scheme) precheck(h http.Header, now time.Time, tol time.Duration) (signed, error) {
	in, err := s.parse(h)
	if err != nil || !s.timestamped {
		return in, err
	}
	n, err := strconv.ParseInt(in.ts, 10, 64)
	if err != nil {
		if s.millis {
			return in, sigErr(ReasonMalformed, "timestamp is not a number of milliseconds")
		}
		return in, sigErr(ReasonMalformed, "timestamp is not a number of seconds")
	}
	at := time.Unix(n, 0)
	if s.millis {
		at = time.UnixMilli(n)
	}
	// now.Sub saturates, so compare both bounds rather than an absolute
	// value that would overflow for a timestamp far in the future.
	if d := now.Sub(at); d > tol || d < -tol {
		return in, sigErr(ReasonStale, "timestamp is %s away from now, tolerance is %s", d.Round(time.Second), tol)
	}
	return in, nil
}

func (s *Scheme) matches(secrets []Secret, parts [][]byte, sigs [][]byte) bool {
	for _, key := range secrets {
		want := s.mac(key, parts...)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				return true
			}
		}
	}
	return false
}

// Covers reports whether the signature authenticates the value of the
// request header name.
func (s *Scheme) Covers(name string) bool {
	return slices.Contains(s.covered, http.CanonicalHeaderKey(name))
}

// Digest is the SHA-256 of the provider's name (length-prefixed) followed
// by exactly the bytes the HMAC covers: two requests to one provider have
// the same digest if and only if their signatures authenticate the same
// content, whatever their unsigned headers and however the signature is
// spelt (hex case, several v1 entries, base64 padding bits). Cost: one
// SHA-256 over the body.
func (s *Scheme) Digest(name string, h http.Header, body []byte) ([sha256.Size]byte, error) {
	in, err := s.parse(h)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return DigestOf(name, s.content(in, body)...), nil
}

// DigestOf is the SHA-256 of name (length-prefixed) followed by parts:
// Digest's value, and for an unsigned provider the digest of its name and
// the body.
func DigestOf(name string, parts ...[]byte) [sha256.Size]byte {
	d := sha256.New()
	d.Write(binary.BigEndian.AppendUint32(nil, uint32(len(name))))
	d.Write([]byte(name))
	for _, p := range parts {
		d.Write(p)
	}
	var out [sha256.Size]byte
	d.Sum(out[:0])
	return out
}

// Sign sets on h the headers a sender of this scheme would set for body at
// now, signed with key.
func (s *Scheme) Sign(key []byte, body []byte, now time.Time, h http.Header) {
	in := signed{ts: strconv.FormatInt(now.Unix(), 10)}
	if s.millis {
		in.ts = strconv.FormatInt(now.UnixMilli(), 10)
	}
	if s.newID != nil {
		in.id = s.newID(h)
	}
	s.write(h, in, s.mac(key, s.content(in, body)...))
}

func bodyOnly(_ signed, body []byte) [][]byte { return [][]byte{body} }

// Single is a header holding prefix + one encoded HMAC of the body
// (github, shopify, gocardless, calcom, generic).
func Single(header, prefix string, newHash func() hash.Hash, enc Encoding) *Scheme {
	return &Scheme{
		newHash: newHash,
		headers: []Header{{Name: header, Required: true,
			Description: fmt.Sprintf("`%s<%s HMAC-%s of the body>`", prefix, encodingName(enc), hashName(newHash))}},
		parse: func(h http.Header) (signed, error) {
			v := h.Get(header)
			if v == "" {
				return signed{}, sigErr(ReasonMissing, "missing %s header", header)
			}
			rest, ok := strings.CutPrefix(v, prefix)
			if !ok {
				return signed{}, sigErr(ReasonMalformed, "%s does not start with %q", header, prefix)
			}
			sig, err := enc.decode(rest)
			if err != nil {
				return signed{}, sigErr(ReasonMalformed, "%s is not valid %s", header, encodingName(enc))
			}
			return signed{sigs: [][]byte{sig}}, nil
		},
		content: bodyOnly,
		write: func(h http.Header, _ signed, mac []byte) {
			h.Set(header, prefix+enc.encode(mac))
		},
	}
}

// hashName names the HMAC's hash by its size: the schemes use SHA-1,
// SHA-256 or SHA-512 only.
func hashName(newHash func() hash.Hash) string {
	switch newHash().Size() {
	case sha1.Size:
		return "SHA1"
	case sha512.Size:
		return "SHA512"
	}
	return "SHA256"
}

func encodingName(e Encoding) string {
	if e == Base64 {
		return "base64"
	}
	return "hex"
}

const (
	headerStripeSignature = "Stripe-Signature"
	headerSlackSignature  = "X-Slack-Signature"
	headerSlackTimestamp  = "X-Slack-Request-Timestamp"
)

// Stripe: Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...], the HMAC
// of "<t>.<body>". v0 and unknown schemes are ignored.
func Stripe() *Scheme {
	return &Scheme{
		newHash:     sha256.New,
		timestamped: true,
		headers: []Header{{Name: headerStripeSignature, Required: true,
			Description: "`t=<unix time>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">`; the time within the tolerance of now."}},
		parse: func(h http.Header) (signed, error) {
			v := h.Get(headerStripeSignature)
			if v == "" {
				return signed{}, sigErr(ReasonMissing, "missing %s header", headerStripeSignature)
			}
			var in signed
			sawV1 := false
			// strings.Cut rather than SplitSeq: the iterator cost four
			// allocations a parse.
			for rest := v; rest != ""; {
				var item string
				item, rest, _ = strings.Cut(rest, ",")
				k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
				if !ok {
					continue
				}
				switch k {
				case "t":
					if in.ts == "" {
						in.ts = val
					}
				case "v1":
					sawV1 = true
					if sig, err := hex.DecodeString(val); err == nil {
						in.sigs = append(in.sigs, sig)
					}
				}
			}
			switch {
			case in.ts == "":
				return signed{}, sigErr(ReasonMalformed, "%s has no t= timestamp", headerStripeSignature)
			case !sawV1:
				return signed{}, sigErr(ReasonMalformed, "%s has no v1 signature", headerStripeSignature)
			case len(in.sigs) == 0:
				return signed{}, sigErr(ReasonMalformed, "%s has no v1 signature in hex", headerStripeSignature)
			}
			return in, nil
		},
		content: func(in signed, body []byte) [][]byte {
			return [][]byte{[]byte(in.ts), []byte("."), body}
		},
		write: func(h http.Header, in signed, mac []byte) {
			h.Set(headerStripeSignature, "t="+in.ts+",v1="+hex.EncodeToString(mac))
		},
	}
}

// Slack: X-Slack-Signature: v0=<hex>, the HMAC of
// "v0:<X-Slack-Request-Timestamp>:<body>".
func Slack() *Scheme {
	s := Single(headerSlackSignature, "v0=", sha256.New, Hex)
	sigOnly := s.parse
	s.timestamped = true
	s.covered = []string{headerSlackTimestamp}
	s.headers = []Header{
		{Name: headerSlackSignature, Required: true, Description: "`v0=<hex HMAC-SHA256 of \"v0:<X-Slack-Request-Timestamp>:<body>\">`."},
		{Name: headerSlackTimestamp, Required: true, Description: "Unix time in seconds, within the tolerance of now; signed."},
	}
	s.parse = func(h http.Header) (signed, error) {
		in, err := sigOnly(h)
		if err != nil {
			return signed{}, err
		}
		if in.ts = h.Get(headerSlackTimestamp); in.ts == "" {
			return signed{}, sigErr(ReasonMissing, "missing %s header", headerSlackTimestamp)
		}
		return in, nil
	}
	s.content = func(in signed, body []byte) [][]byte {
		return [][]byte{[]byte("v0:" + in.ts + ":"), body}
	}
	s.write = func(h http.Header, in signed, mac []byte) {
		h.Set(headerSlackTimestamp, in.ts)
		h.Set(headerSlackSignature, "v0="+hex.EncodeToString(mac))
	}
	return s
}

const headerRetellSignature = "X-Retell-Signature"

// Retell: X-Retell-Signature: v=<unix milliseconds>,d=<hex>, the
// HMAC-SHA256 of the body followed by the timestamp's digits, keyed with
// the Retell API key as it is (Retell's SDKs sign and verify so, with a
// 5-minute tolerance either way).
func Retell() *Scheme {
	return &Scheme{
		newHash:     sha256.New,
		timestamped: true,
		millis:      true,
		headers: []Header{{Name: headerRetellSignature, Required: true,
			Description: "`v=<unix milliseconds>,d=<hex HMAC-SHA256 of <body><milliseconds>>`, keyed with the Retell API key; the time within the tolerance of now."}},
		parse: func(h http.Header) (signed, error) {
			v := h.Get(headerRetellSignature)
			if v == "" {
				return signed{}, sigErr(ReasonMissing, "missing %s header", headerRetellSignature)
			}
			// Exactly v=<digits>,d=<hex>, as Retell sends it.
			ts, digest, ok := strings.Cut(strings.TrimPrefix(v, "v="), ",d=")
			switch {
			case !ok || !strings.HasPrefix(v, "v="):
				return signed{}, sigErr(ReasonMalformed, "%s is not v=<timestamp>,d=<hex digest>", headerRetellSignature)
			case ts == "" || strings.Trim(ts, "0123456789") != "":
				return signed{}, sigErr(ReasonMalformed, "%s v= is not a number of milliseconds", headerRetellSignature)
			}
			sig, err := hex.DecodeString(digest)
			if err != nil || len(sig) != sha256.Size {
				return signed{}, sigErr(ReasonMalformed, "%s d= is not a hex SHA-256 digest", headerRetellSignature)
			}
			in := signed{ts: ts}
			in.sigs = [][]byte{sig}
			return in, nil
		},
		content: func(in signed, body []byte) [][]byte {
			return [][]byte{body, []byte(in.ts)}
		},
		write: func(h http.Header, in signed, mac []byte) {
			h.Set(headerRetellSignature, "v="+in.ts+",d="+hex.EncodeToString(mac))
		},
	}
}

// Standard Webhooks headers. Svix, the reference sender, also sends the same
// three under the svix- prefix; a request carrying only those verifies too.
const (
	HeaderWebhookID        = "Webhook-Id"
	headerWebhookTimestamp = "Webhook-Timestamp"
	headerWebhookSignature = "Webhook-Signature"
	HeaderSvixID           = "Svix-Id"
	headerSvixTimestamp    = "Svix-Timestamp"
	headerSvixSignature    = "Svix-Signature"
)

// StandardHeaders returns the names of the id, timestamp and signature
// headers the request uses: webhook-* unless only svix-* are present.
func StandardHeaders(h http.Header) (id, ts, sig string) {
	if h.Get(headerWebhookSignature) == "" && h.Get(headerSvixSignature) != "" {
		return HeaderSvixID, headerSvixTimestamp, headerSvixSignature
	}
	return HeaderWebhookID, headerWebhookTimestamp, headerWebhookSignature
}

// Standard: Standard Webhooks (Svix). webhook-signature holds
// space-separated "v1,<base64>" entries, each the HMAC of
// "<webhook-id>.<webhook-timestamp>.<body>".
func Standard() *Scheme {
	return &Scheme{
		newHash:     sha256.New,
		timestamped: true,
		covered:     []string{HeaderWebhookID, headerWebhookTimestamp, HeaderSvixID, headerSvixTimestamp},
		headers: []Header{
			{Name: HeaderWebhookID, Required: true, Description: "The message id: signed, and the idempotency key's suffix."},
			{Name: headerWebhookTimestamp, Required: true, Description: "Unix time in seconds, within the tolerance of now; signed."},
			{Name: headerWebhookSignature, Required: true, Description: "Space-separated `v1,<base64 HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<body>\">` entries."},
			{Name: HeaderSvixID, Description: "Svix's spelling of webhook-id: a request carrying the three svix-* headers and no webhook-signature verifies with them."},
			{Name: headerSvixTimestamp, Description: "Svix's spelling of webhook-timestamp."},
			{Name: headerSvixSignature, Description: "Svix's spelling of webhook-signature."},
		},
		newID: func(h http.Header) string {
			if id := h.Get(HeaderWebhookID); id != "" {
				return id
			}
			return "msg_" + rand.Text()
		},
		parse: func(h http.Header) (signed, error) {
			idName, tsName, sigName := StandardHeaders(h)
			in := signed{id: h.Get(idName), ts: h.Get(tsName)}
			v := h.Get(sigName)
			for _, c := range [...]struct{ name, val string }{{idName, in.id}, {tsName, in.ts}, {sigName, v}} {
				if c.val == "" {
					return signed{}, sigErr(ReasonMissing, "missing %s header", c.name)
				}
			}
			sawV1 := false
			for entry := range strings.FieldsSeq(v) {
				version, sig, ok := strings.Cut(entry, ",")
				if !ok || version != "v1" {
					continue
				}
				sawV1 = true
				if b, err := base64.StdEncoding.DecodeString(sig); err == nil {
					in.sigs = append(in.sigs, b)
				}
			}
			if len(in.sigs) == 0 {
				if sawV1 {
					return signed{}, sigErr(ReasonMalformed, "%s has no v1 signature in base64", sigName)
				}
				return signed{}, sigErr(ReasonMalformed, "%s has no v1 signature", sigName)
			}
			return in, nil
		},
		content: func(in signed, body []byte) [][]byte {
			return [][]byte{[]byte(in.id + "." + in.ts + "."), body}
		},
		write: func(h http.Header, in signed, mac []byte) {
			h.Set(HeaderWebhookID, in.id)
			h.Set(headerWebhookTimestamp, in.ts)
			h.Set(headerWebhookSignature, "v1,"+base64.StdEncoding.EncodeToString(mac))
		},
	}
}

// DecodeStandardSecret turns a Standard Webhooks secret, "whsec_<base64>" or
// bare base64, into key bytes. The error never quotes the secret.
func DecodeStandardSecret(raw []byte) (Secret, error) {
	s := strings.TrimPrefix(string(raw), "whsec_")
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not a Standard Webhooks secret (want whsec_<base64>): the base64 part does not decode")
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("not a Standard Webhooks secret (want whsec_<base64>): the key is empty")
	}
	return Secret(key), nil
}

// Config is the signature block of a generic provider (DESIGN §5):
// the header carrying the signature, the HMAC algorithm (hmac-sha256,
// hmac-sha1 or hmac-sha512; default hmac-sha256), how the MAC is written
// (hex or base64; default hex) and a prefix written before it (e.g.
// "sha256="). None: true, alone, states that the provider does not sign.
type Config struct {
	Header    string `yaml:"header"`
	Algorithm string `yaml:"algorithm"`
	Encoding  string `yaml:"encoding"`
	Prefix    string `yaml:"prefix"`
	None      bool   `yaml:"none"`
}

// Scheme checks the block and builds its scheme; nil, nil for None. Errors
// name the offending field.
func (c Config) Scheme() (*Scheme, error) {
	if c.None {
		if c.Header != "" || c.Algorithm != "" || c.Encoding != "" || c.Prefix != "" {
			return nil, fmt.Errorf("signature: none: true cannot be combined with header, algorithm, encoding or prefix")
		}
		return nil, nil
	}
	if c.Header == "" {
		return nil, fmt.Errorf("signature.header: required (or state signature: {none: true} for an unsigned provider)")
	}
	if !ValidHeaderName(c.Header) {
		return nil, fmt.Errorf("signature.header: %q is not a valid HTTP header name", c.Header)
	}
	var newHash func() hash.Hash
	switch c.Algorithm {
	case "", "hmac-sha256":
		newHash = sha256.New
	case "hmac-sha1":
		newHash = sha1.New
	case "hmac-sha512":
		newHash = sha512.New
	default:
		return nil, fmt.Errorf("signature.algorithm: unknown algorithm %q (want hmac-sha256, hmac-sha1 or hmac-sha512)", c.Algorithm)
	}
	var enc Encoding
	switch c.Encoding {
	case "", "hex":
		enc = Hex
	case "base64":
		enc = Base64
	default:
		return nil, fmt.Errorf("signature.encoding: unknown encoding %q (want hex or base64)", c.Encoding)
	}
	return Single(http.CanonicalHeaderKey(c.Header), c.Prefix, newHash, enc), nil
}

// ValidHeaderName reports whether name is an RFC 9110 token.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// SignGeneric sets on h the signature header described by sig for body,
// signed with secret. An unsigned config (None) sets nothing. Cost: one HMAC
// over the body.
func SignGeneric(sig Config, secret []byte, body []byte, h http.Header) error {
	s, err := sig.Scheme()
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	if s != nil {
		s.Sign(secret, body, time.Time{}, h)
	}
	return nil
}
