package tracing

import (
	"context"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/headers"
)

func settings(t *testing.T, env map[string]string) Settings {
	t.Helper()
	r := envconf.New(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	s := Read(r)
	if err := r.Err(); err != nil {
		t.Fatalf("%v: %v", env, err)
	}
	return s
}

func TestSetupOffByDefault(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
		{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},
	} {
		tr, err := Setup(context.Background(), "ingest", settings(t, env))
		if err != nil || tr != nil {
			t.Errorf("%v: got %v, %v; want off (nil, nil)", env, tr, err)
		}
	}
}

func TestSetupOn(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		tr, err := Setup(context.Background(), "processor", settings(t, map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": proto}))
		if err != nil || !tr.On() {
			t.Fatalf("%s: got %v, %v; want on", proto, tr, err)
		}
		ctx, span := tr.Start(context.Background(), "x", trace.SpanKindInternal)
		if TraceID(ctx) == "" {
			t.Errorf("%s: the default sampler (parentbased_always_on) did not sample a root span", proto)
		}
		span.End()
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing listens: do not wait for the export
		_ = tr.Shutdown(ctx)
	}
}

func TestNilTracerIsOff(t *testing.T) {
	var tr *Tracer
	r := &kgo.Record{}
	ctx, span := tr.Start(context.Background(), "x", trace.SpanKindServer)
	tr.Inject(ctx, r)
	span.End()
	if tr.On() || len(r.Headers) != 0 || TraceID(ctx) != "" {
		t.Errorf("off: On %v, headers %v, trace id %q; want false, none, empty", tr.On(), r.Headers, TraceID(ctx))
	}
}

// newTest is a tracer sampling at ratio 0 (nothing but kept spans), or
// always, recording in memory.
func newTest(t *testing.T, sampler sdktrace.Sampler) (*Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(keepSampler{sampler}))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return NewForTest(tp), exp
}

func TestRecordAndHTTPCarry(t *testing.T) {
	tr, _ := newTest(t, sdktrace.AlwaysSample())
	ctx, span := tr.Start(context.Background(), "ingest", trace.SpanKindServer)
	defer span.End()
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: headers.Traceparent, Value: []byte("00-0123456789abcdef0123456789abcdef-0123456789abcdef-01")}}}
	tr.Inject(ctx, r)
	n := 0
	for _, h := range r.Headers {
		if h.Key == headers.Traceparent {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("traceparent headers: %d, want 1 (replaced)", n)
	}
	got := trace.SpanContextFromContext(tr.Extract(context.Background(), r))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Errorf("from the record: %v, want the span's context %v, remote", got, span.SpanContext())
	}
	h := http.Header{}
	tr.InjectHTTP(ctx, h)
	parent, _ := tr.Traceparent(ctx)
	if h.Get("Traceparent") != parent || parent == "" {
		t.Errorf("HTTP traceparent %q, Traceparent() %q; want equal, set", h.Get("Traceparent"), parent)
	}
	if got := trace.SpanContextFromContext(tr.ExtractHTTP(context.Background(), h)); got.TraceID() != span.SpanContext().TraceID() {
		t.Errorf("from HTTP: trace %v, want %v", got.TraceID(), span.SpanContext().TraceID())
	}
}

func TestKeep(t *testing.T) {
	tr, exp := newTest(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	ctx, span := tr.Start(context.Background(), "process", trace.SpanKindConsumer)
	if TraceID(ctx) != "" {
		t.Fatal("the sampler sampled: the test needs a dropped span")
	}
	kctx, kept := tr.Keep(ctx, "kept")
	kept.End()
	span.End()
	ks := trace.SpanContextFromContext(kctx)
	if !ks.IsSampled() || ks.TraceID() == span.SpanContext().TraceID() || TraceID(kctx) == "" {
		t.Fatalf("kept span %v: want sampled, in a new trace", ks)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || len(spans[0].Links) != 1 || spans[0].Links[0].SpanContext.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("exported %d spans (%v), want the kept one, linked to the dropped span", len(spans), spans)
	}
	// What follows the kept span (the next attempt) is sampled too.
	cctx, child := tr.Start(kctx, "next attempt", trace.SpanKindConsumer)
	child.End()
	if TraceID(cctx) != ks.TraceID().String() {
		t.Errorf("the next attempt's trace %q, want the kept one %v", TraceID(cctx), ks.TraceID())
	}

	// Under a sampled span, Keep keeps nothing new.
	tr2, exp2 := newTest(t, sdktrace.AlwaysSample())
	ctx2, span2 := tr2.Start(context.Background(), "process", trace.SpanKindConsumer)
	kctx2, kept2 := tr2.Keep(ctx2, "kept")
	kept2.End()
	span2.End()
	if kctx2 != ctx2 || len(exp2.GetSpans()) != 1 {
		t.Errorf("under a sampled span: Keep changed the context or exported %d spans, want the one", len(exp2.GetSpans()))
	}
}

// BenchmarkRecordPath is what the processor does per record and call
// with tracing: continue the record's context, a consumer span, a client
// span with its traceparent, the context onto a copy, the outcome's
// trace id. Off (a nil Tracer, no OTEL_* set) against on with the span
// dropped (1 % sampling's usual case) and sampled (to a sink that drops
// what it is given: the export is not counted).
func BenchmarkRecordPath(b *testing.B) {
	on := func(s sdktrace.Sampler) *Tracer {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(KeepFailures(s)), sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return NewForTest(tp)
	}
	for _, bc := range []struct {
		name string
		tr   *Tracer
	}{
		{"off", nil},
		{"on-dropped", on(sdktrace.NeverSample())},
		{"on-sampled", on(sdktrace.AlwaysSample())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := &kgo.Record{Headers: []kgo.RecordHeader{{Key: headers.Provider, Value: []byte("stripe")},
				{Key: headers.Traceparent, Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}}}
			b.ReportAllocs()
			for b.Loop() {
				tr := bc.tr
				ctx := context.Background()
				var span trace.Span
				if tr.On() {
					ctx, span = tr.Start(tr.Extract(ctx, in), "process webhooks.raw", trace.SpanKindConsumer)
					cctx, call := tr.Start(ctx, "POST", trace.SpanKindClient)
					_, _ = tr.Traceparent(cctx)
					call.End()
					out := &kgo.Record{Headers: append([]kgo.RecordHeader(nil), in.Headers...)}
					tr.Inject(ctx, out)
					_ = TraceID(ctx)
					span.End()
				}
				_ = TraceID(ctx) // what obs.Observe asks on every observation
			}
		})
	}
}
