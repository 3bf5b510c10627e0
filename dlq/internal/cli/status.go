package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/topics"
)

// DefaultStatusWindow is the window `dlq status` and GET /status count
// accepted and done records over.
const DefaultStatusWindow = 5 * time.Minute

const statusHelp = `usage: dlq status [--window DUR] [--json]

One answer to "is it healthy?": per provider and per route of it, the
records ingest accepted in the window (default 5m) and their rate, the
outcomes done in the window, what is retrying (retry tiers) and parked
(lanes), by tier and by priority class, due now or scheduled, with the
oldest; the unresolved DLQ entries and the oldest; the breaker (open,
closed or unreported, from the processors' reports on webhooks.control)
and the operator's setting (running, paused, draining); for the routes
of ordered providers, the entities held (how many, the records waiting
behind their heads, the one held longest with the key it waits behind:
the HELD table), from the processors' reports on webhooks.control; for
webhooks.raw,
the processor group's lag and the age of its oldest unprocessed record;
and a verdict with its reasons. --json prints the report as one JSON
object (GET /status on dlq serve answers the same).

A route of a provider is one of the providers file (HOOKLINE_PROVIDERS)
or one its records name (hookline.route; default without one); its
priority class is the file's (unknown without it). Retrying and parked
are what lies after the retrier's and the processor's committed offsets
(dlq parked); a retry-tier record is due now once its hookline.due-at
has passed, a lane record always (it waits for room, not for a time).
The lag of webhooks.raw is its last stable offset minus the processor
group's committed offset, per partition; the oldest unprocessed record is
the one at that committed offset (the group's low-water mark: records
above it may be finished already).

In flight and completed come from the processors themselves: with
HOOKLINE_PROCESSOR_METRICS listing their /metrics URLs (such as
http://processor:9101/metrics; a host name is read at every address it
resolves to), IN FLIGHT is the records they have read from webhooks.raw
and the lanes and not yet committed (hookline_processor_pending_records:
waiting in a chain, for a slot or in a call, or finished and waiting for
the transaction), and COMPLETED the route deliveries done since each of
them started (hookline_processor_records_total{status="done"}: a record
delivered to three routes counts three; it restarts from 0 when a
processor restarts). Cost: one HTTP GET per processor. Without the
variable both show "-" (null in JSON). So the four states of one record
are: pending (the lag of webhooks.raw less what is in flight), processing
(in flight; retrying and parked wait outside the processor), completed,
failed (the DLQ).

The verdict:
` + status.Rules + `

Exit codes: 0 whatever the verdict (read it from the output); 1 when a
topic cannot be read.
`

func runStatus(ctx context.Context, env Env, args []string) error {
	fs := newFlags("status")
	window := fs.Duration("window", DefaultStatusWindow, "count accepted and done records over the last `DUR`")
	asJSON := fs.Bool("json", false, "the report as one JSON object")
	pos, err := parse(fs, env, "status", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("status takes no arguments, got %q", pos[0])
	}
	if err := checkWindow("status", *window); err != nil {
		return err
	}
	rep, err := readStatus(ctx, env, *window)
	if err != nil {
		return err
	}
	if *asJSON {
		return jsonLine(env.Stdout, rep)
	}
	printStatus(env.Stdout, rep)
	return nil
}

// checkWindow refuses a --window outside 1s to 24h.
func checkWindow(cmd string, window time.Duration) error {
	if window < time.Second || window > 24*time.Hour {
		return usagef("%s: --window %s: want 1s to 24h", cmd, window)
	}
	return nil
}

// readStatus connects, reads the control topic once and collects the
// report over window; partitions not read to their end are warned about
// on stderr.
func readStatus(ctx context.Context, env Env, window time.Duration) (status.Report, error) {
	a, known, err := connectKnown(ctx, env, func(n topics.Names) string { return n.DLQ })
	if err != nil {
		return status.Report{}, err
	}
	defer a.close()
	rep, err := status.Collect(ctx, a.statusSources(known, func(ctx context.Context) (map[string]control.Setting, control.Reports, error) {
		return settings.ReadAll(ctx, a.newClient, a.names.Control, func(err error) { fmt.Fprintln(env.Stderr, "dlq: warning:", err) })
	}), window)
	if err != nil {
		return status.Report{}, a.kafkaErr(err)
	}
	for _, p := range rep.Incomplete {
		fmt.Fprintf(env.Stderr, "dlq: warning: %s not read to its end (nothing arrived for 5s)\n", p)
	}
	return rep, nil
}

// statusSources are the readings of a status report: control gives the
// settings and the processors' reports (read once, or as serve follows
// them).
func (a *app) statusSources(known settings.Known, read func(context.Context) (map[string]control.Setting, control.Reports, error)) status.Sources {
	return status.Sources{Reader: a.parkedReader(), Store: a.store, Known: known, Control: read, HeldAfter: a.cfg.HeldAfter,
		ProcessorMetrics: a.cfg.ProcessorMetrics}
}

