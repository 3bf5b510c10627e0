package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e/isolation"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// isolation runs phases 3 and 4 (pkg/testkit/e2e/isolation): fastpay alone, then
// fastpay with slowcrm, each provider in its own open loop, and waits for
// every key's outcome. fastpay alone is the baseline of the ratio, in the
// same run.
func (b *bench) isolation(ctx context.Context) (isolation.Report, error) {
	sc := b.iso
	fmt.Fprintf(b.out, "phase 3: fastpay alone, %.0f/s for %s ...\n", sc.FastRate, sc.Alone)
	alone := &phase{name: "fastpay alone", provider: isolation.Fast, iso: isolation.Alone}
	if err := b.paced(ctx, sc.Alone, paced{alone, sc.FastRate}); err != nil {
		return b.tl.Report(sc), err
	}
	fmt.Fprintf(b.out, "phase 4: fastpay %.0f/s with slowcrm %.0f/s (calls of %s) for %s ...\n", sc.FastRate, sc.SlowRate, sc.SlowCall, sc.Together)
	fast := &phase{name: "fastpay with slowcrm", provider: isolation.Fast, iso: isolation.Together}
	slow := &phase{name: "slowcrm", provider: isolation.Slow, iso: isolation.Together}
	err := b.paced(ctx, sc.Together, paced{fast, sc.FastRate}, paced{slow, sc.SlowRate})
	return b.tl.Report(sc), err
}

// paced is one open loop of an isolation phase.
type paced struct {
	ph   *phase
	rate float64
}

// paced runs the loops side by side for dur, then waits for the outcomes of
// their keys.
func (b *bench) paced(ctx context.Context, dur time.Duration, loops ...paced) error {
	errs := make([]error, len(loops))
	var wg sync.WaitGroup
	for i, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.load([]*phase{l.ph}, func(dos []func(context.Context, int) error) []loadtest.Result {
				return []loadtest.Result{loadtest.OpenLoop(ctx, l.rate, dur, dos[0])}
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range loops {
		if err := b.track.wait(ctx, l.ph, b.cfg.Drain); err != nil {
			return err
		}
	}
	for _, p := range b.procs {
		if err := p.Err(); err != nil {
			return err
		}
	}
	return nil
}
