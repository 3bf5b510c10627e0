// Package redrive replays exhausted DLQ entries automatically (dlq serve):
// a provider with `redrive: {after, max}` in the providers file has its
// entries with reason exhausted replayed once they are `after` old, at most
// `max` times per entry, and only while no processor reports the breaker
// of the entry's route open (the route default's for an entry without a
// route, and for a report without one). Permanent entries are never
// re-driven. A replay goes to the entry's route only (replay.Record keeps
// hookline.route).
//
// An entry re-driven is marked `replayed` by "auto-redrive" like any replay
// (hookline.replay-id dlq:<ref>, so a replay sent twice, after a crash
// between the send and the mark, is processed once). When the replay fails
// again it leaves a new entry whose replay id names the first: the count
// of an entry is the number of auto-redrive marks up its chain, so `max`
// bounds the re-drives of one delivery, not of each new entry.
package redrive

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/topics"
)

// By is who a re-drive's resolution names.
const By = "auto-redrive"

// maxPerPass bounds the entries one pass replays; the rest wait for the
// next pass.
const maxPerPass = 200

// Config wires a Redriver; every field is required unless noted.
type Config struct {
	// Policies are the providers' redrive blocks, by provider name.
	Policies map[string]providers.Redrive
	Index    *trace.Index
	Store    *store.Store
	Replayer *replay.Replayer
	Names    topics.Names
	// BreakerClosed reports whether no processor's breaker of a route's
	// destination is open (control.Breakers.ClosedRoute), naming an
	// instance that reports it open when not.
	BreakerClosed func(provider, route string) (bool, string)
	// BeforeWrite runs before a pass writes (creates webhooks.dlq-status).
	BeforeWrite func(context.Context) error
	Registry    prometheus.Registerer
	Logger      *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Redriver runs passes.
type Redriver struct {
	cfg    Config
	sent   *prometheus.CounterVec
	held   *prometheus.CounterVec
	failed *prometheus.CounterVec
}

// New returns a Redriver and registers its counters:
// hookline_dlq_redrives_total{provider} (replays sent and marked),
// hookline_dlq_redrive_held_total{provider} (due entries held back by an
// open breaker of their route, per pass; the route is in the log line) and hookline_dlq_redrive_errors_total{provider}.
func New(cfg Config) *Redriver {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Redriver{cfg: cfg,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookline_dlq_redrives_total",
			Help: "DLQ entries re-driven automatically (replayed and marked replayed by auto-redrive)."}, []string{"provider"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookline_dlq_redrive_held_total",
			Help: "Due re-drives held back because a processor reported the breaker of the entry's route open (counted per pass)."}, []string{"provider"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookline_dlq_redrive_errors_total",
			Help: "Re-drives that could not be sent or marked."}, []string{"provider"}),
	}
	cfg.Registry.MustRegister(r.sent, r.held, r.failed)
	for name := range cfg.Policies {
		r.sent.WithLabelValues(name)
		r.held.WithLabelValues(name)
		r.failed.WithLabelValues(name)
	}
	return r
}

// Interval is how often Run passes: a quarter of the shortest `after`,
// between 1 s and 1 min.
func (r *Redriver) Interval() time.Duration {
	iv := time.Minute
	for _, p := range r.cfg.Policies {
		iv = min(iv, p.After/4)
	}
	return max(iv, time.Second)
}

// Run passes every Interval until ctx ends.
func (r *Redriver) Run(ctx context.Context) {
	if len(r.cfg.Policies) == 0 {
		return
	}
	t := time.NewTicker(r.Interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("auto-redrive pass failed; trying again at the next", "err", err, "redriven", n)
		}
	}
}

// due is one entry to re-drive, with its count so far.
type due struct {
	dl    trace.DeadLetter
	count int
	max   int
}

