package consume

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// failing is a destination that fails every call with err and keeps the
// traceparent each call was sent.
type failing struct {
	err error
	mu  sync.Mutex
	tps []string
}

func (f *failing) Handle(_ context.Context, d deliver.Delivery) error {
	f.mu.Lock()
	f.tps = append(f.tps, d.Traceparent)
	f.mu.Unlock()
	return f.err
}

func (f *failing) traceparents() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.tps...)
}

// produceTraced writes one ingest record of provider carrying traceparent.
func (f *fakeKafka) produceTraced(t *testing.T, provider, key, traceparent string) {
	t.Helper()
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: f.names.Raw, Partition: 0, Key: []byte(key), Value: []byte(`{"id":"` + key + `"}`)}
	headers.Set(r, headers.Provider, provider)
	headers.Set(r, headers.Origin, headers.OriginIngest)
	headers.SetAttempt(r, 1)
	headers.SetTime(r, headers.ReceivedAt, time.Now())
	headers.Set(r, headers.Traceparent, traceparent)
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// firstRecord reads topic until its first record, read_committed.
func (f *fakeKafka) firstRecord(t *testing.T, topic string) *kgo.Record {
	t.Helper()
	cl := f.client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record on %s within 30s", topic)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

func spanNamed(spans tracetest.SpanStubs, name string) (tracetest.SpanStub, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

// TestTraceContinuesThroughTheRecord: a raw record's traceparent is the
// parent of its process span, the call's client span is under that and its
// context is what the destination is sent, the retry-tier copy carries the
// process span's context, the outcome names the trace, and the span ends
// with its commit.
func TestTraceContinuesThroughTheRecord(t *testing.T) {
	f := newFakeKafka(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(tracing.KeepFailures(sdktrace.ParentBased(sdktrace.AlwaysSample()))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	dest := &failing{err: errors.New("HTTP 503")}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"fastpay": dest}, procOptions{tracer: tracing.NewForTest(tp)})

	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	f.produceTraced(t, "fastpay", "k1", "00-"+traceID+"-"+parentID+"-01")
	waitFor(t, "k1 retrying", func() bool { return count(f.outcomes(t), "k1", outcome.StatusRetrying) == 1 })
	if o := f.outcomes(t)["k1"][0]; o.TraceID != traceID {
		t.Errorf("outcome trace_id %q, want the record's trace %s", o.TraceID, traceID)
	}
	var process, call tracetest.SpanStub
	waitFor(t, "the process span ended", func() bool {
		var ok1, ok2 bool
		process, ok1 = spanNamed(exp.GetSpans(), "process "+f.names.Raw)
		call, ok2 = spanNamed(exp.GetSpans(), "POST")
		return ok1 && ok2
	})
	if process.Parent.SpanID().String() != parentID || process.SpanContext.TraceID().String() != traceID || process.SpanKind != trace.SpanKindConsumer {
		t.Errorf("process span: parent %s, trace %s, kind %v; want parent %s in trace %s, consumer", process.Parent.SpanID(), process.SpanContext.TraceID(), process.SpanKind, parentID, traceID)
	}
	if call.Parent.SpanID() != process.SpanContext.SpanID() || call.SpanKind != trace.SpanKindClient {
		t.Errorf("call span: parent %s kind %v, want the process span %s, client", call.Parent.SpanID(), call.SpanKind, process.SpanContext.SpanID())
	}
	if tps := dest.traceparents(); len(tps) != 1 || tps[0] != "00-"+traceID+"-"+call.SpanContext.SpanID().String()+"-01" {
		t.Errorf("traceparents sent %v, want the call span's", tps)
	}
	committed := false
	for _, e := range process.Events {
		committed = committed || e.Name == "committed"
	}
	if !committed {
		t.Errorf("process span events %v: no committed", process.Events)
	}
	tier := f.firstRecord(t, f.names.Retry[0])
	if got, want := headers.Value(tier, headers.Traceparent), "00-"+traceID+"-"+process.SpanContext.SpanID().String()+"-01"; got != want {
		t.Errorf("retry-tier record traceparent %q, want the process span's %q", got, want)
	}
}

// TestFailureKeptWhenNotSampled: under a parent the sampler dropped, a
// dead-lettered record starts a kept span, sampled, in a trace of its
// own linked to the dropped span; the DLQ copy and the outcome carry
// that trace.
func TestFailureKeptWhenNotSampled(t *testing.T) {
	f := newFakeKafka(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(tracing.KeepFailures(sdktrace.ParentBased(sdktrace.AlwaysSample()))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"fastpay": &failing{err: retry.Permanent(errors.New("HTTP 400"))}}, procOptions{tracer: tracing.NewForTest(tp)})

	const traceID, parentID = "1af7651916cd43dd8448eb211c80319c", "c7ad6b7169203331"
	f.produceTraced(t, "fastpay", "k1", "00-"+traceID+"-"+parentID+"-00") // not sampled upstream
	waitFor(t, "k1 dead", func() bool { return count(f.outcomes(t), "k1", outcome.StatusDead) == 1 })
	var kept tracetest.SpanStub
	waitFor(t, "the kept span", func() bool {
		var ok bool
		kept, ok = spanNamed(exp.GetSpans(), "kept "+f.names.Raw)
		return ok
	})
	if _, ok := spanNamed(exp.GetSpans(), "process "+f.names.Raw); ok {
		t.Error("the dropped process span was exported")
	}
	keptID := kept.SpanContext.TraceID().String()
	if keptID == traceID || len(kept.Links) != 1 || kept.Links[0].SpanContext.TraceID().String() != traceID {
		t.Fatalf("kept span in trace %s with links %v; want a new trace linked to %s", keptID, kept.Links, traceID)
	}
	if o := f.outcomes(t)["k1"][0]; o.TraceID != keptID {
		t.Errorf("outcome trace_id %q, want the kept trace %s", o.TraceID, keptID)
	}
	if got := headers.TraceID(f.firstRecord(t, f.names.DLQ)); got != keptID {
		t.Errorf("DLQ record's trace %q, want the kept trace %s", got, keptID)
	}
}
