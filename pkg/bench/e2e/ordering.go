package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// The ordered provider of phases 5 to 7 (issue 24): generic, keyed by the
// body's id, its entity the body's /entity.
const ordered = "ordpay"

// Timeline phases of the ordered keys (isolation.Timeline).
const (
	ordSteady  = "ordered"          // phase 6: 202 -> call, no failure
	ordFailing = "ordered, failing" // phase 7: the other entities' keys
	ordHeld    = "ordered, held"    // phase 7: the failing entity's keys
)

// MaxOrderedP99 is issue 24's target for phase 5: an ordered route over
// 10,000 entities at half load, 202 -> done outcome.
const MaxOrderedP99 = 100 * time.Millisecond

// orderedProvider is ordpay's providers-file entry, to destURL.
func orderedProvider(destURL, secretEnv string) string {
	return fmt.Sprintf("  %s:\n    preset: generic\n    secret_env: [%s]\n"+
		"    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}\n"+
		"    idempotency_key: {json: /id}\n    event_type: {json: /type}\n    ordering: {json: /entity}\n"+
		"    destination: {url: %q, timeout: 5s}\n", ordered, secretEnv, destURL)
}

// entities is an ordered phase's load: post i is event i/n+1 of entity
// c<i%n>, so each entity's events are posted in sequence order. fail
// names the entity whose 3rd event's first two calls fail (-1: none).
type entities struct {
	n    int
	fail int
}

// body is post i's JSON head (the padding and closing follow) and the
// timeline phase its key counts in.
func (e *entities) body(id string, i int, iso string) (head, phase string) {
	ent, seq := i%e.n, i/e.n+1
	if ent == e.fail && iso != "" {
		iso = ordHeld
	}
	return fmt.Sprintf(`{"id":%q,"type":"order.updated","entity":"c%05d","seq":%d,"pad":"`, id, ent, seq), iso
}

// failing reports whether key is the failing entity's 3rd event in its
// phase (ph); its first two calls get a 503.
func (e *entities) failing(ph *phase, key string) bool {
	if e.fail < 0 {
		return false
	}
	return key == ordered+":"+postID(ph, 2*e.n+e.fail)
}

// orderingReport is what phases 5 to 7 measured.
type orderingReport struct {
	HalfLoad  phaseReport       // phase 5: 10,000 entities at phase 2's rate, its rounds pooled
	Unordered phaseReport       // phase 2, the baseline of phase 5, its rounds pooled
	Rounds    []halfRound       // phases 2 and 5, round by round (halfload.go)
	Steady    isolation.Summary // phase 6: 202 -> call, no failure
	Failing   isolation.Summary // phase 7: the other entities
	Held      isolation.Summary // phase 7: the failing entity
	Rate      float64           // phases 6 and 7's events/s
	Entities  int               // phases 6 and 7's entities
}

// ordering takes phase 5's rounds (run with phase 2's, halfLoad: an
// ordered route over OrdEntities entities at phase 2's rate, 202 -> done
// outcome against MaxOrderedP99) and runs phases 6 and 7 (issue 24's acceptance: OrdFailEntities entities at
// OrdRate for OrdDur, without, then with one entity's 3rd event failing
// twice; the other entities' 202 -> call p99 with the failure against
// without, same run).
func (b *bench) ordering(ctx context.Context, rounds []halfRound, unordered phaseReport) (orderingReport, error) {
	c := b.cfg
	rep := orderingReport{Rate: c.OrdRate, Entities: c.OrdFailEntities, Unordered: unordered, Rounds: rounds}
	ords := make([]phaseReport, len(rounds))
	for i, h := range rounds {
		ords[i] = h.Ordered
	}
	rep.HalfLoad = pooled("ordered, half load", ords)
	fmt.Fprintf(b.out, "phase 6: ordered, %d entities, %.0f events/s for %s ...\n", c.OrdFailEntities, c.OrdRate, c.OrdDur)
	p6 := &phase{name: "ordered steady", provider: ordered, iso: ordSteady, ents: &entities{n: c.OrdFailEntities, fail: -1}}
	if err := b.paced(ctx, c.OrdDur, paced{p6, c.OrdRate}); err != nil {
		return rep, err
	}
	fmt.Fprintf(b.out, "phase 7: the same, entity c%05d's 3rd event failing twice (tiers %s) ...\n", 7, b.tiers)
	p7 := &phase{name: "ordered failing", provider: ordered, iso: ordFailing, ents: &entities{n: c.OrdFailEntities, fail: 7}}
	b.dest.failing(func(key string) bool { return p7.ents.failing(p7, key) })
	if err := b.paced(ctx, c.OrdDur, paced{p7, c.OrdRate}); err != nil {
		return rep, err
	}
	rep.Steady, rep.Failing, rep.Held = b.tl.Summary(ordSteady, ordered), b.tl.Summary(ordFailing, ordered), b.tl.Summary(ordHeld, ordered)
	if rep.Held.Keys > 0 && rep.Held.Calls < rep.Held.Keys+2 {
		return rep, fmt.Errorf("phase 7: the failing entity's %d keys had %d calls: want its 3rd event's two failures on top", rep.Held.Keys, rep.Held.Calls)
	}
	return rep, nil
}

