package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/backfill"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/route"
)

const backfillHelp = `usage: dlq backfill PROVIDER/ROUTE --since DUR|TIME [--until DUR|TIME] [--events GLOB,...]
                    [--again] [--id ID] [--rate N/s] [--dry-run] [--progress] [--json]

Delivers again, to one route, the events webhooks.raw holds that ingest
accepted from --since to --until (default: now) and that the route takes
(its events and where in HOOKLINE_PROVIDERS, narrowed by --events). Each
is produced back to webhooks.raw, in the partition it was read from, with
hookline.origin=backfill, hookline.route=ROUTE and
hookline.replay-id=backfill:ID, and the processor delivers it to that route
only: other routes of the same events are never called again.

By default only keys the route has no state for are delivered: a route
added since gets what it missed, and a key the route is done with (or
retrying, parked or dead) is skipped, so running a backfill twice calls
nobody twice. --again also delivers keys the route is done with ("the CRM
lost Tuesday"), once per backfill id: the id is printed at the start; give
it back with --id to resume an interrupted run without calling anyone
twice. A key whose dedup state has expired (the provider's dedup_ttl,
7 days by default) is delivered in either mode.

webhooks.raw's retention bounds what a backfill can send: when --since is
older than its oldest record, the output says from when records exist.
--dry-run reads and counts the records, per event type, and sends nothing.
--rate bounds records sent per second (50, 50/s, 600/m). Progress goes to
stderr when it is a terminal, or with --progress. --json prints the report
as one JSON object.

Exit codes: 0 done; 1 a failure (a record Kafka refused, a partition not
read to its end, an interruption: resume with --id); 2 usage.
`

