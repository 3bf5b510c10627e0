package consume

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// Each stage of the admission chain alone, with hand-written fakes: no
// Kafka, no destination.

type fakeAdmitter struct{ room, asked int }

func (f *fakeAdmitter) Admit(providers.Priority) bool {
	f.asked++
	if f.room == 0 {
		return false
	}
	f.room--
	return true
}

type fakeSlots struct {
	wait  func(ctx context.Context, patient bool) error
	freed int
}

func (f *fakeSlots) Wait(ctx context.Context, _ *admission.Lane, patient bool) error {
	return f.wait(ctx, patient)
}
func (f *fakeSlots) Free(*admission.Lane) { f.freed++ }

// answer is a next stage that answers ok, counting its calls.
func answer(n *int) caller {
	return func(context.Context, *delivery) called {
		*n++
		return called{res: decide.Answered(nil, 0)}
	}
}

func testDelivery(fromLane bool) *delivery {
	return &delivery{
		rec: &callRecord{r: &kgo.Record{Key: []byte("k")}, a: decide.Arrival{FromLane: fromLane}, tok: &recordToken{tokens: make(chan struct{}, 1)}},
		ln:  &lane{adm: admission.NewLane(admission.LaneConfig{Slots: 1, Waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "w"})})},
	}
}

// TestClassShare: a record is admitted once for all its routes' calls; a
// class over its share parks it, uncalled.
func TestClassShare(t *testing.T) {
	adm := &fakeAdmitter{room: 1}
	var n int
	c := classShare(adm)(answer(&n))
	d := testDelivery(false)
	for route := range 2 { // two routes of one record
		if got := c(context.Background(), d); got.res.Kind != decide.ResultCalled {
			t.Fatalf("route %d: %+v, want called", route, got)
		}
	}
	if adm.asked != 1 || !d.rec.admitted || n != 2 {
		t.Fatalf("asked %d, admitted %v, calls %d; want admitted once, both routes called", adm.asked, d.rec.admitted, n)
	}
	got := c(context.Background(), testDelivery(false))
	if got.res.Kind != decide.ResultParked || !errors.Is(got.res.Err, admission.ErrClassShare) || n != 2 {
		t.Fatalf("over its share: %+v, calls %d; want parked for ErrClassShare, not called", got, n)
	}
}

// TestSlot: no slot within the wait parks; ctx ending abandons; a slot is
// freed after the stage below returned; a lane record waits patiently.
func TestSlot(t *testing.T) {
	for _, tt := range []struct {
		name      string
		fromLane  bool
		wait      error
		kind      decide.ResultKind
		abandoned bool
		calls     int
		freed     int
	}{
		{name: "slot", kind: decide.ResultCalled, calls: 1, freed: 1},
		{name: "no room", wait: admission.ErrNoRoom, kind: decide.ResultParked},
		{name: "ctx ended", wait: context.Canceled, abandoned: true},
		{name: "lane record", fromLane: true, kind: decide.ResultCalled, calls: 1, freed: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var patient bool
			sl := &fakeSlots{wait: func(_ context.Context, p bool) error { patient = p; return tt.wait }}
			var n int
			got := slot(sl)(answer(&n))(context.Background(), testDelivery(tt.fromLane))
			if got.abandoned != tt.abandoned || (!tt.abandoned && got.res.Kind != tt.kind) || n != tt.calls || sl.freed != tt.freed {
				t.Fatalf("%+v, calls %d, freed %d; want kind %d abandoned %v, calls %d, freed %d", got, n, sl.freed, tt.kind, tt.abandoned, tt.calls, tt.freed)
			}
			if patient != tt.fromLane {
				t.Errorf("patient %v, want %v (only a lane record waits as long as it takes)", patient, tt.fromLane)
			}
		})
	}
}

