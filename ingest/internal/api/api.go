// Package api is ingest's HTTP surface (DESIGN §4, contract): gin routes for
// POST /webhooks/{provider}, /openapi.yaml (the HTTP document for the
// providers file, openapi.go), /healthz, /readyz, /metrics and /selftest, and
// the mapping of every refusal to its status code and JSON error body.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/ingest/internal/publish"
	"github.com/hookline/hookline/ingest/internal/selftest"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/signature"
	"github.com/hookline/hookline/pkg/providers/typelabel"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/pkg/tracing"
)

// Publisher makes records durable; *publish.Publisher in production.
type Publisher interface {
	Publish(ctx context.Context, recs []*kgo.Record) error
}

var _ Publisher = (*publish.Publisher)(nil)

// SelfTester runs GET /selftest; *selftest.Runner in production.
type SelfTester interface {
	Run(ctx context.Context) selftest.Report
}

var _ SelfTester = (*selftest.Runner)(nil)

// Config is what the HTTP surface needs.
type Config struct {
	Providers    *providers.Registry
	Publisher    Publisher
	Topic        string // the raw topic, prefixed
	MaxBodyBytes int64
	// RetryAfter is sent with 503 when Kafka did not acknowledge in time.
	RetryAfter time.Duration
	Health     *obs.Health
	Registry   *prometheus.Registry
	Logger     *slog.Logger
	// Now is time.Now unless a test says otherwise.
	Now func() time.Time
	// Selftest answers GET /selftest; nil: the route answers 404.
	Selftest SelfTester
	// IPLimit limits POST /webhooks/{provider} per client address; nil: off.
	IPLimit *IPLimit
	// ReplayCacheEntries bounds how many accepted signatures are remembered
	// to recognise replays (HOOKLINE_REPLAY_CACHE_ENTRIES); 0: recognition
	// off.
	ReplayCacheEntries int
	// OutcomesTopic (prefixed) is where a delivery suppressed as a replay
	// gets its outcome (status suppressed), for dlq trace to find it.
	OutcomesTopic string
	// EventTypeLabels is how many event types per provider that the
	// providers file does not name get an event_type label of their own
	// (HOOKLINE_EVENT_TYPE_LABELS; package typelabel); 0: the file's
	// names only.
	EventTypeLabels int
	// Tracer traces each webhook request (a server span continuing the
	// request's traceparent) onto its records' headers; nil: off.
	Tracer *tracing.Tracer
}

// Server answers webhook requests.
type Server struct {
	cfg      Config
	limiters map[string]*rate.Limiter
	ips      *ipLimiter   // nil: no per-IP limit
	replays  *replayCache // nil: replays are not recognised
	m        *metrics
	types    *typelabel.Labeller // the event_type label of m.records
	// series holds each provider's accepted-delivery series (metrics.go),
	// the map fixed at New.
	series  map[string]*acceptedSeries
	openapi []byte // GET /openapi.yaml
}

// New builds the server and registers its metrics on cfg.Registry.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, limiters: map[string]*rate.Limiter{}, m: newMetrics(cfg.Registry),
		types: typelabel.New(cfg.Providers.NamedEventTypes(), cfg.EventTypeLabels), series: map[string]*acceptedSeries{}}
	for _, name := range cfg.Providers.Names() {
		s.series[name] = &acceptedSeries{}
		p, _ := cfg.Providers.Get(name)
		if p.RateLimit != nil {
			s.limiters[name] = rate.NewLimiter(rate.Limit(p.RateLimit.PerSecond), p.RateLimit.Burst)
		}
	}
	if cfg.IPLimit != nil {
		s.ips = newIPLimiter(*cfg.IPLimit)
		s.m.registerIPLimit(cfg.Registry, s.ips)
	}
	if cfg.ReplayCacheEntries > 0 {
		s.replays = newReplayCache(cfg.ReplayCacheEntries)
		s.m.registerReplays(cfg.Registry, s.replays)
	}
	doc, err := openAPIDocument(cfg.Providers, cfg.IPLimit != nil)
	if err != nil {
		// Only the embedded document can make it fail, and every test
		// that builds a Server would: a bug, not a configuration.
		panic(fmt.Sprintf("ingest: the OpenAPI document: %v", err))
	}
	s.openapi = doc
	return s
}