func printStatus(w io.Writer, rep status.Report) {
	fmt.Fprintf(w, "%s at %s\n", strings.ToUpper(rep.Verdict), when(rep.At))
	for _, r := range rep.Reasons {
		fmt.Fprintf(w, "  - %s\n", cell(r))
	}
	raw := rep.Raw
	fmt.Fprintf(w, "\n%s: lag %d (group %s)", raw.Topic, raw.Lag, raw.Group)
	if raw.OldestAt != nil {
		fmt.Fprintf(w, ", oldest unprocessed %s (%s ago)", when(*raw.OldestAt), ago(time.Duration(raw.OldestAgeSeconds*float64(time.Second))))
	}
	fmt.Fprintln(w)
	win := ago(time.Duration(rep.WindowSeconds * float64(time.Second)))
	t := rep.Totals
	fmt.Fprintf(w, "last %s: %d accepted (%.2f/s), %d done; now %d retrying, %d parked, %d dead letters unresolved\n",
		win, t.Accepted, t.AcceptedPerSecond, t.Done, t.Retrying, t.Parked, t.DLQUnresolved)
	if t.InFlight != nil {
		since := "no processor read"
		if t.CompletedSince != nil {
			since = "since " + when(*t.CompletedSince)
		}
		fmt.Fprintf(w, "processors (%d read): %d in flight; %d completed %s\n", len(rep.Processors), *t.InFlight, *t.Completed, since)
	}

	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "PROVIDER", "ROUTE", "PRIORITY", "ACCEPTED/S", "DONE", "COMPLETED", "RETRYING", "PARKED", "DUE NOW", "SCHEDULED", "OLDEST WAITING", "DLQ", "OLDEST DLQ", "STATE", "BREAKER", "LIMIT")
	for _, p := range rep.Providers {
		row(tw, p.Provider, "*", "", fmt.Sprintf("%.2f", p.AcceptedPerSecond), fmt.Sprint(p.Done), count(p.Completed), fmt.Sprint(p.Retrying), fmt.Sprint(p.Parked),
			dueCells(p.ByTier, rep.At)[0], dueCells(p.ByTier, rep.At)[1], dueCells(p.ByTier, rep.At)[2],
			fmt.Sprint(p.DLQUnresolved), oldestDLQ(p.Counts), p.State, p.Breaker, "")
		for _, r := range p.Routes {
			c := dueCells(r.ByTier, rep.At)
			state := r.State
			if r.PausedBy != "" {
				state += " (" + r.PausedBy + ")"
			}
			row(tw, "", r.Route, r.Priority, "", fmt.Sprint(r.Done), count(r.Completed), fmt.Sprint(r.Retrying), fmt.Sprint(r.Parked), c[0], c[1], c[2],
				fmt.Sprint(r.DLQUnresolved), oldestDLQ(r.Counts), state, r.Breaker, limitCell(r))
		}
	}
	_ = tw.Flush()
	printHeld(w, rep)
	printProcessors(w, rep)
	for _, by := range []struct {
		title string
		rows  []status.Waiting
	}{{"TIER", t.ByTier}, {"PRIORITY", t.ByPriority}} {
		if len(by.rows) == 0 {
			continue
		}
		fmt.Fprintln(w)
		tw := newTable(w)
		row(tw, by.title, "RECORDS", "DUE NOW", "SCHEDULED", "OLDEST")
		for _, x := range by.rows {
			row(tw, x.Tier+x.Priority, fmt.Sprint(x.Records), fmt.Sprint(x.DueNow), fmt.Sprint(x.Scheduled), oldestWaiting(x.Oldest, rep.At))
		}
		_ = tw.Flush()
	}
}

// count is n, or "-" when nothing was read.
func count(n *int) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// printProcessors lists what each processor's /metrics said.
func printProcessors(w io.Writer, rep status.Report) {
	if len(rep.Processors) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "PROCESSOR METRICS", "IN FLIGHT", "COMPLETED", "STARTED", "ERROR")
	for _, p := range rep.Processors {
		started := "-"
		if p.StartedAt != nil {
			started = when(*p.StartedAt)
		}
		row(tw, cell(p.URL), fmt.Sprint(p.InFlight), fmt.Sprint(p.Completed), started, cell(p.Error))
	}
	_ = tw.Flush()
}

// dueCells sums rows: due now, scheduled, the oldest.
func dueCells(rows []status.Waiting, now time.Time) [3]string {
	var due, sched int
	var oldest *time.Time
	for _, x := range rows {
		due += x.DueNow
		sched += x.Scheduled
		if x.Oldest != nil && (oldest == nil || x.Oldest.Before(*oldest)) {
			oldest = x.Oldest
		}
	}
	return [3]string{fmt.Sprint(due), fmt.Sprint(sched), oldestWaiting(oldest, now)}
}

func oldestWaiting(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return ago(now.Sub(*t)) + " ago"
}

func oldestDLQ(c status.Counts) string {
	if c.DLQOldestUnresolved == nil {
		return "-"
	}
	return ago(time.Duration(c.DLQOldestUnresolved.AgeSeconds)*time.Second) + " ago"
}

// printHeld lists the routes with held entities: how many, the records
// waiting, and the entity held longest, with where its head waits.
func printHeld(w io.Writer, rep status.Report) {
	tw := (*tabwriter.Writer)(nil)
	for _, p := range rep.Providers {
		for _, r := range p.Routes {
			if len(r.Held.Oldest) == 0 {
				continue
			}
			if tw == nil {
				fmt.Fprintln(w)
				tw = newTable(w)
				row(tw, "HELD", "ENTITIES", "WAITING", "OLDEST ENTITY", "HELD FOR", "WHERE")
			}
			e := r.Held.Oldest[0]
			row(tw, p.Provider+"/"+r.Route, fmt.Sprint(r.Held.Entities), fmt.Sprint(r.Held.Waiting), cell(e.Entity),
				ago(time.Duration(e.AgeSeconds*float64(time.Second))), cell(status.HeldWhere(e.HeldEntity)))
		}
	}
	if tw != nil {
		_ = tw.Flush()
	}
}

// limitCell is a route's concurrency limit over its ceiling ("12/64"),
// "-" when no processor read reports it.
func limitCell(r status.Route) string {
	if r.ConcurrencyLimit == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", *r.ConcurrencyLimit, *r.MaxInflight)
}
