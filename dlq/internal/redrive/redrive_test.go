package redrive

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/topics"
)

// TestPassChoosesNothingItMustNot: with the breaker reported open a due
// entry is held (counted), and nothing is sent; a permanent entry, one too
// young, one resolved, one of a provider without redrive and one whose
// chain already used max are never due. (What is due and sent is tested
// against the real services: TestAutoRedrive.)
func TestPassChoosesNothingItMustNot(t *testing.T) {
	names := topics.NewNames("t.", nil)
	ix, err := trace.Open(trace.Options{InMemory: true, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	now := time.Now()
	dead := func(p int32, off int64, provider, reason string, at time.Time, replayOf string) *kgo.Record {
		r := &kgo.Record{Topic: names.DLQ, Key: []byte(provider + ":k"), Partition: p, Offset: off, Timestamp: at}
		headers.Set(r, headers.Provider, provider)
		headers.Set(r, headers.DeadReason, reason)
		if replayOf != "" {
			headers.Set(r, headers.ReplayID, "dlq:"+replayOf)
		}
		return r
	}
	resolved := func(ref store.Ref, by string) *kgo.Record {
		rs, err := store.NewResolution(ref, store.Replayed, "", by, now)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := rs.MarshalJSON()
		return &kgo.Record{Topic: names.DLQStatus, Key: []byte(ref.String()), Value: v, Timestamp: now}
	}
	old := now.Add(-time.Hour)
	recs := []*kgo.Record{
		dead(0, 0, "acme", headers.DeadExhausted, old, ""),     // due: held by the breaker
		dead(0, 1, "acme", headers.DeadPermanent, old, ""),     // permanent
		dead(0, 2, "acme", headers.DeadExhausted, now, ""),     // too young
		dead(0, 3, "acme", headers.DeadExhausted, old, ""),     // resolved by alice
		dead(0, 4, "other", headers.DeadExhausted, old, ""),    // no policy
		dead(1, 0, "bravo", headers.DeadExhausted, old, ""),    // re-driven once ...
		dead(1, 1, "bravo", headers.DeadExhausted, old, "1:0"), // ... and dead again: max 1 used
		resolved(store.Ref{Partition: 0, Offset: 3}, "alice"),
		resolved(store.Ref{Partition: 1, Offset: 0}, By),
	}
	if err := ix.Apply(recs, nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var asked []string
	r := New(Config{
		Policies: map[string]providers.Redrive{"acme": {After: time.Minute, Max: 2}, "bravo": {After: time.Minute, Max: 1}},
		Index:    ix, Names: names, Registry: reg,
		BreakerClosed: func(p, route string) (bool, string) { asked = append(asked, p+"/"+route); return p != "acme", "p1" },
		BeforeWrite:   func(context.Context) error { t.Fatal("a pass with nothing due wrote"); return nil },
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	n, err := r.Pass(t.Context())
	if err != nil || n != 0 {
		t.Fatalf("pass: sent %d, %v; want nothing sent", n, err)
	}
	if got := counter(t, reg, "hookline_dlq_redrive_held_total", "acme"); got != 1 {
		t.Fatalf("held{acme} = %v, want 1 (entry 0:0)", got)
	}
	if got := counter(t, reg, "hookline_dlq_redrives_total", "acme"); got != 0 {
		t.Fatalf("redrives{acme} = %v, want 0", got)
	}
	if len(asked) != 1 || asked[0] != "acme/default" {
		t.Fatalf("breaker asked for %v: only the one due entry should be, for the route default (it has no route)", asked)
	}
	dl, _, _ := ix.DeadLetter("1:1")
	if c, err := r.count(dl); err != nil || c != 1 {
		t.Fatalf("count of 1:1 = %d, %v; want 1 (1:0 re-driven by %s)", c, err, By)
	}
	if got := r.Interval(); got != 15*time.Second {
		t.Fatalf("interval %s, want a quarter of the shortest after (15s)", got)
	}
}

// TestPassHoldsARouteNotItsSiblings: with one route's breaker open, its
// due entries are held and its sibling's are picked (the pass goes on to
// write them: BeforeWrite runs); an entry without a route is the route
// default's.
func TestPassHoldsARouteNotItsSiblings(t *testing.T) {
	names := topics.NewNames("t.", nil)
	ix, err := trace.Open(trace.Options{InMemory: true, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	old := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i, route := range []string{"billing", "crm", ""} {
		r := &kgo.Record{Topic: names.DLQ, Key: []byte("acme:k" + route), Offset: int64(i), Timestamp: old}
		headers.Set(r, headers.Provider, "acme")
		headers.Set(r, headers.DeadReason, headers.DeadExhausted)
		if route != "" {
			headers.Set(r, headers.Route, route)
		}
		recs = append(recs, r)
	}
	if err := ix.Apply(recs, nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	asked := map[string]bool{}
	wrote := errors.New("a pass with due entries writes")
	r := New(Config{
		Policies: map[string]providers.Redrive{"acme": {After: time.Minute, Max: 2}},
		Index:    ix, Names: names, Registry: reg,
		BreakerClosed: func(p, route string) (bool, string) { asked[p+"/"+route] = true; return route != "billing", "p1" },
		BeforeWrite:   func(context.Context) error { return wrote },
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if n, err := r.Pass(t.Context()); !errors.Is(err, wrote) || n != 0 {
		t.Fatalf("pass: %d, %v; want the due entries of crm and default picked, then BeforeWrite's error", n, err)
	}
	if len(asked) != 3 || !asked["acme/billing"] || !asked["acme/crm"] || !asked["acme/default"] {
		t.Fatalf("breakers asked %v, want billing, crm and default", asked)
	}
	if got := counter(t, reg, "hookline_dlq_redrive_held_total", "acme"); got != 1 {
		t.Fatalf("held{acme} = %v, want 1 (billing's entry)", got)
	}
}

// counter reads a counter of reg by name and provider label.
func counter(t *testing.T, reg *prometheus.Registry, name, provider string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" && l.GetValue() == provider {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{provider=%q}", name, provider)
	return 0
}