// Handler returns the gin engine with every route.
func (s *Server) Handler() http.Handler {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, v any) {
		s.cfg.Logger.Error("panic in handler", "err", fmt.Sprint(v), "path", c.Request.URL.Path)
		s.fail(c, "unknown", errorf(http.StatusInternalServerError, CodeInternal, "internal error; nothing was accepted, retry later"))
	}))
	r.POST("/webhooks/:provider", s.webhook)
	r.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", s.openapi) })
	r.GET("/healthz", gin.WrapF(obs.Healthz))
	r.GET("/readyz", gin.WrapF(s.cfg.Health.Readyz))
	r.GET("/metrics", gin.WrapH(obs.Metrics(s.cfg.Registry)))
	if s.cfg.Selftest != nil {
		r.GET("/selftest", s.selftest)
	}
	r.NoRoute(func(c *gin.Context) {
		s.fail(c, "unknown", errorf(http.StatusNotFound, CodeNotFound, "no route "+c.Request.URL.Path+"; webhooks go to POST /webhooks/{provider}"))
	})
	r.NoMethod(func(c *gin.Context) {
		s.fail(c, "unknown", errorf(http.StatusMethodNotAllowed, CodeMethod, c.Request.Method+" is not allowed here"))
	})
	return r
}

// Status values of the 202 answer.
const (
	statusAccepted = "accepted"
	// statusDuplicate: the same signed content was accepted before under
	// the same key, within the provider's replay window (the provider
	// sending it again, or a replay of it as captured); nothing was
	// produced this time.
	statusDuplicate = "duplicate"
	// statusReplay: the same signed content was accepted before under
	// another key (ReplayOf), within the provider's replay window: taken
	// for a replay and suppressed, nothing produced; its outcome
	// (suppressed) is on the outcomes topic.
	statusReplay = "replay"
)

// accepted is the 202 answer. A batch (GoCardless events[]) lists every key
// in IdempotencyKeys, even when it held one event; any other delivery is one
// record and has IdempotencyKey. A duplicate lists the keys this request
// would have had; a replay too, and ReplayOf, the (first) key of the
// delivery it repeated.
type accepted struct {
	Status          string   `json:"status"`
	IdempotencyKey  string   `json:"idempotency_key,omitempty"`
	IdempotencyKeys []string `json:"idempotency_keys,omitempty"`
	ReplayOf        string   `json:"replay_of,omitempty"`
	RequestID       string   `json:"request_id"`
}

func (s *Server) webhook(c *gin.Context) {
	s.m.inFlight.Inc()
	defer s.m.inFlight.Dec()
	if s.cfg.Tracer.On() {
		defer s.traced(c)()
	}
	receivedAt := s.cfg.Now()
	reqID := requestID(c.GetHeader("X-Request-Id"))
	c.Header("X-Request-Id", reqID)

	name := c.Param("provider")
	p, ok := s.cfg.Providers.Get(name)
	if s.ips != nil {
		if err := s.ips.allow(c.Request, receivedAt); err != nil {
			label := name
			if !ok {
				label = "unknown"
			}
			s.m.ipLimited.Inc()
			s.fail(c, label, err)
			return
		}
	}
	if !ok {
		s.fail(c, "unknown", errorf(http.StatusNotFound, CodeUnknownProvider, fmt.Sprintf("unknown provider %q", name)))
		return
	}
	if err := s.handle(c, p, reqID, receivedAt); err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = errorf(http.StatusInternalServerError, CodeInternal, "internal error; nothing was accepted, retry later")
			s.cfg.Logger.Error("webhook failed", "provider", name, "request_id", reqID, "err", err)
		}
		s.fail(c, name, ae)
	}
}

