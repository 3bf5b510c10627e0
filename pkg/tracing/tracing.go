// Package tracing is hookline's OpenTelemetry tracing: the tracer a
// service gets from the standard OTEL_* environment variables (Setup),
// W3C trace context on Kafka record headers and HTTP headers (Inject,
// Extract), and the rule that keeps failures when sampling drops them
// (Keep).
//
// Tracing is off unless the environment names an exporter or an OTLP
// endpoint (docs/operating.md, Tracing; Read, Settings.On). Off, Setup returns nil, and every
// method of a nil *Tracer does nothing and allocates nothing: callers on a
// hot path test On() before they build attributes.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/headers"
)

// Attributes of hookline's own, beside OpenTelemetry's semantic
// conventions for HTTP and messaging.
const (
	AttrProvider       = attribute.Key("hookline.provider")
	AttrRoute          = attribute.Key("hookline.route")
	AttrIdempotencyKey = attribute.Key("hookline.idempotency_key")
	AttrAttempt        = attribute.Key("hookline.attempt")
	AttrOutcome        = attribute.Key("hookline.outcome")
	AttrOrigin         = attribute.Key("hookline.origin")
	AttrTier           = attribute.Key("hookline.tier")
	// AttrKept marks a span started by Keep: a failure whose trace the
	// head sampler dropped, kept in a trace of its own linked to it.
	AttrKept = attribute.Key("hookline.kept")
)

// Tracer starts hookline's spans and carries their context across Kafka
// and HTTP. A nil *Tracer is tracing off: every method is a no-op.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	t    trace.Tracer
	prop propagation.TraceContext
}

// Settings are the standard OpenTelemetry variables hookline reads
// itself (Read); the exporter reads the rest of OTEL_EXPORTER_OTLP_*
// (headers, timeout, TLS) and the batcher OTEL_BSP_* from the process's
// environment.
type Settings struct {
	Disabled       bool   // OTEL_SDK_DISABLED
	Exporter       string // OTEL_TRACES_EXPORTER: "", otlp or none
	Endpoint       string // OTEL_EXPORTER_OTLP_ENDPOINT
	TracesEndpoint string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	Protocol       string // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL
	Sampler        sdktrace.Sampler
	ServiceName    string // OTEL_SERVICE_NAME
}

// On reports whether the settings ask for traces: not OTEL_SDK_DISABLED,
// not OTEL_TRACES_EXPORTER=none, and an exporter or an OTLP endpoint
// named.
func (s Settings) On() bool {
	switch {
	case s.Disabled, s.Exporter == "none":
		return false
	case s.Exporter == "":
		return s.Endpoint != "" || s.TracesEndpoint != ""
	}
	return true
}

// Read reads the tracing settings with r, recording a wrong value as r
// does any other (so a service names it at start with the rest).
func Read(r *envconf.Reader) Settings {
	s := Settings{
		Disabled:       r.Bool("OTEL_SDK_DISABLED", false),
		Exporter:       r.String("OTEL_TRACES_EXPORTER", ""),
		Endpoint:       r.String("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
		TracesEndpoint: r.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
		ServiceName:    r.String("OTEL_SERVICE_NAME", ""),
	}
	bad := func(name, value, want string) { r.Add(&envconf.Error{Name: name, Value: value, Want: want}) }
	if s.Exporter != "" && s.Exporter != "otlp" && s.Exporter != "none" {
		bad("OTEL_TRACES_EXPORTER", s.Exporter, "otlp or none (hookline exports traces by OTLP only)")
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v := r.String(name, ""); v != "" {
			if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(name, v, "an http(s) URL, such as http://collector:4318")
			}
		}
	}
	proto := r.String("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if tp := r.String("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", ""); tp != "" {
		if tp != "http/protobuf" && tp != "grpc" {
			bad("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", tp, "http/protobuf or grpc")
		}
		s.Protocol = tp
	} else {
		s.Protocol = proto
	}
	if proto != "" && proto != "http/protobuf" && proto != "grpc" {
		bad("OTEL_EXPORTER_OTLP_PROTOCOL", proto, "http/protobuf or grpc")
	}
	name, arg := r.String("OTEL_TRACES_SAMPLER", ""), r.String("OTEL_TRACES_SAMPLER_ARG", "")
	ratio := 1.0
	if arg != "" {
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			bad("OTEL_TRACES_SAMPLER_ARG", arg, "a ratio from 0 to 1, such as 0.01")
		} else {
			ratio = f
		}
	}
	switch name {
	case "", "parentbased_always_on":
		s.Sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "always_on":
		s.Sampler = sdktrace.AlwaysSample()
	case "always_off":
		s.Sampler = sdktrace.NeverSample()
	case "parentbased_always_off":
		s.Sampler = sdktrace.ParentBased(sdktrace.NeverSample())
	case "traceidratio":
		s.Sampler = sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_traceidratio":
		s.Sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	default:
		bad("OTEL_TRACES_SAMPLER", name, "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
	}
	return s
}

