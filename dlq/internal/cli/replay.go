package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/store"
)

func runReplay(ctx context.Context, env Env, args []string) error {
	fs := newFlags("replay")
	ff := addFilterFlags(fs)
	all := fs.Bool("all", false, "every unresolved entry (narrowed by --reason, --since)")
	includeResolved := fs.Bool("include-resolved", false, "with --key, --provider or --all: also entries already replayed, ignored or fixed")
	dryRun := fs.Bool("dry-run", false, "print what would be sent; produce nothing")
	var rate rateFlag
	fs.Var(&rate, "rate", "at most `N/s` records per second (50, 50/s, 600/m; default: as fast as Kafka acknowledges)")
	wait := fs.Duration("wait", 0, "wait up to `DUR` for the processor's outcome of each replay and print it")
	by := fs.String("by", "", "`NAME` of who replays, for the replayed resolution (default $USER)")
	note := fs.String("note", "", "`TEXT` for the note of the replayed resolution")
	progress := fs.Bool("progress", false, "report progress on stderr even when it is not a terminal")
	asJSON := fs.Bool("json", false, "one JSON object per entry")
	pos, err := parse(fs, env, "replay", args)
	if err != nil {
		return err
	}
	refs, err := parseRefs(pos)
	if err != nil {
		return err
	}
	f, err := ff.filter()
	if err != nil {
		return err
	}
	sel := store.Selection{Refs: refs, Filter: f, All: *all, IncludeResolved: *includeResolved}
	if err := sel.Validate(); err != nil {
		return usagef("%v (flags --key, --provider, --all, --route, --reason, --since, --include-resolved)", err)
	}
	switch {
	case *wait < 0:
		return usagef("--wait %s: want a positive duration", *wait)
	case *wait > 0 && *dryRun:
		return usagef("--wait with --dry-run: a dry run sends nothing to wait for")
	}
	who := ""
	if !*dryRun {
		user, _ := env.Lookup("USER")
		if who, err = whoFrom(*by, user); err != nil {
			return err
		}
	}

	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	entries, err := a.store.Select(ctx, sel)
	if err != nil {
		return a.kafkaErr(err)
	}
	if len(entries) == 0 {
		fmt.Fprintln(env.Stderr, "dlq: nothing to replay: no unresolved entry matches (--include-resolved takes resolved ones too)")
		return nil
	}
	var watch *replay.Outcomes
	if !*dryRun {
		if err := a.ensureStatusTopic(ctx); err != nil {
			return err
		}
		if err := a.checkTopic(ctx, a.names.Raw); err != nil {
			return err
		}
		if *wait > 0 {
			if watch, err = replay.WatchOutcomes(ctx, a.adm, a.newClient, a.names.Outcomes); err != nil {
				return err
			}
		}
	}

	var mu sync.Mutex // one writer at a time on stdout and stderr
	showProgress := *progress || env.StderrTTY
	drawn := false // a progress line without its newline is on the terminal
	clearLine := func() {
		if drawn {
			fmt.Fprint(env.Stderr, "\r\033[K")
			drawn = false
		}
	}
	var collected []*replay.Result
	ok, seen := 0, 0
	printOne := func(r replay.Result) {
		if *asJSON {
			_ = jsonLine(env.Stdout, r)
		} else {
			printResult(env.Stdout, r)
		}
	}
	opts := replay.Options{
		Raw: a.names.Raw, Status: a.names.DLQStatus, Rate: rate.perSecond, DryRun: *dryRun, By: who, Note: *note,
	}
	if showProgress {
		shown := false
		opts.Progress = func(p replay.Progress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Done == p.Total && !shown && !*progress {
				return // a run too short for a progress line needs no final one
			}
			shown = true
			clearLine()
			fmt.Fprint(env.Stderr, progressLine(p))
			if !env.StderrTTY || p.Done == p.Total {
				fmt.Fprintln(env.Stderr)
			} else {
				drawn = true
			}
		}
	}
	start := time.Now()
	sum := replay.New(a.cl).Run(ctx, entries, opts, func(r replay.Result) {
		mu.Lock()
		defer mu.Unlock()
		seen++
		if r.Error == "" {
			ok++
		}
		if watch != nil && r.Sent {
			collected = append(collected, &r)
			return
		}
		clearLine()
		printOne(r)
	})
	if drawn { // interrupted: keep the last progress line
		fmt.Fprintln(env.Stderr)
		drawn = false
	}
	pending := 0
	if watch != nil {
		fmt.Fprintf(env.Stderr, "dlq: waiting up to %s for the processor's outcomes of %d replays\n", *wait, len(collected))
		pending, err = watch.Wait(ctx, collected, *wait)
		for _, r := range collected {
			printOne(*r)
		}
		if err != nil {
			return err
		}
	}
	verb := "replayed"
	if *dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(env.Stderr, "dlq: %s %d of %d entries in %s", verb, ok, sum.Total, time.Since(start).Round(time.Millisecond))
	if sum.Failed > 0 {
		fmt.Fprintf(env.Stderr, ", %d failed", sum.Failed)
	}
	fmt.Fprintln(env.Stderr)
	switch {
	case sum.Interrupted:
		return fmt.Errorf("interrupted: %d of %d entries were not sent", sum.Total-seen, sum.Total)
	case sum.Failed > 0:
		return fmt.Errorf("%d of %d entries failed (see the error of each)", sum.Failed, sum.Total)
	case pending > 0:
		return fmt.Errorf("%d replays had no outcome within %s: is the processor running and caught up?", pending, *wait)
	}
	return nil
}

// printResult writes one result for people.
func printResult(w io.Writer, r replay.Result) {
	var b strings.Builder
	switch {
	case !r.Sent && r.Error != "":
		fmt.Fprintf(&b, "FAILED      %s  %s  %s", r.Ref, cell(r.Key), cell(r.Error))
	case r.DryRun:
		fmt.Fprintf(&b, "would send  %s  %s  to route %s as %s to %s", r.Ref, cell(r.Key), cell(r.Route), r.ReplayID, r.Topic)
	default:
		fmt.Fprintf(&b, "sent        %s  %s  to route %s as %s to %s %d:%d", r.Ref, cell(r.Key), cell(r.Route), r.ReplayID, r.Topic, r.Partition, r.Offset)
		if r.Outcome != "" {
			fmt.Fprintf(&b, "  outcome %s", r.Outcome)
			if r.OutcomeError != "" {
				fmt.Fprintf(&b, " (%s)", cell(short(r.OutcomeError, 100)))
			}
		}
		if r.Error != "" {
			fmt.Fprintf(&b, "  WARNING %s", cell(r.Error))
		}
	}
	if p := r.PreviousResolution; p != nil {
		fmt.Fprintf(&b, "  (was %s by %s)", p.Resolution, cell(p.By))
	}
	fmt.Fprintln(w, b.String())
}

// progressLine is "replay 120/500 24% 49.8/s ETA 8s".
func progressLine(p replay.Progress) string {
	pct := 100.0
	if p.Total > 0 {
		pct = math.Floor(float64(p.Done) * 100 / float64(p.Total))
	}
	s := fmt.Sprintf("replay %d/%d %.0f%% %.1f/s", p.Done, p.Total, pct, p.PerSecond)
	if p.Done < p.Total && p.ETA > 0 {
		s += " ETA " + ago(p.ETA.Round(time.Second))
	} else if p.Done == p.Total {
		s += " in " + ago(p.Elapsed)
	}
	return s
}