// Pass re-drives every entry due now (at most maxPerPass) and returns how
// many it sent.
func (r *Redriver) Pass(ctx context.Context) (int, error) {
	now := r.cfg.Now()
	var picks []due
	heldBy := map[string]string{} // provider/route -> an instance that holds it
	err := r.cfg.Index.DeadLetters(ctx, func(dl trace.DeadLetter, rs *store.Resolution) bool {
		pol, ok := r.cfg.Policies[dl.Provider]
		if !ok || dl.Reason != headers.DeadExhausted || rs != nil || now.Sub(dl.At) < pol.After {
			return true
		}
		n, err := r.count(dl)
		if err != nil {
			r.cfg.Logger.Warn("auto-redrive: cannot count the re-drives of an entry; skipped", "ref", dl.Ref, "err", err)
			return true
		}
		if n >= pol.Max {
			return true
		}
		route := control.RouteOr(dl.Route)
		if ok, inst := r.cfg.BreakerClosed(dl.Provider, route); !ok {
			heldBy[dl.Provider+"/"+route] = inst
			r.held.WithLabelValues(dl.Provider).Inc()
			return true
		}
		picks = append(picks, due{dl: dl, count: n, max: pol.Max})
		return len(picks) < maxPerPass
	})
	if err != nil {
		return 0, err
	}
	for _, pr := range sortedKeys(heldBy) {
		provider, route, _ := strings.Cut(pr, "/")
		r.cfg.Logger.Info("auto-redrive held: the route's breaker is open", "provider", provider, "route", route, "instance", heldBy[pr])
	}
	if len(picks) == 0 {
		return 0, nil
	}
	if err := r.cfg.BeforeWrite(ctx); err != nil {
		return 0, err
	}
	sent := 0
	for _, p := range picks {
		if err := r.one(ctx, p); err != nil {
			r.failed.WithLabelValues(p.dl.Provider).Inc()
			r.cfg.Logger.Warn("auto-redrive failed", "ref", p.dl.Ref, "key", p.dl.Key, "provider", p.dl.Provider, "route", control.RouteOr(p.dl.Route), "err", err)
			if ctx.Err() != nil {
				return sent, ctx.Err()
			}
			continue
		}
		sent++
		r.sent.WithLabelValues(p.dl.Provider).Inc()
		r.cfg.Logger.Info("auto-redrive sent", "ref", p.dl.Ref, "key", p.dl.Key, "provider", p.dl.Provider, "route", control.RouteOr(p.dl.Route), "redrive", p.count+1, "max", p.max)
	}
	return sent, nil
}

// one replays one entry (read afresh, with its resolution: one resolved
// since the index saw it is left alone) and marks it.
func (r *Redriver) one(ctx context.Context, p due) error {
	ref, err := store.ParseRef(p.dl.Ref)
	if err != nil {
		return err
	}
	e, err := r.cfg.Store.Get(ctx, ref)
	if err != nil {
		return err
	}
	if e.Resolved() {
		return nil
	}
	var res replay.Result
	sum := r.cfg.Replayer.Run(ctx, []*store.Entry{e}, replay.Options{
		Raw: r.cfg.Names.Raw, Status: r.cfg.Names.DLQStatus, By: By,
		Note: fmt.Sprintf("auto-redrive %d of %d (redrive.after passed, breaker closed)", p.count+1, p.max),
		Now:  r.cfg.Now,
	}, func(got replay.Result) { res = got })
	if sum.Failed > 0 || sum.Sent == 0 || !res.Resolved {
		return fmt.Errorf("replay of %s: sent %v, marked %v: %s", p.dl.Ref, res.Sent, res.Resolved, res.Error)
	}
	return nil
}

// count is how many times the entry's delivery was re-driven already: the
// auto-redrive marks up its chain of replay ids.
func (r *Redriver) count(dl trace.DeadLetter) (int, error) {
	n := 0
	for depth := 0; dl.ReplayID != "" && depth < 100; depth++ {
		parent, ok := strings.CutPrefix(dl.ReplayID, "dlq:")
		if !ok {
			break
		}
		rs, err := r.cfg.Index.Resolution(parent)
		if err != nil {
			return 0, err
		}
		if rs != nil && rs.By == By {
			n++
		}
		next, found, err := r.cfg.Index.DeadLetter(parent)
		if err != nil || !found {
			return n, err
		}
		dl = next
	}
	return n, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