// Setup returns the tracer of service (ingest, processor, retrier)
// configured by s, or nil when s asks for no traces (Settings.On).
//
// On, spans go by OTLP over http/protobuf (the default) or grpc to the
// endpoint (the exporter's default, localhost, when none is named), in
// batches. The sampler is s.Sampler (default parentbased_always_on), and
// spans that Keep starts are always sampled. service.name is
// OTEL_SERVICE_NAME, else hookline-<service>; OTEL_RESOURCE_ATTRIBUTES
// adds to the resource.
func Setup(ctx context.Context, service string, s Settings) (*Tracer, error) {
	if !s.On() {
		return nil, nil
	}
	exp, err := exporter(ctx, s)
	if err != nil {
		return nil, err
	}
	name := s.ServiceName
	if name == "" {
		name = "hookline-" + service
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(name)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	sampler := s.Sampler
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(KeepFailures(sampler)))
	return &Tracer{tp: tp, t: tp.Tracer("github.com/hookline/hookline/" + service)}, nil
}

// NewForTest returns a tracer over tp, for tests that record spans
// in memory.
func NewForTest(tp *sdktrace.TracerProvider) *Tracer {
	return &Tracer{tp: tp, t: tp.Tracer("test")}
}

func exporter(ctx context.Context, s Settings) (sdktrace.SpanExporter, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	// The endpoint is passed on from s, which a test may have read from
	// its own environment rather than the process's.
	traces, base := s.TracesEndpoint, strings.TrimSuffix(s.Endpoint, "/")
	switch s.Protocol {
	case "grpc":
		var opts []otlptracegrpc.Option
		if traces == "" {
			traces = base
		}
		if traces != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(traces))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default: // http/protobuf
		var opts []otlptracehttp.Option
		if traces != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(traces))
		} else if base != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(base+"/v1/traces"))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	return exp, nil
}

// KeepFailures is the sampler Setup installs: next's decisions, and every
// span Keep starts sampled. Tests build their tracer provider with it.
func KeepFailures(next sdktrace.Sampler) sdktrace.Sampler { return keepSampler{next} }

// keepSampler samples what the configured sampler samples, and every span
// started with AttrKept (Keep).
type keepSampler struct{ next sdktrace.Sampler }

func (k keepSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == AttrKept {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
		}
	}
	return k.next.ShouldSample(p)
}

func (k keepSampler) Description() string { return "KeepFailures{" + k.next.Description() + "}" }

// On reports whether tracing is on.
func (t *Tracer) On() bool { return t != nil }

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Start starts a span named name of kind under ctx's span. Off, it
// returns ctx and the no-op span of ctx.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// StartAt is Start with the span's start time at: a span for a wait
// that began before this process saw it (a record's time in a tier).
func (t *Tracer) StartAt(ctx context.Context, name string, kind trace.SpanKind, at time.Time, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithTimestamp(at), trace.WithAttributes(attrs...))
}

// Keep is the rule that keeps failures when sampling is on: the head
// sampler decides when a delivery arrives and cannot know how it ends, so
// when a call fails or a record is dead-lettered under a span the sampler
// dropped, Keep starts a sampled span named name in a new trace, linked to
// the dropped one, and returns its context: what follows (the retry tier,
// the next attempt, the DLQ record) continues that trace. Under a sampled
// span, or off, it returns ctx and a no-op span of its own, so the caller
// ends what it gets either way.
func (t *Tracer) Keep(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	sc := trace.SpanContextFromContext(ctx)
	if t == nil || sc.IsSampled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	attrs = append(attrs, AttrKept.Bool(true))
	return t.t.Start(ctx, name, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc}),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// TraceID is the id of ctx's trace when its span is sampled (exported),
// else "": what outcomes and exemplars name.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// Inject puts ctx's trace context on r as the traceparent and tracestate
// headers (W3C Trace Context), replacing any r had. Off, or without a
// span, it leaves r as it is.
func (t *Tracer) Inject(ctx context.Context, r *kgo.Record) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	headers.Delete(r, headers.Traceparent)
	headers.Delete(r, headers.Tracestate)
	t.prop.Inject(ctx, recordCarrier{r})
}

// Extract returns ctx with the remote span context of r's traceparent
// header; ctx when r has none or tracing is off.
func (t *Tracer) Extract(ctx context.Context, r *kgo.Record) context.Context {
	if t == nil {
		return ctx
	}
	return t.prop.Extract(ctx, recordCarrier{r})
}

// InjectHTTP sets traceparent (and tracestate) on h from ctx.
func (t *Tracer) InjectHTTP(ctx context.Context, h http.Header) {
	if t == nil {
		return
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractHTTP returns ctx with the remote span context of h's
// traceparent header.
func (t *Tracer) ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if t == nil {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// Traceparent is ctx's trace context as the traceparent and tracestate
// header values; empty off or without a span.
func (t *Tracer) Traceparent(ctx context.Context) (parent, state string) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	return c[headers.Traceparent], c[headers.Tracestate]
}

// recordCarrier is a Kafka record's headers as a TextMapCarrier.
type recordCarrier struct{ r *kgo.Record }

func (c recordCarrier) Get(key string) string { return headers.Value(c.r, key) }

func (c recordCarrier) Set(key, value string) { headers.Set(c.r, key, value) }

func (c recordCarrier) Keys() []string {
	keys := make([]string, len(c.r.Headers))
	for i, h := range c.r.Headers {
		keys[i] = h.Key
	}
	return keys
}

// Flush is Shutdown for a service's last step: up to 5 s to export what
// is left, its error logged.
func (t *Tracer) Flush(log interface{ Warn(string, ...any) }) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not exported", "err", err)
	}
}