// Ratio is the other entities' p99 202 -> call with one entity failing
// over the same without.
func (r orderingReport) Ratio() float64 {
	return float64(r.Failing.P99) / float64(max(r.Steady.P99, time.Microsecond))
}

// check says which of issue 24's targets the run missed.
func (r orderingReport) check() error {
	var errs []error
	if p99 := loadtest.Percentile(r.HalfLoad.Total, 99); p99 > MaxOrderedP99 {
		errs = append(errs, fmt.Errorf("phase 5: p99 %.1f ms, want ≤ %s", ms(p99), MaxOrderedP99))
	}
	if r.Ratio() > isolation.MaxRatio {
		errs = append(errs, fmt.Errorf("phase 7: the other entities' p99 is %.2f× phase 6's, want ≤ %.0f×", r.Ratio(), isolation.MaxRatio))
	}
	for i, h := range r.Rounds {
		if x := h.p99Ratio(); x > MaxOrderedP99Ratio {
			errs = append(errs, fmt.Errorf("phase 5, round %d: p99 %.2f× phase 2's, want ≤ %.1f×", i+1, x, MaxOrderedP99Ratio))
		}
	}
	return errors.Join(errs...)
}

func (r orderingReport) String() string {
	var s strings.Builder
	h := r.HalfLoad
	fmt.Fprintf(&s, "ordering (issue 24): %s, %d rounds pooled, %d events at %.0f/s: 202 -> done outcome p50 %.1f ms, p99 %.1f ms (target ≤ %s; phase 2, unordered, p50 %.1f ms, p99 %.1f ms)\n",
		h.Name, len(r.Rounds), h.Events, h.PostRate, ms(loadtest.Percentile(h.Total, 50)), ms(loadtest.Percentile(h.Total, 99)), MaxOrderedP99,
		ms(loadtest.Percentile(r.Unordered.Total, 50)), ms(loadtest.Percentile(r.Unordered.Total, 99)))
	fmt.Fprintf(&s, "  %d entities at %.0f/s; %-30s %6s %7s %6s %10s %10s %10s\n", r.Entities, r.Rate, "202 -> destination call", "keys", "called", "calls", "p50 ms", "p99 ms", "max ms")
	for _, row := range []struct {
		name string
		s    isolation.Summary
	}{{"steady (phase 6)", r.Steady}, {"others, one failing (phase 7)", r.Failing}, {"the failing entity (phase 7)", r.Held}} {
		fmt.Fprintf(&s, "  %-50s %6d %7d %6d %10.1f %10.1f %10.1f\n", row.name, row.s.Keys, row.s.Called, row.s.Calls, ms(row.s.P50), ms(row.s.P99), ms(row.s.Max))
	}
	verdict := "targets met"
	if err := r.check(); err != nil {
		verdict = "NOT met: " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	fmt.Fprintf(&s, "  ratio others' p99 with one entity failing / without: %.2f (want ≤ %.0f); %s", r.Ratio(), isolation.MaxRatio, verdict)
	return s.String()
}
