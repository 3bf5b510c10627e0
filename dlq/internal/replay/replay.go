package replay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/headers"
)

// producer is what a Replayer needs of a Kafka client: an idempotent
// producer with acks=all.
type producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

var _ producer = (*kgo.Client)(nil)

// Options shape one replay run.
type Options struct {
	// Raw is the topic replays go to (webhooks.raw); Status the resolution
	// topic (webhooks.dlq-status).
	Raw, Status string
	// Rate bounds replays per second; 0 means as fast as the broker
	// acknowledges them.
	Rate float64
	// DryRun builds every record and reports it, producing nothing.
	DryRun bool
	// By and Note go into each `replayed` resolution.
	By, Note string
	// Progress, when set, is called about once a second and once at the end.
	Progress func(Progress)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Progress is how far a run is.
type Progress struct {
	Done, Total int
	Elapsed     time.Duration
	// PerSecond is the rate so far; ETA the time left at that rate (0 when
	// unknown or done).
	PerSecond float64
	ETA       time.Duration
}

// Result is what happened to one entry: where its replay landed, or why it
// was not sent. The JSON form is a line of `dlq replay --json`.
type Result struct {
	Ref      string `json:"ref"`
	Key      string `json:"key"`
	Provider string `json:"provider"`
	// Route is the entry's route, the only one the replay is delivered to.
	Route    string `json:"route"`
	ReplayID string `json:"replay_id"`
	DryRun   bool   `json:"dry_run"`
	Sent     bool   `json:"sent"`
	// Topic, Partition and Offset say where the replay landed on
	// webhooks.raw (Partition and Offset are -1 on a dry run or failure).
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Resolved says the `replayed` resolution was written.
	Resolved bool `json:"resolved"`
	// PreviousResolution is the entry's resolution before this replay.
	PreviousResolution *store.Resolution `json:"previous_resolution,omitempty"`
	// Outcome is the processor's verdict on the replay (done, duplicate,
	// retrying, dead), or "pending" when none arrived in time; only when
	// the replay waited for outcomes.
	Outcome      string `json:"outcome,omitempty"`
	OutcomeError string `json:"outcome_error,omitempty"`
	Error        string `json:"error,omitempty"`

	ref store.Ref
}

// Summary counts a run.
type Summary struct {
	// Failed counts entries with an error: not sent, or sent but not
	// marked replayed.
	Total, Sent, Failed int
	// Interrupted: the context ended before every entry was sent; the
	// entries without a result were not sent.
	Interrupted bool
}

// Replayer produces replays with one idempotent producer.
type Replayer struct {
	prod producer
}

// New returns a Replayer producing with p.
func New(p producer) *Replayer { return &Replayer{prod: p} }

// Run replays entries in order, at most o.Rate per second, and calls emit
// once per entry it attempted (from any goroutine, never concurrently). For each replay
// the broker acknowledged it writes a `replayed` resolution, even when ctx
// ends meanwhile: what was sent is always marked. Run returns after every
// produce it started has been answered; ctx ending stops it from starting
// more (Summary.Interrupted).
func (r *Replayer) Run(ctx context.Context, entries []*store.Entry, o Options, emit func(Result)) Summary {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	var (
		mu   sync.Mutex
		sum  = Summary{Total: len(entries)}
		done int
	)
	out := func(res Result) {
		mu.Lock()
		defer mu.Unlock()
		done++
		if res.Sent {
			sum.Sent++
		}
		if res.Error != "" {
			sum.Failed++
		}
		emit(res)
	}
	start := time.Now()
	progress := func() Progress {
		mu.Lock()
		d := done
		mu.Unlock()
		p := Progress{Done: d, Total: len(entries), Elapsed: time.Since(start)}
		if secs := p.Elapsed.Seconds(); secs > 0 && d > 0 {
			p.PerSecond = float64(d) / secs
			if d < p.Total {
				p.ETA = time.Duration(float64(p.Total-d) / p.PerSecond * float64(time.Second))
			}
		}
		return p
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if o.Progress == nil {
			<-stopProgress
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				o.Progress(progress())
				return
			case <-t.C:
				o.Progress(progress())
			}
		}
	}()

	// Resolutions are written from this goroutine, not from a produce
	// promise, and with a context that outlives ctx: a replay the broker
	// took is marked even if the operator interrupts the run.
	statusCtx := context.WithoutCancel(ctx)
	acked := make(chan Result, len(entries))
	var pending sync.WaitGroup
	go func() {
		for res := range acked {
			rs, err := store.NewResolution(res.ref, store.Replayed, o.Note, o.By, now())
			if err != nil {
				res.Error = "replayed, but the resolution was not written: " + err.Error()
				out(res)
				pending.Done()
				continue
			}
			v, _ := json.Marshal(rs) // plain fields: cannot fail
			r.prod.Produce(statusCtx, store.ResolutionRecord(o.Status, rs, v), func(_ *kgo.Record, err error) {
				if err != nil {
					res.Error = "replayed, but the resolution was not written: " + err.Error()
				} else {
					res.Resolved = true
				}
				out(res)
				pending.Done()
			})
		}
	}()

	var unsent atomic.Int64
	var lim *rate.Limiter
	if o.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(o.Rate), 1)
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				sum.Interrupted = true
				break
			}
		}
		res := Result{
			Ref: e.Ref.String(), Key: e.Key(), Provider: e.Header(headers.Provider), Route: e.Route(), ReplayID: e.Ref.ReplayID(),
			DryRun: o.DryRun, Topic: o.Raw, Partition: -1, Offset: -1, PreviousResolution: e.Resolution, ref: e.Ref,
		}
		rec, err := Record(o.Raw, e)
		switch {
		case err != nil:
			res.Error = err.Error()
			out(res)
			continue
		case o.DryRun:
			out(res)
			continue
		}
		pending.Add(1)
		r.prod.Produce(ctx, rec, func(got *kgo.Record, err error) {
			if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// Never sent: the run was interrupted first.
				unsent.Add(1)
				pending.Done()
				return
			}
			if err != nil {
				res.Error = "produce to " + o.Raw + ": " + err.Error()
				out(res)
				pending.Done()
				return
			}
			res.Sent, res.Partition, res.Offset = true, got.Partition, got.Offset
			acked <- res // buffered for every entry: never blocks a promise
		})
	}
	pending.Wait()
	if unsent.Load() > 0 {
		sum.Interrupted = true
	}
	close(acked)
	close(stopProgress)
	<-progressDone
	mu.Lock()
	defer mu.Unlock()
	return sum
}