// handle runs the checks in the order that costs least first, and produces
// only when every one passed.
//
// The provider's rate limit is charged only once the signature verified
// and the delivery is not a replay: charged before, an unsigned flood
// spent the provider's tokens and its real deliveries got 429 (issue 25),
// and so would replays of one captured delivery. Traffic nobody signed is
// bounded by the per-address limit, checked before the provider is looked
// up.
func (s *Server) handle(c *gin.Context, p *providers.Provider, reqID string, receivedAt time.Time) error {
	ct := c.GetHeader("Content-Type")
	if err := p.CheckContentType(ct); err != nil {
		return errorf(http.StatusUnsupportedMediaType, CodeContentType, err.Error())
	}
	// The signature's headers and timestamp first: a request that cannot
	// verify costs no body read and no HMAC (an unsigned 1 MiB body cost
	// 2.4-3.2 ms of CPU, issue 25).
	sig, err := p.CheckSignatureHeaders(c.Request.Header, receivedAt)
	if err != nil {
		return s.badSignature(c, p, err)
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	// The headers as parsed above (the same request's, at the same
	// receivedAt): not parsed again.
	if err := p.VerifyBody(sig, body); err != nil {
		return s.badSignature(c, p, err)
	}
	d, err := p.Events(c.Request.Header, body)
	if err != nil {
		return errorf(http.StatusBadRequest, CodeMalformed, err.Error())
	}
	if d.Challenge != nil {
		s.m.requests.WithLabelValues(p.Name, "200").Inc()
		c.Data(http.StatusOK, d.ChallengeContentType, d.Challenge)
		return nil
	}
	if err := s.checkPayloads(p, d.Events); err != nil {
		return err
	}
	out := accepted{Status: statusAccepted, RequestID: reqID}
	if d.Batch {
		out.IdempotencyKeys = make([]string, len(d.Events))
		for i, e := range d.Events {
			out.IdempotencyKeys[i] = e.Key
		}
	} else {
		out.IdempotencyKey = d.Events[0].Key
	}

	first, dup, settle, err := s.claimReplay(c, p, body, d.Events, receivedAt)
	if err != nil {
		return err
	}
	if dup {
		return s.answerReplay(c, p, d.Events, first, out, receivedAt)
	}
	produced := false
	// Deferred, so that every way out (a panic included) lets the claims
	// waiting for this delivery's digest go on.
	defer func() { settle(produced) }()

	if lim := s.limiters[p.Name]; lim != nil {
		if err := limit(lim, receivedAt, "provider rate limit"); err != nil {
			return err
		}
	}
	// Named for the record, their values copied into its buffer: no
	// allocation of their own (room here for the presets' lists).
	var room [8]headers.Forwarded
	recs := publish.Records(s.cfg.Topic, headers.IngestMeta{
		Provider:    p.Name,
		ReceivedAt:  receivedAt,
		RequestID:   reqID,
		ContentType: ct,
		Forwarded:   p.AppendForwarded(room[:0], c.Request.Header),
	}, d.Events)
	if s.cfg.Tracer.On() {
		s.traceRecords(c, recs)
	}

	// Kafka refuses a record over the topic's max.message.bytes (body limit
	// plus HeaderRoom): say so now, as 413, rather than produce it.
	maxRecord := int(s.cfg.MaxBodyBytes) + topics.HeaderRoom
	for i, r := range recs {
		if n := headers.Size(r); n > maxRecord {
			return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf(
				"event %d would be a record of %d bytes (body %d, key and headers the rest), over the topic's limit of %d", i, n, len(r.Value), maxRecord))
		}
	}

	start := time.Now()
	if err := s.cfg.Publisher.Publish(c.Request.Context(), recs); err != nil {
		if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
			// Not an outage: the same request would be refused again.
			s.cfg.Logger.Warn("kafka refused a record as too large", "provider", p.Name, "request_id", reqID, "err", err)
			return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "kafka refused the delivery as too large: "+err.Error())
		}
		s.m.produceFails.WithLabelValues(p.Name).Inc()
		s.cfg.Logger.Warn("kafka did not acknowledge", "provider", p.Name, "request_id", reqID, "records", len(recs), "err", err)
		ae := errorf(http.StatusServiceUnavailable, CodeKafkaUnavailable, "kafka did not acknowledge in time; nothing is guaranteed accepted, retry later")
		ae.retryAfter = ceilSeconds(s.cfg.RetryAfter)
		return ae
	}
	produced = true
	series := s.m.accepted(p.Name, s.series[p.Name])
	if ack := time.Since(start).Seconds(); s.cfg.Tracer.On() {
		obs.Observe(c.Request.Context(), series.ack, ack) // the trace id as exemplar
	} else {
		// No span without a tracer: no exemplar to look up along the
		// request context's chain (0.8 us a request under load).
		series.ack.Observe(ack)
	}
	series.body.Observe(float64(len(body)))
	for _, ev := range d.Events { // one record each
		s.m.record(p.Name, s.types.Label(p.Name, ev.Type), series)
	}
	series.accepted.Inc()
	answerAccepted(c, out)
	return nil
}

// checkPayloads checks each event's body against the provider's schema
// (schema: in the providers file) when the provider has on_invalid:
// reject: the first invalid event refuses the whole delivery, 422
// invalid_payload naming the schema and its first violations, nothing
// produced. With on_invalid: dlq (the default) ingest checks nothing: the
// answer is 202 whatever the body, so the processor checks it when it
// takes the record up and dead-letters an invalid one (its parse shared
// with nothing on the request's path, which is what made a schema cost
// ingest three quarters of its throughput: docs/performance.md). Cost:
// nothing unless the provider rejects invalid bodies; then one parse and
// validation per event.
func (s *Server) checkPayloads(p *providers.Provider, events []providers.Event) error {
	if !p.HasSchema() || !p.RejectsInvalid() {
		return nil
	}
	for i, ev := range events {
		err := p.CheckPayload(ev.Type, ev.Body)
		if err == nil {
			continue
		}
		s.m.invalid.WithLabelValues(p.Name, invalidRejected).Inc()
		msg := err.Error()
		if len(events) > 1 {
			msg = fmt.Sprintf("events[%d]: %s", i, msg)
		}
		return errorf(http.StatusUnprocessableEntity, CodeInvalidPayload, msg)
	}
	return nil
}

