package consume

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// Tracing, when Config.Tracer is on. Each record read (webhooks.raw, a
// retry topic, a lane) gets a consumer span "process <topic>" continuing
// the traceparent on its headers; each route's call a client span "POST"
// under it, whose context goes to the destination as traceparent; the
// record's span ends when its result commits (an event "committed") or is
// dropped. The records it writes carry its context, so the retry tier,
// the next attempt, a lane's release and a replay of its DLQ record
// continue its trace. A failure under a span the sampler dropped starts a
// kept span (tracing.Tracer.Keep) whose trace the records carry instead.

// errAbandoned ends the span of a record whose result was not committed:
// its partition went away or the processor stops; the next owner reads it
// again.
var errAbandoned = errors.New("abandoned: read again by the partition's next owner")

// startProcess starts r's span under the trace context on its headers.
func (p *setup) startProcess(ctx context.Context, r *kgo.Record) (context.Context, trace.Span) {
	tr := p.cfg.Tracer
	ctx = tr.Extract(ctx, r)
	return tr.Start(ctx, "process "+r.Topic, trace.SpanKindConsumer,
		semconv.MessagingSystemKafka, semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(r.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))),
		semconv.MessagingKafkaOffset(int(r.Offset)),
		tracing.AttrIdempotencyKey.String(string(r.Key)),
		tracing.AttrProvider.String(headers.Value(r, headers.Provider)),
		tracing.AttrOrigin.String(headers.Value(r, headers.Origin)),
		tracing.AttrAttempt.String(headers.Value(r, headers.Attempt)),
		tracing.AttrRoute.String(headers.Value(r, headers.Route)))
}

// endSpan ends a record's span (nil: tracing off), committed when err is
// nil.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.AddEvent("committed")
	}
	span.End()
}

// startCall starts the client span of a route's call of r under ctx
// (r's span).
func startCall(ctx context.Context, tr *tracing.Tracer, r *kgo.Record, route, provider string, attempt int) (context.Context, trace.Span) {
	return tr.Start(ctx, http.MethodPost, trace.SpanKindClient,
		semconv.HTTPRequestMethodPost,
		tracing.AttrRoute.String(route),
		tracing.AttrProvider.String(provider),
		tracing.AttrIdempotencyKey.String(string(r.Key)),
		tracing.AttrAttempt.Int(attempt))
}

// endCall ends a call's span with the destination's answer.
func endCall(span trace.Span, err error) {
	var se *deliver.StatusError
	if errors.As(err, &se) {
		span.SetAttributes(semconv.HTTPResponseStatusCode(se.StatusCode))
	} else if err == nil {
		span.SetAttributes(semconv.HTTPResponseStatusCode(http.StatusOK))
	}
	if err != nil {
		span.SetAttributes(tracing.AttrOutcome.String("failed"))
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(tracing.AttrOutcome.String("ok"))
	}
	span.End()
}

// traceSettle names the record's outcomes on its span and returns the
// context its copies carry: the span's, or a kept span's when a call
// failed or a route dead-lettered under a span the sampler dropped.
// errOf is a route's call's error (nil: not called, or a success).
func (p *setup) traceSettle(ctx context.Context, r *kgo.Record, effects []decide.Effect, errOf func(route string) error) context.Context {
	span := trace.SpanFromContext(ctx)
	var failure error
	dead := ""
	for _, e := range effects {
		if e.Kind == decide.ToOutcomes {
			span.AddEvent("outcome", trace.WithAttributes(tracing.AttrRoute.String(e.Route), tracing.AttrOutcome.String(string(e.Status))))
		}
		if e.Kind == decide.ToDLQ {
			dead = e.DeadReason
		}
		if failure == nil && (e.Kind == decide.ToTier || e.Kind == decide.ToDLQ) {
			failure = errOf(e.Route)
		}
	}
	if failure == nil && dead == "" {
		return ctx
	}
	if failure != nil {
		span.SetStatus(codes.Error, failure.Error())
	}
	return p.keep(ctx, r, failure, dead)
}

// keep is tracing.Tracer.Keep for a record that failed (err) or was
// dead-lettered (dead: its reason): the context its copies carry.
func (p *setup) keep(ctx context.Context, r *kgo.Record, err error, dead string) context.Context {
	attrs := []attribute.KeyValue{
		tracing.AttrIdempotencyKey.String(string(r.Key)),
		tracing.AttrProvider.String(headers.Value(r, headers.Provider)),
		tracing.AttrAttempt.String(headers.Value(r, headers.Attempt)),
	}
	if dead != "" {
		attrs = append(attrs, attribute.String("hookline.dead_reason", dead))
	}
	kctx, span := p.cfg.Tracer.Keep(ctx, "kept "+r.Topic, attrs...)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return kctx
}
