package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/dlq/internal/parked"
)

const parkedHelp = `usage: dlq parked [--tier T] [--provider P] [--route R] [--limit N] [--offset N] [--json]

What waits: records parked in the retry tiers (webhooks.retry.<tier>, until
their due time) and in the routes' lanes (webhooks.lane.<provider> for the
route default, webhooks.lane.<provider>.<route> for another, until the
destination has room: tier "lane"). Prints the count per tier, provider
and route, the oldest record with its due time, then the records in due
order (lanes by parked time), --limit at a time from --offset (default 50
from 0). --json prints the report as one JSON object (counts, oldest,
total), then one line per listed record. A record's route is its lane's,
or in a retry tier its hookline.route header (default without one);
--route R takes route R of every provider, or of --provider P.

A tier holds what lies after the retrier group's committed offset; a lane
what lies after the processor group's committed offset. The read costs a
fetch of the parked records only.
`

func runParked(ctx context.Context, env Env, args []string) error {
	fs := newFlags("parked")
	var f parked.Filter
	fs.StringVar(&f.Tier, "tier", "", "only tier `T` (1m, 1h, ...; lane for the destinations' lanes)")
	addPlaceFlags(fs, &f.Provider, &f.Route)
	limit := fs.Int("limit", 50, "list at most `N` records")
	offset := fs.Int("offset", 0, "skip the first `N` records of the listing")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	pos, err := parse(fs, env, "parked", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("parked takes no arguments, got %q", pos[0])
	}
	if *limit < 0 || *offset < 0 {
		return usagef("parked: --limit and --offset must not be negative")
	}
	if err := checkRoute(f.Route); err != nil {
		return err
	}
	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	rep, err := a.parkedReader().Read(ctx, f, *offset, *limit)
	if err != nil {
		return err
	}
	for _, p := range rep.Incomplete {
		fmt.Fprintf(env.Stderr, "dlq: warning: %s not read to its end (nothing arrived for 5s)\n", p)
	}
	if *asJSON {
		recs := rep.Records
		rep.Records = nil
		if err := jsonLine(env.Stdout, rep); err != nil {
			return err
		}
		for _, r := range recs {
			if err := jsonLine(env.Stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	printParked(env.Stdout, rep, time.Now())
	return nil
}

func (a *app) parkedReader() *parked.Reader {
	return &parked.Reader{Names: a.names, NewClient: a.newClient, Adm: kadm.NewClient(a.cl)}
}

func printParked(w io.Writer, rep parked.Report, now time.Time) {
	fmt.Fprintf(w, "%d records parked\n", rep.Total)
	if rep.Total == 0 {
		return
	}
	tw := newTable(w)
	row(tw, "TIER", "PROVIDER", "ROUTE", "RECORDS", "OLDEST PARKED")
	for _, c := range rep.Counts {
		row(tw, c.Tier, c.Provider, c.Route, fmt.Sprint(c.Records), when(c.Oldest)+" ("+ago(now.Sub(c.Oldest))+" ago)")
	}
	tw.Flush()
	if o := rep.Oldest; o != nil {
		fmt.Fprintf(w, "oldest: %s in %s since %s (%s ago), due %s\n", cell(o.Key), o.Topic, when(o.ParkedAt), ago(now.Sub(o.ParkedAt)), dueText(*o))
	}
	if len(rep.Records) == 0 {
		return
	}
	fmt.Fprintf(w, "records %d-%d of %d, in due order:\n", rep.Offset+1, rep.Offset+len(rep.Records), rep.Total)
	tw = newTable(w)
	row(tw, "DUE", "TIER", "PROVIDER", "ROUTE", "KEY", "ATTEMPT", "PARKED", "WHERE", "LAST ERROR")
	for _, r := range rep.Records {
		row(tw, dueText(r), r.Tier, r.Provider, r.Route, short(r.Key, 60), fmt.Sprint(r.Attempt), when(r.ParkedAt),
			fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset), short(r.LastError, 60))
	}
	tw.Flush()
}

func dueText(r parked.Record) string {
	if r.DueAt == "" {
		return "when its destination has room"
	}
	return r.DueAt
}
