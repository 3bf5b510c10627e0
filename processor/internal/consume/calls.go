package consume

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// The admission chain. Every call of a destination goes through one chain
// of small stages, each wrapping the next the way middleware does, each
// checking one thing once:
//
//	class share -> slot -> limit -> dead-route watch -> drain -> finished-call token -> the destination
//
// A destination closed when the record was planned (paused, its breaker
// refusing, its queue long) was parked by the plan (decide.Route.Closed),
// so the chain starts where the plan's view of admission ends. A stage
// that does not let the record through returns it not called (parked,
// with the reason) or abandoned; the destination stage answers with the
// destination's own answer. The chain is built once (newChain) and each
// stage can be tested alone.

// called is what became of a route's delivery (decide.Result: called
// with its answer, or not called and why), and whether it was abandoned.
type called struct {
	res decide.Result
	// abandoned says ctx ended (the partition went away or the processor
	// stops) before the call was made or answered: that is no attempt and
	// leaves no trace; the record is read again by the partition's next
	// owner.
	abandoned bool
}

// delivery is one route's call of one record.
type delivery struct {
	rec *callRecord
	ln  *lane
	tr  *tracing.Tracer // nil: tracing off
}

// callRecord is the record its routes' calls share: its admission in its
// class's share, taken once for all of them (several routes' calls run at
// once), and its token of the pool of finished, uncommitted calls.
type callRecord struct {
	r     *kgo.Record
	a     decide.Arrival
	class providers.Priority
	tok   *recordToken
	// eventType is its event_type label (setup.eventTypeLabel).
	eventType string
	// sent are the requests its routes' transforms returned: what their
	// calls send instead of the record's body and headers.
	sent sends
	// trial is the lane whose trial call the record is (item.trial): its
	// destination is called though paused.
	trial *lane

	mu       sync.Mutex
	admitted bool
}

// admit admits the record in its class's share once (adm.Admit); false
// when the class is over its share.
func (c *callRecord) admit(adm classAdmitter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.admitted {
		c.admitted = adm.Admit(c.class)
	}
	return c.admitted
}

// caller calls one route's destination for a record, or says why not.
type caller func(ctx context.Context, d *delivery) called

// stage wraps a caller with one check.
type stage func(next caller) caller

// compose wraps dst in stages, the first outermost.
func compose(dst caller, stages ...stage) caller {
	for i := len(stages) - 1; i >= 0; i-- {
		dst = stages[i](dst)
	}
	return dst
}

// classAdmitter admits a record in its priority class's share of
// HOOKLINE_MAX_PENDING (admission.Budget).
type classAdmitter interface {
	Admit(c providers.Priority) bool
}

// slots hands out a destination's slots (admission.Budget).
type slots interface {
	Wait(ctx context.Context, ln *admission.Lane, patient bool) error
	Free(ln *admission.Lane)
}

var (
	_ classAdmitter = (*admission.Budget)(nil)
	_ slots         = (*admission.Budget)(nil)
)

// newChain is the session's admission chain over its budget's classes
// and its destinations' slots.
func newChain(adm interface {
	classAdmitter
	slots
}) caller {
	return compose(destination, classShare(adm), slot(adm), limit(time.Now), watchDead(time.Now), drain, finished)
}

// parked is a record not called, for why: it waits in its route's lane.
func parked(why error) called { return called{res: decide.ParkedFor(why)} }

// classShare parks a record whose priority class holds its share of
// HOOKLINE_MAX_PENDING while another class needs the rest
// (admission.ErrClassShare); a record is admitted once, by its first
// route's call. A record read from its lane was admitted when the reader
// took it.
func classShare(adm classAdmitter) stage {
	return func(next caller) caller {
		return func(ctx context.Context, d *delivery) called {
			if !d.rec.admit(adm) {
				return parked(admission.ErrClassShare)
			}
			return next(ctx, d)
		}
	}
}

// slot waits for a slot of the destination, and frees it once the call
// below returned. A record that waited admission.ParkAfter is parked
// (admission.ErrNoRoom); a lane record waits as long as it takes (it was
// parked already).
func slot(sl slots) stage {
	return func(next caller) caller {
		return func(ctx context.Context, d *delivery) called {
			if err := sl.Wait(ctx, d.ln.adm, d.rec.a.FromLane); err != nil {
				if errors.Is(err, admission.ErrNoRoom) {
					return parked(err)
				}
				return called{abandoned: true}
			}
			defer sl.Free(d.ln.adm)
			return next(ctx, d)
		}
	}
}

// limit tells the route's limiter (an adaptive route's; a fixed one has
// none) of each call below it and sets the lane's limit to what the
// limiter says after the answer, before the slot is freed: an overload
// answer lowers the limit before the next record waiting for a slot gets
// one. now is the clock of the answers (a Retry-After's date).
func limit(now func() time.Time) stage {
	return func(next caller) caller {
		return func(ctx context.Context, d *delivery) called {
			lim := d.ln.limiter
			if lim == nil {
				return next(ctx, d)
			}
			t := lim.Start()
			c := next(ctx, d)
			if c.abandoned || c.res.Kind != decide.ResultCalled {
				lim.Abandon(t) // not called: says nothing of the destination
				return c
			}
			n, cut := lim.Done(t, sampleOf(c.res, now()))
			if cut != admission.NoCut {
				d.ln.cuts[cut].Inc()
			}
			d.ln.adm.SetLimit(n)
			d.ln.limit.Set(float64(n))
			return c
		}
	}
}

