package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/control"
)

const eventsHelp = `usage: dlq events [--provider P] [--route R] [--event TYPE] [--status S]
                  [--since DUR|TIME] [--until DUR|TIME] [--limit N] [--cursor C] [--json]

Recent deliveries, newest first, found without their key: one row per
outcome (what the processor decided for a delivery: done, retrying,
parked, held or dead, each attempt its own row; a duplicate, unrouted or
suppressed delivery), with its key (dlq trace KEY shows its whole path)
and its trace id when the outcome carries one. Filters combine: --provider,
--route (of every provider unless --provider says which), --event (an event
type, exactly), --status (done, duplicate, retrying, parked, held, dead,
unrouted, suppressed), --since and --until (a duration back from now, 90m,
36h, 7d, or a time, 2026-03-01, 2026-03-01T12:00:00Z; both included).
--limit rows a page (default 50, at most 500); the last line names the
--cursor that gives the next page. --json prints one JSON object per row,
then {"kind":"page","next_cursor":...,"seeks":...}.

It reads the trace index (HOOKLINE_TRACE_DIR, default data/dlq-trace) as
dlq trace does, or asks the dlq serve that holds it (GET /events). A page
reads at most 100,000 index positions: a rare combination far back may
give a short or empty page with a cursor to carry on.
`

func runEvents(ctx context.Context, env Env, args []string) error {
	fs := newFlags("events")
	var (
		f                            trace.ListFilter
		since, until, cursor         string
		limit                        int
		asJSON                       bool
		provider, route, event, stat string
	)
	fs.StringVar(&provider, "provider", "", "only this provider's outcomes")
	fs.StringVar(&route, "route", "", "only this route's outcomes")
	fs.StringVar(&event, "event", "", "only outcomes of this event `type`")
	fs.StringVar(&stat, "status", "", "only outcomes with this `status`")
	fs.StringVar(&since, "since", "", "only outcomes at or after `DUR|TIME`")
	fs.StringVar(&until, "until", "", "only outcomes at or before `DUR|TIME`")
	fs.IntVar(&limit, "limit", trace.DefaultListLimit, "rows a page (at most 500)")
	fs.StringVar(&cursor, "cursor", "", "carry on from the `cursor` a page ended with")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per line")
	pos, err := parse(fs, env, "events", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("events takes no arguments, got %q", pos[0])
	}
	f = trace.ListFilter{Provider: provider, Route: route, EventType: event, Status: stat}
	var errs []error
	if route != "" {
		errs = append(errs, control.CheckRoute(route))
	}
	if stat != "" {
		errs = append(errs, trace.CheckStatus(stat))
	}
	if limit < 1 || limit > trace.MaxListLimit {
		errs = append(errs, fmt.Errorf("--limit %d: want 1 to %d", limit, trace.MaxListLimit))
	}
	now := time.Now()
	for _, b := range []struct {
		name, v string
		t       *time.Time
	}{{"since", since, &f.Since}, {"until", until, &f.Until}} {
		if b.v == "" {
			continue
		}
		t, err := store.ParseSince(b.v, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s %w", b.name, err))
		}
		*b.t = t
	}
	if err := errors.Join(errs...); err != nil {
		return usagef("%v", err)
	}
	cfg, err := loadConfig(env.Lookup)
	if err != nil {
		return usagef("%v", err)
	}
	var page trace.ListPage
	err = withIndex(ctx, env, cfg, func(ix *trace.Index) error {
		page, err = ix.List(ctx, f, cursor, limit)
		return err
	})
	if errors.Is(err, errIndexBusy) {
		// The flags as they were written: serve reads since and until as
		// they read here.
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		for k, v := range map[string]string{"provider": provider, "route": route, "event_type": event, "status": stat, "since": since, "until": until, "cursor": cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		page, err = remoteEvents(ctx, cfg, q)
	}
	if errors.Is(err, trace.ErrBadCursor) {
		return usagef("--cursor %v", err)
	}
	if err != nil {
		return err
	}
	if asJSON {
		for _, d := range page.Events {
			if err := jsonLine(env.Stdout, d); err != nil {
				return err
			}
		}
		return jsonLine(env.Stdout, struct {
			Kind       string `json:"kind"`
			NextCursor string `json:"next_cursor"`
			Rows       int    `json:"rows"`
			Seeks      int    `json:"seeks"`
		}{"page", page.NextCursor, len(page.Events), page.Seeks})
	}
	printEvents(env.Stdout, page)
	return nil
}

// remoteEvents asks the dlq serve holding the index (GET /events?q).
func remoteEvents(ctx context.Context, cfg config, q url.Values) (trace.ListPage, error) {
	var page trace.ListPage
	code, body, err := askServe(ctx, cfg, "/events?"+q.Encode())
	switch {
	case err != nil:
		return page, err
	case code == http.StatusOK:
		return page, json.Unmarshal(body, &page)
	case code == http.StatusBadRequest && q.Get("cursor") != "" && strings.Contains(string(body), "cursor"):
		return page, fmt.Errorf("%q: %w", q.Get("cursor"), trace.ErrBadCursor)
	}
	return page, fmt.Errorf("dlq serve at %s answered %d: %s", cfg.AdminAddr, code, strings.TrimSpace(string(body)))
}

// printEvents writes a page as a table, then how to get the next.
func printEvents(w io.Writer, page trace.ListPage) {
	if len(page.Events) == 0 {
		fmt.Fprintln(w, "no outcome matches")
	} else {
		tw := newTable(w)
		row(tw, "TIME", "KEY", "PROVIDER/ROUTE", "EVENT", "STATUS", "ATTEMPT", "TRACE ID", "DETAIL")
		for _, d := range page.Events {
			pr := d.Provider
			if d.Route != "" {
				pr += "/" + d.Route
			}
			detail := d.Error
			switch {
			case d.Tier != "":
				detail = strings.TrimSuffix("to tier "+d.Tier+"; "+detail, "; ")
			case d.Reason != "":
				detail = strings.TrimSuffix(d.Reason+"; "+detail, "; ")
			}
			att, tid := "-", "-"
			if d.Attempt > 0 {
				att = strconv.Itoa(d.Attempt)
			}
			if d.TraceID != "" {
				tid = d.TraceID
			}
			row(tw, d.At.UTC().Format("2006-01-02 15:04:05.000Z"), d.Key, pr, short(d.EventType, 40), d.Status, att, tid, short(detail, 80))
		}
		tw.Flush()
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "next page: --cursor %s\n", page.NextCursor)
	}
}