// claimReplay, for a provider whose replays are recognised, looks up the
// delivery's signed digest: dup when it was accepted within the
// provider's replay window for these events (providers.ReplayWindow; 0:
// never), with what is known of that first delivery. Otherwise the
// digest is claimed (a request with the same one waits) and the caller
// must call settle once its produce ended, saying whether it was
// produced: only then is the digest remembered, with the delivery's first
// key, so a delivery that failed to produce is accepted when the provider
// sends it again. For other providers settle does nothing.
func (s *Server) claimReplay(c *gin.Context, p *providers.Provider, body []byte, events []providers.Event, now time.Time) (first prior, dup bool, settle func(produced bool), err error) {
	nothing := func(bool) {}
	if s.replays == nil || !p.RecognisesReplays() {
		return prior{}, false, nothing, nil
	}
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.Type
	}
	window := p.ReplayWindow(types...)
	if window <= 0 {
		return prior{}, false, nothing, nil
	}
	sum, err := p.SignedDigest(c.Request.Header, body)
	if err != nil { // Verify parsed the same headers: a bug
		return prior{}, false, nothing, fmt.Errorf("signed digest after verify: %w", err)
	}
	key := events[0].Key
	first, dup, err = s.replays.claim(c.Request.Context(), sum, now, key)
	if err != nil {
		ae := errorf(http.StatusServiceUnavailable, CodeKafkaUnavailable,
			"the same signed delivery was being produced by another request, and this one ended before it did; nothing is guaranteed accepted, retry later")
		ae.retryAfter = ceilSeconds(s.cfg.RetryAfter)
		return prior{}, false, nothing, ae
	}
	if dup {
		return first, true, nothing, nil
	}
	return prior{}, false, func(produced bool) { s.replays.settle(sum, produced, now, window, key) }, nil
}

// answerReplay answers a delivery whose signed content was accepted
// within its replay window. Under the first delivery's key it is that
// delivery sent again: 202 duplicate. Under another key it is taken for
// a replay and suppressed: 202 replay naming the first key, counted, and
// (for the first maxTracedReplays of one delivery) given an outcome
// suppressed on the outcomes topic, keyed by its own keys, so that dlq
// trace finds it; the answer waits for Kafka's acknowledgement of those,
// and is 503 without it, as an accepted delivery's is. Nothing is charged
// to the provider's rate limit.
func (s *Server) answerReplay(c *gin.Context, p *providers.Provider, events []providers.Event, first prior, out accepted, now time.Time) error {
	reqID := out.RequestID
	if first.key == events[0].Key {
		s.m.replays.WithLabelValues(p.Name).Inc()
		s.cfg.Logger.Debug("delivery sent again: its signed content was accepted before under its key", "provider", p.Name, "request_id", reqID)
		out.Status = statusDuplicate
		s.m.requests.WithLabelValues(p.Name, "202").Inc()
		answerAccepted(c, out)
		return nil
	}
	out.Status, out.ReplayOf = statusReplay, first.key
	if first.trace && s.cfg.OutcomesTopic != "" {
		at := headers.FormatTime(now)
		recs := make([]*kgo.Record, len(events))
		for i, e := range events {
			recs[i] = &kgo.Record{Topic: s.cfg.OutcomesTopic, Key: []byte(e.Key), Value: outcome.Suppressed(e.Key, p.Name, e.Type, first.key, at)}
		}
		if err := s.cfg.Publisher.Publish(c.Request.Context(), recs); err != nil {
			s.m.produceFails.WithLabelValues(p.Name).Inc()
			s.cfg.Logger.Warn("kafka did not acknowledge a suppressed replay's outcome", "provider", p.Name, "request_id", reqID, "err", err)
			ae := errorf(http.StatusServiceUnavailable, CodeKafkaUnavailable, "kafka did not acknowledge in time; nothing is guaranteed recorded, retry later")
			ae.retryAfter = ceilSeconds(s.cfg.RetryAfter)
			return ae
		}
	}
	s.m.replays.WithLabelValues(p.Name).Inc()
	s.m.suppressed.WithLabelValues(p.Name).Inc()
	s.cfg.Logger.Info("delivery suppressed as a replay: its signed content was accepted before under another key",
		"provider", p.Name, "request_id", reqID, "key", events[0].Key, "replay_of", first.key, "traced", first.trace)
	s.m.requests.WithLabelValues(p.Name, "202").Inc()
	answerAccepted(c, out)
	return nil
}