// watchDead tells the route's deadRoute (a route with auto_pause_after)
// of each answered call. now is the clock of the answers.
func watchDead(now func() time.Time) stage {
	return func(next caller) caller {
		return func(ctx context.Context, d *delivery) called {
			c := next(ctx, d)
			if dr := d.ln.dead; dr != nil && !c.abandoned && c.res.Kind == decide.ResultCalled {
				dr.observe(now(), c.res.Err)
			}
			return c
		}
	}
}

// sampleOf is an answered call as the limiter sees it: a 2xx succeeded;
// a 408, 429, 503 or 504, a timeout or a connection error (a retryable
// error without an HTTP status) says the destination is overloaded; any
// other answer (another 4xx or 5xx) says nothing of its capacity.
func sampleOf(res decide.Result, at time.Time) admission.Sample {
	s := admission.Sample{Took: res.Took, At: at}
	if res.Err == nil {
		s.Signal = admission.Succeeded
		return s
	}
	d := retry.Classify(res.Err)
	var se *deliver.StatusError
	switch {
	case !d.Retryable:
		s.Signal = admission.Neutral
	case !errors.As(res.Err, &se):
		s.Signal = admission.Overloaded // no answer: a timeout, a refused or reset connection
	case se.StatusCode == http.StatusRequestTimeout, se.StatusCode == http.StatusTooManyRequests,
		se.StatusCode == http.StatusServiceUnavailable, se.StatusCode == http.StatusGatewayTimeout:
		s.Signal, s.RetryAfter = admission.Overloaded, d.After
	default:
		s.Signal = admission.Neutral
	}
	return s
}

// drain waits for the operator's drain rate, if one is set (package
// control): a token bucket of N/s with a burst of 1 before each call.
func drain(next caller) caller {
	return func(ctx context.Context, d *delivery) called {
		if lim := d.ln.drain.Load(); lim != nil {
			if err := lim.Wait(ctx); err != nil {
				return called{abandoned: true}
			}
		}
		return next(ctx, d)
	}
}

// finished takes the record's token of the session's pool of finished,
// uncommitted calls once its call returned, holding the slot until it has
// one: when transactions fall behind, each destination stops after the
// calls it has in flight, so a crash repeats at most the calls in flight
// plus the pool's records' calls. The token is given back when the result
// commits or is dropped (releaseToken). A slow call holds no token, so it
// holds back no other destination.
func finished(next caller) caller {
	return func(ctx context.Context, d *delivery) called {
		c := next(ctx, d)
		if c.abandoned || c.res.Kind != decide.ResultCalled {
			return c
		}
		if !d.rec.tok.take(ctx) {
			return called{abandoned: true} // called, but the partition went away: the next owner calls again
		}
		return c
	}
}

// destination calls the route's HTTP destination, unless an operator
// paused it while the record waited (parked: a paused destination is
// called by no one but the trial call of an auto-paused route). A call refused by the destination's breaker
// (deliver.ErrCircuitOpen) was not made: parked. A call abandoned by ctx
// (the partition went away, the processor stops) is no attempt and leaves
// no trace.
func destination(ctx context.Context, d *delivery) called {
	ln, r, a := d.ln, d.rec.r, d.rec.a
	if ln.adm.Paused() && d.rec.trial != ln {
		return parked(admission.ErrPaused) // but its trial call (trial.go)
	}
	var span trace.Span
	if d.tr.On() {
		ctx, span = startCall(ctx, d.tr, r, ln.route, a.Provider, a.Attempt)
	}
	dl := deliver.Delivery{
		Key:         string(r.Key),
		Provider:    a.Provider,
		Route:       ln.route,
		EventType:   headers.Value(r, headers.EventType),
		Attempt:     a.Attempt,
		Body:        r.Value,
		ContentType: headers.Value(r, headers.ContentType),
		Headers:     headers.HTTP(r),
	}
	if req := d.rec.sent.of(ln.route); req != nil { // its transform's request
		dl.Body, dl.ContentType, dl.Headers = req.Body, req.ContentType, req.Headers
	}
	if span != nil {
		dl.Traceparent, dl.Tracestate = d.tr.Traceparent(ctx)
	}
	ln.inflight.Inc()
	start := time.Now()
	err := ln.h.Handle(ctx, dl)
	took := time.Since(start)
	if span != nil {
		endCall(span, err)
	}
	ln.inflight.Dec()
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return called{abandoned: true}
	case errors.Is(err, deliver.ErrCircuitOpen):
		return parked(err) // refused by the breaker before any call
	}
	obs.Observe(ctx, ln.handler.WithLabelValues(d.rec.eventType), took.Seconds())
	return called{res: decide.Answered(err, took)}
}