// TestDrain: an operator's drain rate is waited for; a ctx ending while
// waiting abandons the call.
func TestDrain(t *testing.T) {
	var n int
	d := testDelivery(false)
	d.ln.drain.Store(rate.NewLimiter(rate.Limit(1), 1))
	if got := drain(answer(&n))(context.Background(), d); got.abandoned || n != 1 {
		t.Fatalf("first call within the burst: %+v, calls %d", got, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := drain(answer(&n))(ctx, d); !got.abandoned || n != 1 {
		t.Fatalf("ctx ended while waiting for the rate: %+v, calls %d; want abandoned, not called", got, n)
	}
}

// TestFinished: a call's record takes its token once the call returned;
// a record not called takes none; a call whose ctx ended while it waited
// for a token is abandoned (the next owner calls again).
func TestFinished(t *testing.T) {
	var n int
	d := testDelivery(false)
	if got := finished(answer(&n))(context.Background(), d); got.abandoned || !d.rec.tok.held {
		t.Fatalf("called: %+v, token held %v; want the token", got, d.rec.tok.held)
	}
	notCalled := func(context.Context, *delivery) called { return parked(admission.ErrNoRoom) }
	d2 := testDelivery(false)
	if got := finished(notCalled)(context.Background(), d2); got.res.Kind != decide.ResultParked || d2.rec.tok.held {
		t.Fatalf("not called: %+v, token held %v; want parked, no token", got, d2.rec.tok.held)
	}
	d3 := testDelivery(false)
	d3.rec.tok.tokens = d.rec.tok.tokens // the pool's one token is d's
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := finished(answer(&n))(ctx, d3); !got.abandoned {
		t.Fatalf("no token and ctx ended: %+v, want abandoned", got)
	}
}

// TestDestinationPaused: a destination paused while the record waited is
// not called.
func TestDestinationPaused(t *testing.T) {
	d := testDelivery(false)
	d.ln.adm.SetPaused(true)
	if got := destination(context.Background(), d); got.res.Kind != decide.ResultParked || !errors.Is(got.res.Err, admission.ErrPaused) {
		t.Fatalf("paused: %+v, want parked for ErrPaused (the lane has no handler: a call would panic)", got)
	}
}

// TestComposeOrder: stages wrap in the order given, the first outermost.
func TestComposeOrder(t *testing.T) {
	var order []string
	mark := func(name string) stage {
		return func(next caller) caller {
			return func(ctx context.Context, d *delivery) called {
				order = append(order, name)
				return next(ctx, d)
			}
		}
	}
	var n int
	compose(answer(&n), mark("a"), mark("b"), mark("c"))(context.Background(), testDelivery(false))
	if len(order) != 3 || order[0] != "a" || order[2] != "c" || n != 1 {
		t.Fatalf("order %v, calls %d; want a b c, then the destination", order, n)
	}
}

// fakeLimiter answers each call's end with its next limit and cut, and
// keeps the samples.
type fakeLimiter struct {
	next              int
	cut               admission.Cut
	started, abandons int
	samples           []admission.Sample
}

func (f *fakeLimiter) Start() admission.Ticket  { f.started++; return admission.Ticket{} }
func (f *fakeLimiter) Abandon(admission.Ticket) { f.abandons++ }
func (f *fakeLimiter) Done(_ admission.Ticket, s admission.Sample) (int, admission.Cut) {
	f.samples = append(f.samples, s)
	return f.next, f.cut
}

// TestLimit: a called record's answer goes to the route's limiter and the
// lane takes the limit it says (its gauge too); a record not called, or
// abandoned, says nothing; a cut is counted by its cause; a fixed route
// (no limiter) is passed through.
func TestLimit(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lim := &fakeLimiter{next: 3, cut: admission.CutOverload}
	d := testDelivery(false)
	d.ln.adm = admission.NewLane(admission.LaneConfig{Slots: 8, Waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "w"})})
	d.ln.limiter, d.ln.limit = lim, prometheus.NewGauge(prometheus.GaugeOpts{Name: "l"})
	cuts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c"}, []string{"cause"})
	d.ln.cuts = map[admission.Cut]prometheus.Counter{}
	for _, c := range admission.Cuts {
		d.ln.cuts[c] = cuts.WithLabelValues(c.String())
	}
	reply := func(c called) caller { return func(context.Context, *delivery) called { return c } }
	stage := limit(func() time.Time { return at })

	busy := retry.RetryAfter(&deliver.StatusError{StatusCode: 429}, 5*time.Second)
	stage(reply(called{res: decide.Answered(busy, 20*time.Millisecond)}))(context.Background(), d)
	want := admission.Sample{Signal: admission.Overloaded, Took: 20 * time.Millisecond, RetryAfter: 5 * time.Second, At: at}
	if len(lim.samples) != 1 || lim.samples[0] != want {
		t.Fatalf("samples %+v, want %+v", lim.samples, want)
	}
	if got := d.ln.adm.Limit(); got != 3 {
		t.Fatalf("lane limit %d, want the limiter's 3", got)
	}
	if got := testutil.ToFloat64(d.ln.limit); got != 3 {
		t.Fatalf("gauge %v, want 3", got)
	}
	if o, l := testutil.ToFloat64(cuts.WithLabelValues("overload")), testutil.ToFloat64(cuts.WithLabelValues("latency")); o != 1 || l != 0 {
		t.Fatalf("cuts: overload %v, latency %v; want 1, 0", o, l)
	}
	stage(reply(parked(admission.ErrNoRoom)))(context.Background(), d)
	stage(reply(called{abandoned: true}))(context.Background(), d)
	if lim.started != 3 || lim.abandons != 2 || len(lim.samples) != 1 {
		t.Fatalf("started %d, abandoned %d, samples %d; want 3, 2, 1", lim.started, lim.abandons, len(lim.samples))
	}

	d.ln.limiter = nil
	var n int
	if got := stage(answer(&n))(context.Background(), d); got.res.Kind != decide.ResultCalled || n != 1 {
		t.Fatalf("fixed route: %+v, calls %d; want called once", got, n)
	}
}

// TestSampleOf: what each answer says of the destination's capacity.
func TestSampleOf(t *testing.T) {
	status := func(code int) error { return &deliver.StatusError{StatusCode: code} }
	for _, tt := range []struct {
		name  string
		err   error
		want  admission.Signal
		after time.Duration
	}{
		{"2xx", nil, admission.Succeeded, 0},
		{"429 with Retry-After", retry.RetryAfter(status(429), time.Minute), admission.Overloaded, time.Minute},
		{"503", status(503), admission.Overloaded, 0},
		{"504", status(504), admission.Overloaded, 0},
		{"408", status(408), admission.Overloaded, 0},
		{"timeout", fmt.Errorf("no answer: %w", context.DeadlineExceeded), admission.Overloaded, 0},
		{"connection refused", errors.New("dial tcp: connection refused"), admission.Overloaded, 0},
		{"500", status(500), admission.Neutral, 0},
		{"400 (permanent)", retry.Permanent(status(400)), admission.Neutral, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := sampleOf(decide.Answered(tt.err, time.Millisecond), time.Time{})
			if s.Signal != tt.want || s.RetryAfter != tt.after || s.Took != time.Millisecond {
				t.Fatalf("%+v, want signal %v, Retry-After %s", s, tt.want, tt.after)
			}
		})
	}
}