func runBackfill(ctx context.Context, env Env, args []string) error {
	fs := newFlags("backfill")
	since := &sinceFlag{now: time.Now}
	until := &sinceFlag{now: time.Now}
	fs.Var(since, "since", "from `DUR|TIME`: a duration back from now or a time (required)")
	fs.Var(until, "until", "up to `DUR|TIME` (default: now)")
	events := fs.String("events", "", "only these event types: `GLOB`s, comma-separated (invoice.*,charge.refunded)")
	again := fs.Bool("again", false, "also deliver keys the route is done with, once per backfill id")
	id := fs.String("id", "", "the backfill's `ID`: resume a run (default: a new one, printed)")
	var rate rateFlag
	fs.Var(&rate, "rate", "at most `N/s` records per second (50, 50/s, 600/m; default: as fast as Kafka acknowledges)")
	dryRun := fs.Bool("dry-run", false, "count what would be sent, per event type; send nothing")
	progress := fs.Bool("progress", false, "report progress on stderr even when it is not a terminal")
	asJSON := fs.Bool("json", false, "the report as one JSON object")
	pos, err := parse(fs, env, "backfill", args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("backfill takes one PROVIDER/ROUTE, got %d arguments", len(pos))
	}
	name, routeName, ok := strings.Cut(pos[0], "/")
	if !ok {
		return usagef("%q: want PROVIDER/ROUTE (a provider with a provider-level destination has the route %s)", pos[0], route.Default)
	}
	if err := control.CheckRoute(routeName); err != nil {
		return usagef("%v", err)
	}
	if since.raw == "" {
		return usagef("backfill needs --since: from when to send the events again")
	}
	spec := backfill.Spec{Since: since.t, Until: until.t, Again: *again, ID: *id, Rate: rate.perSecond, DryRun: *dryRun}
	if spec.Until.IsZero() {
		spec.Until = time.Now()
	}
	if !spec.Since.Before(spec.Until) {
		return usagef("--since %s is not before --until %s", since.raw, orNow(until.raw))
	}
	if *events != "" {
		if spec.Events, err = route.ParseEventFilter(strings.Split(*events, ",")); err != nil {
			return usagef("--events: %v", err)
		}
	}
	if spec.ID == "" {
		spec.ID = backfill.NewID(time.Now())
	} else if err := backfill.CheckID(spec.ID); err != nil {
		return usagef("--id: %v", err)
	}

	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	if spec.Provider, spec.Route, err = a.route(name, routeName); err != nil {
		return err
	}
	if err := a.checkTopic(ctx, a.names.Raw); err != nil {
		return err
	}
	rn, closeRunner, err := a.backfillRunner()
	if err != nil {
		return err
	}
	defer closeRunner()

	verb := "backfill"
	if spec.DryRun {
		verb = "dry run of backfill"
	}
	fmt.Fprintf(env.Stderr, "dlq: %s %s of %s/%s, %s mode, accepted %s to %s (resume with --id %s)\n",
		verb, spec.ID, name, routeName, modeOf(spec.Again), spec.Since.UTC().Format(time.RFC3339), spec.Until.UTC().Format(time.RFC3339), spec.ID)
	var mu sync.Mutex
	drawn := false
	var show func(backfill.Progress)
	if *progress || env.StderrTTY {
		show = func(p backfill.Progress) {
			mu.Lock()
			defer mu.Unlock()
			if drawn {
				fmt.Fprint(env.Stderr, "\r\033[K")
			}
			fmt.Fprint(env.Stderr, backfillProgressLine(p))
			if env.StderrTTY {
				drawn = true
			} else {
				fmt.Fprintln(env.Stderr)
			}
		}
	}
	rep, err := rn.Run(ctx, spec, show)
	if drawn {
		fmt.Fprintln(env.Stderr)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if err := jsonLine(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		printBackfill(env.Stdout, rep)
	}
	switch {
	case rep.Interrupted:
		return fmt.Errorf("interrupted after %d of %d matching records were sent: run it again with --id %s to send the rest", rep.Sent, rep.Matched, rep.ID)
	case rep.Failed > 0:
		return fmt.Errorf("Kafka refused %d of %d records (%s): run it again with --id %s", rep.Failed, rep.Matched, rep.FirstError, rep.ID)
	case len(rep.Incomplete) > 0:
		return fmt.Errorf("%s could not be read to the range's end: run it again with --id %s", strings.Join(rep.Incomplete, ", "), rep.ID)
	}
	return nil
}

// backfillRunner is a backfill.Runner with a producer of its own, which
// places each record in the partition it names; close closes it.
func (a *app) backfillRunner() (rn *backfill.Runner, close func(), err error) {
	prod, err := a.newClient(
		kgo.RecordPartitioner(kgo.ManualPartitioner()), // each in the partition it was read from
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(a.cfg.Topics.MaxRecordBytes())),
		kgo.RecordDeliveryTimeout(kafkaTimeout),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	return &backfill.Runner{Reader: a.parkedReader(), Producer: prod}, prod.Close, nil
}

// route finds PROVIDER/ROUTE in the providers file.
func (a *app) route(name, route string) (*providers.Provider, *providers.Route, error) {
	if a.cfg.ProvidersFile == "" {
		return nil, nil, usagef("backfill needs HOOKLINE_PROVIDERS, the providers file: it says which events the route takes")
	}
	reg, err := providers.LoadWithoutSecrets(a.cfg.ProvidersFile)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	p, rt, err := backfill.Resolve(reg, name, route)
	if err != nil {
		return nil, nil, usagef("%v (%s)", err, a.cfg.ProvidersFile)
	}
	return p, rt, nil
}

func modeOf(again bool) string {
	if again {
		return "again"
	}
	return "missing"
}

func orNow(s string) string {
	if s == "" {
		return "now"
	}
	return s
}

func backfillProgressLine(p backfill.Progress) string {
	pct := 100.0
	if p.Total > 0 {
		pct = math.Floor(float64(p.Read) * 100 / float64(p.Total))
	}
	s := fmt.Sprintf("backfill read %d/%d %.0f%% matched %d sent %d", p.Read, p.Total, pct, p.Matched, p.Sent)
	if p.Failed > 0 {
		s += fmt.Sprintf(" failed %d", p.Failed)
	}
	s += fmt.Sprintf(" %.0f/s", p.PerSecond)
	if p.ETA > 0 {
		s += " ETA " + ago(p.ETA.Round(time.Second))
	}
	return s
}

// printBackfill writes a report for people.
func printBackfill(w io.Writer, r backfill.Report) {
	fmt.Fprintf(w, "backfill %s of %s/%s, %s mode", r.ID, r.Provider, r.Route, r.Mode)
	if r.DryRun {
		fmt.Fprint(w, " (dry run: nothing sent)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "range asked    %s to %s\n", r.Since.Format(time.RFC3339), r.Until.Format(time.RFC3339))
	switch {
	case r.AvailableFrom == nil:
		fmt.Fprintln(w, "available      webhooks.raw holds no record")
	case r.Truncated:
		fmt.Fprintf(w, "available      from %s only: webhooks.raw's retention removed what was accepted before\n", r.AvailableFrom.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "available      from %s\n", r.AvailableFrom.Format(time.RFC3339))
	}
	if r.First != nil {
		fmt.Fprintf(w, "matched        %d records, accepted %s to %s\n", r.Matched, r.First.Format(time.RFC3339), r.Last.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "matched        0 records")
	}
	if !r.DryRun {
		fmt.Fprintf(w, "sent           %d", r.Sent)
		if r.Failed > 0 {
			fmt.Fprintf(w, ", %d refused (%s)", r.Failed, cell(r.FirstError))
		}
		fmt.Fprintln(w, " (the processor skips keys the route already has; dlq trace KEY shows each)")
	}
	if len(r.ByEventType) > 0 {
		tw := newTable(w)
		row(tw, "EVENT TYPE", "RECORDS")
		for _, ev := range r.EventTypes() {
			name := ev
			if name == "" {
				name = "(none)"
			}
			row(tw, cell(name), fmt.Sprint(r.ByEventType[ev]))
		}
		_ = tw.Flush()
	}
}
