package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
)

// filterFlags are the entry filters list and replay share.
type filterFlags struct {
	provider, route, reason, key string
	since                        sinceFlag
}

// addFilterFlags registers --provider, --route, --reason, --key and
// --since on fs.
func addFilterFlags(fs *flag.FlagSet) *filterFlags {
	f := &filterFlags{since: sinceFlag{now: time.Now}}
	addPlaceFlags(fs, &f.provider, &f.route)
	fs.StringVar(&f.reason, "reason", "", "only entries dead-lettered for `REASON`: permanent, exhausted, invalid_payload or transform_failed")
	fs.StringVar(&f.key, "key", "", "only entries whose idempotency key is `KEY`")
	fs.Var(&f.since, "since", "only entries dead-lettered since `DUR|TIME` (90m, 7d, 2026-03-01T12:00:00Z)")
	return f
}

// addPlaceFlags registers --provider and --route on fs (list, replay,
// stats, parked).
func addPlaceFlags(fs *flag.FlagSet, provider, route *string) {
	fs.StringVar(provider, "provider", "", "only those of `PROVIDER` (hookline.provider)")
	fs.StringVar(route, "route", "", "only those of route `NAME` (hookline.route; default takes those without it too), of every provider unless --provider")
}

// checkRoute refuses a --route no route may have.
func checkRoute(route string) error {
	if route == "" {
		return nil
	}
	if err := control.CheckRoute(route); err != nil {
		return usagef("--route: %v", err)
	}
	return nil
}

func (f *filterFlags) filter() (store.Filter, error) {
	if f.reason != "" && !headers.IsDeadReason(f.reason) {
		return store.Filter{}, usagef("--reason %q: want %s, %s, %s or %s", f.reason, headers.DeadPermanent, headers.DeadExhausted, headers.DeadInvalidPayload, headers.DeadTransformFailed)
	}
	if err := checkRoute(f.route); err != nil {
		return store.Filter{}, err
	}
	return store.Filter{Provider: f.provider, Route: f.route, Reason: f.reason, Key: f.key, Since: f.since.t}, nil
}

func runList(ctx context.Context, env Env, args []string) error {
	fs := newFlags("list")
	ff := addFilterFlags(fs)
	unresolved := fs.Bool("unresolved", false, "only entries nobody resolved (not replayed, ignored or fixed)")
	limit := fs.Int("limit", 0, "at most `N` entries, the newest (0: all)")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	pos, err := parse(fs, env, "list", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("list takes no arguments, got %q (filters are flags: --provider, --route, --key, ...)", pos[0])
	}
	if *limit < 0 {
		return usagef("--limit %d: want 0 (all) or more", *limit)
	}
	f, err := ff.filter()
	if err != nil {
		return err
	}
	f.Unresolved = *unresolved

	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	es, err := a.store.List(ctx, f, false)
	if err != nil {
		return a.kafkaErr(err)
	}
	matched := len(es)
	if *limit > 0 && len(es) > *limit {
		es = es[:*limit]
	}
	if *asJSON {
		for _, e := range es {
			if err := jsonLine(env.Stdout, e.Summary()); err != nil {
				return err
			}
		}
		return nil
	}
	if matched == 0 {
		fmt.Fprintf(env.Stdout, "no entries in %s match\n", a.names.DLQ)
		return nil
	}
	tw := newTable(env.Stdout)
	row(tw, "REF", "DEAD AT", "PROVIDER", "ROUTE", "EVENT", "KEY", "REASON", "ATTEMPT", "RESOLUTION", "LAST ERROR")
	unres := 0
	for _, e := range es {
		s := e.Summary()
		res := ""
		if s.Resolution != nil {
			res = s.Resolution.Resolution
		} else {
			unres++
		}
		row(tw, s.Ref, when(e.DeadAt()), s.Provider, s.Route, s.EventType, s.Key, s.Reason, fmt.Sprint(s.Attempt), res, short(s.LastError, 70))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(es) < matched {
		fmt.Fprintf(env.Stdout, "%d newest of %d matching entries shown (--limit %d)\n", len(es), matched, *limit)
	} else {
		fmt.Fprintf(env.Stdout, "%d entries, %d unresolved\n", len(es), unres)
	}
	return nil
}
