package tier

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/tracing"
)

// traceMove starts the span of r's time in its tier, from when the
// processor wrote it (its timestamp) to its move, under the trace context
// on r's headers (the failed attempt's), and puts the span's context on
// out, its copy for the raw topic: the next attempt continues it.
func (mv *Mover) traceMove(ctx context.Context, r, out *kgo.Record, tier string) trace.Span {
	tr := mv.cfg.Tracer
	ctx, span := tr.StartAt(tr.Extract(ctx, r), "retry "+r.Topic, trace.SpanKindConsumer, r.Timestamp,
		semconv.MessagingSystemKafka, semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(r.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(r.Partition))),
		semconv.MessagingKafkaOffset(int(r.Offset)),
		tracing.AttrTier.String(tier),
		tracing.AttrIdempotencyKey.String(string(r.Key)),
		tracing.AttrProvider.String(headers.Value(r, headers.Provider)),
		tracing.AttrRoute.String(headers.Value(r, headers.Route)),
		tracing.AttrAttempt.String(headers.Value(r, headers.Attempt)))
	tr.Inject(ctx, out)
	return span
}

// endMove ends a move's span with its produce's answer.
func endMove(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
