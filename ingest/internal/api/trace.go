package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/tracing"
)

// webhookRoute is the route's template, the server span's name and its
// http.route (OpenTelemetry's HTTP semantic conventions).
const webhookRoute = "/webhooks/{provider}"

// traced opens the request's server span, continuing the provider's
// traceparent when it sent one, and returns what ends it with the
// answer's status. Called only when tracing is on.
func (s *Server) traced(c *gin.Context) func() {
	req := c.Request
	ctx := s.cfg.Tracer.ExtractHTTP(req.Context(), req.Header)
	ctx, span := s.cfg.Tracer.Start(ctx, http.MethodPost+" "+webhookRoute, trace.SpanKindServer,
		semconv.HTTPRequestMethodPost, semconv.HTTPRoute(webhookRoute), semconv.URLPath(req.URL.Path),
		tracing.AttrProvider.String(c.Param("provider")))
	c.Request = req.WithContext(ctx)
	return func() {
		code := c.Writer.Status()
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
		if code >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
		span.End()
	}
}

// traceRecords puts the request span's context on every record, and names
// their keys on the span.
func (s *Server) traceRecords(c *gin.Context, recs []*kgo.Record) {
	ctx := c.Request.Context()
	keys := make([]string, len(recs))
	for i, r := range recs {
		s.cfg.Tracer.Inject(ctx, r)
		keys[i] = string(r.Key)
	}
	span := trace.SpanFromContext(ctx)
	if len(keys) == 1 {
		span.SetAttributes(tracing.AttrIdempotencyKey.String(keys[0]))
	} else {
		span.SetAttributes(tracing.AttrIdempotencyKey.StringSlice(keys))
	}
}