// badSignature counts a signature refusal by its reason and answers 401.
func (s *Server) badSignature(c *gin.Context, p *providers.Provider, err error) error {
	var se *signature.Error
	reason := "invalid"
	if errors.As(err, &se) {
		reason = se.Reason
	}
	s.m.sigFails.WithLabelValues(p.Name, reason).Inc()
	if c.Request.ContentLength != 0 {
		c.Header("Connection", "close") // the body is not read: the connection cannot be reused
	}
	return errorf(http.StatusUnauthorized, CodeBadSignature, err.Error())
}

// selftestAnswer is GET /selftest's body: the report, plus the error code
// and a one-line message when a check failed.
type selftestAnswer struct {
	selftest.Report
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// selftest answers 200 with the report when every check passed, 503 naming
// the failed checks otherwise. The self-test is not cut short when its
// caller goes away (it is bounded by its own timeout): its report may be
// answered to the next caller.
func (s *Server) selftest(c *gin.Context) {
	rep := s.cfg.Selftest.Run(context.WithoutCancel(c.Request.Context()))
	if rep.Status == selftest.Pass {
		c.JSON(http.StatusOK, selftestAnswer{Report: rep})
		return
	}
	s.cfg.Logger.Warn("self-test failed", "failed", rep.Failed, "err", rep.Message())
	c.JSON(http.StatusServiceUnavailable, selftestAnswer{Report: rep, Error: CodeSelftestFailed, Message: rep.Message()})
}

// readBody reads at most MaxBodyBytes. A declared length over the limit is
// refused before a byte is read; a chunked body is cut at limit+1 bytes.
// A declared length sizes the buffer once (io.ReadAll grows from 512
// bytes, copying the body at each step): one allocation for a body of up
// to presizeMax bytes; a larger one grows as its bytes arrive, so that a
// declared length alone does not make ingest allocate.
func (s *Server) readBody(c *gin.Context) ([]byte, error) {
	max := s.cfg.MaxBodyBytes
	if c.Request.ContentLength > max {
		c.Header("Connection", "close")
		return nil, s.bodyTooLarge()
	}
	r := http.MaxBytesReader(c.Writer, c.Request.Body, max)
	var body []byte
	var err error
	if n := c.Request.ContentLength; n >= 0 {
		// One byte more than declared, so that a body longer than its
		// Content-Length is read (and refused by net/http) as before.
		body, err = readFull(r, make([]byte, 0, min(n+1, presizeMax)))
	} else {
		body, err = io.ReadAll(r)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, s.bodyTooLarge()
		}
		return nil, errorf(http.StatusBadRequest, CodeBodyRead, "could not read the body: "+err.Error())
	}
	return body, nil
}

// presizeMax bounds the buffer a declared Content-Length gets before its
// bytes arrived.
const presizeMax = 64 << 10

// readFull reads r to its end into buf, growing it only if r has more than
// its capacity.
func readFull(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (s *Server) bodyTooLarge() *apiError {
	return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("body is over the limit of %d bytes", s.cfg.MaxBodyBytes))
}

// limit takes a token or answers 429 rate_limited with the wait until one
// is free. It serves the provider limits and the per-IP one; what names the
// limit in the message.
func limit(lim *rate.Limiter, now time.Time, what string) *apiError {
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		ae := errorf(http.StatusTooManyRequests, CodeRateLimited, what+" has no burst; check its configuration")
		ae.retryAfter = 1
		return ae
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		ae := errorf(http.StatusTooManyRequests, CodeRateLimited, what+" exceeded, retry after "+d.Round(time.Millisecond).String())
		ae.retryAfter = ceilSeconds(d)
		return ae
	}
	return nil
}

func (s *Server) fail(c *gin.Context, provider string, e *apiError) {
	if e.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(e.retryAfter))
	}
	s.m.requests.WithLabelValues(provider, strconv.Itoa(e.status)).Inc()
	c.AbortWithStatusJSON(e.status, errorBody{Error: e.code, Message: e.message})
}

func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// requestID keeps a caller's X-Request-Id when it is short printable ASCII,
// and makes a new random one otherwise.
func requestID(in string) string {
	if n := len(in); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n; i++ {
			if in[i] < 0x21 || in[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return in
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
