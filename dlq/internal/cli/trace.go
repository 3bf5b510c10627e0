package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/badgerdb"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/outcome"
)

const traceHelp = `usage: dlq trace KEY [--json]

The key's whole path, route by route: first where it stands now, then what
happened to the key as a whole (each delivery ingest accepted, with request
id, received-at and origin; duplicates; unrouted; suppressed as a replay of
another key by ingest), then for each route (a
named destination of the provider; "default" for a provider-level
destination and everything written before routes) where that route stands
and its steps: each processing outcome with its error, where it waited
(retry tier and due time, or parked in its lane), its DLQ entries with refs
and resolutions, its replays; each group in time order. The key stands
where its route furthest from done stands (dead, waiting, parked, pending),
done when every route is. --json prints one JSON object per line: each step
in time order ("route" on a route's), then the trace (kind "trace") with
the counts, "now" and "routes" (each route's "now" and "last_outcome").

It reads the trace index in HOOKLINE_TRACE_DIR (default data/dlq-trace),
reading the topics into it from where it stopped (the first run reads them
all). While a dlq serve holds that directory, the key is asked of it
instead (HOOKLINE_ADMIN_ADDR and HOOKLINE_ADMIN_TOKEN). A key of which the
topics hold nothing exits 2.
`

// DefaultTraceDir is where the trace index lives unless HOOKLINE_TRACE_DIR
// says otherwise.
const DefaultTraceDir = "data/dlq-trace"

func runTrace(ctx context.Context, env Env, args []string) error {
	fs := newFlags("trace")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	pos, err := parse(fs, env, "trace", args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return usagef("trace takes one key, got %d arguments", len(pos))
	}
	key := pos[0]
	cfg, err := loadConfig(env.Lookup)
	if err != nil {
		return usagef("%v", err)
	}
	t, err := localTrace(ctx, env, cfg, key)
	if errors.Is(err, errIndexBusy) {
		t, err = remoteTrace(ctx, cfg, key)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		for _, s := range t.Steps {
			if err := jsonLine(env.Stdout, s); err != nil {
				return err
			}
		}
		steps := t.Steps
		t.Steps = nil
		defer func() { t.Steps = steps }()
		return jsonLine(env.Stdout, struct {
			Kind string `json:"kind"`
			trace.Trace
		}{"trace", t})
	}
	printTrace(env.Stdout, t)
	return nil
}

// errIndexBusy: another process (dlq serve) holds the index directory.
var errIndexBusy = errors.New("trace index held by another process")

func localTrace(ctx context.Context, env Env, cfg config, key string) (t trace.Trace, err error) {
	err = withIndex(ctx, env, cfg, func(ix *trace.Index) error {
		t, err = ix.Trace(key)
		return err
	})
	return t, err
}

// withIndex opens the trace index, reads the topics into it up to where
// they end now, and calls fn with it; errIndexBusy when a dlq serve holds
// it.
func withIndex(ctx context.Context, env Env, cfg config, fn func(*trace.Index) error) error {
	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	log := obs.NewLogger(env.Stderr, slog.LevelWarn, "dlq")
	ix, err := trace.Open(trace.Options{Dir: cfg.TraceDir, Names: a.names, Retention: cfg.Topics.DLQRetention, Logger: log})
	if err != nil {
		if errors.Is(err, badgerdb.ErrHeld) {
			return errIndexBusy
		}
		return err
	}
	defer ix.Close()
	if err := trace.NewFeeder(ix, a.newClient, kadm.NewClient(a.cl), log).CatchUp(ctx, 5*time.Second); err != nil {
		return err
	}
	return fn(ix)
}

// remoteTrace asks a running dlq serve.
func remoteTrace(ctx context.Context, cfg config, key string) (trace.Trace, error) {
	var t trace.Trace
	code, body, err := askServe(ctx, cfg, "/events/"+url.PathEscape(key))
	switch {
	case err != nil:
		return t, err
	case code == http.StatusOK:
		return t, json.Unmarshal(body, &t)
	case code == http.StatusNotFound:
		return t, fmt.Errorf("%q: %w", key, trace.ErrUnknownKey)
	}
	return t, fmt.Errorf("dlq serve at %s answered %d: %s", cfg.AdminAddr, code, strings.TrimSpace(string(body)))
}

// askServe makes a GET of path to the dlq serve that holds the index and
// returns its status and body.
func askServe(ctx context.Context, cfg config, path string) (int, []byte, error) {
	if cfg.AdminToken == "" {
		return 0, nil, fmt.Errorf("%w (%s): set HOOKLINE_ADMIN_TOKEN to ask the dlq serve holding it, or HOOKLINE_TRACE_DIR to another directory", errIndexBusy, cfg.TraceDir)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+cfg.AdminAddr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("ask dlq serve at %s: %w", cfg.AdminAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, body, err
}

// printTrace writes the trace grouped: where the key stands, the steps of
// the whole key (deliveries accepted, duplicates, unrouted), then each
// route's steps under where that route stands; each group in time order.
func printTrace(w io.Writer, t trace.Trace) {
	now := nowText(t.Now)
	if t.Now.Route != "" && len(t.Routes) > 1 {
		now = "route " + t.Now.Route + " " + now
	}
	fmt.Fprintf(w, "%s (provider %s): %s\n", cell(t.Key), cell(t.Provider), cell(now)) // nowText holds a resolution's "by", anyone's text
	if t.StepsOmitted > 0 {
		fmt.Fprintf(w, "(the first %d steps are left out; the last %d follow)\n", t.StepsOmitted, len(t.Steps))
	}
	byRoute := map[string][]trace.Event{}
	for _, s := range t.Steps {
		byRoute[s.Route] = append(byRoute[s.Route], s)
	}
	if steps := byRoute[""]; len(steps) > 0 {
		fmt.Fprintf(w, "\nthe key, for every route:\n")
		printSteps(w, steps)
	}
	for _, rt := range t.Routes {
		fmt.Fprintf(w, "\nroute %s: %s (attempts %d, replays %d, DLQ entries %d)\n", cell(rt.Route), cell(nowText(rt.Now)), rt.Attempts, rt.Replays, rt.DeadLetters)
		if steps := byRoute[rt.Route]; len(steps) > 0 {
			printSteps(w, steps)
		}
	}
	fmt.Fprintf(w, "\naccepted %d, attempts %d, duplicates %d", t.Accepted, t.Attempts, t.Duplicates)
	if t.Unrouted > 0 {
		fmt.Fprintf(w, ", unrouted %d", t.Unrouted)
	}
	if t.Suppressed > 0 {
		fmt.Fprintf(w, ", suppressed as replays %d", t.Suppressed)
	}
	fmt.Fprintf(w, ", replays %d, DLQ entries %d\n", t.Replays, t.DeadLetters)
}

// printSteps writes steps as a table.
func printSteps(w io.Writer, steps []trace.Event) {
	tw := newTable(w)
	row(tw, "TIME", "STEP", "ATTEMPT", "DETAIL")
	for _, s := range steps {
		step, detail := s.Kind, ""
		switch s.Kind {
		case trace.KindAccepted, trace.KindRetried, trace.KindReplayed, trace.KindBackfilled:
			detail = fmt.Sprintf("request %s, received %s, origin %s, %s[%d]@%d", s.RequestID, s.ReceivedAt, s.Origin, s.Topic, s.Partition, s.Offset)
			if s.ReplayID != "" {
				detail += ", replay " + s.ReplayID
			}
		case trace.KindOutcome:
			step = s.Status
			switch s.Status {
			case outcome.StatusRetrying:
				detail = "to tier " + s.Tier
			case outcome.StatusParked:
				detail = "in " + s.Lane
			case outcome.StatusDead:
				detail = "to the DLQ (" + s.Reason + ")"
			case outcome.StatusUnrouted:
				detail = "no route of the provider matched: nothing delivered"
			case "suppressed":
				detail = "suppressed as a replay of " + s.ReplayOf + " (ingest: the same signed bytes within the provider's replay_window; nothing produced)"
			}
			if s.TransformSkipped {
				detail = "skipped by its transform: nothing sent"
			}
			if s.Error != "" {
				detail = strings.TrimPrefix(detail+"; error: "+short(s.Error, 120), "; ")
			}
			if s.Transform != "" {
				sha := s.TransformSHA256
				if len(sha) > 12 {
					sha = sha[:12]
				}
				detail = strings.TrimPrefix(detail+"; transform "+s.Transform+" sha256:"+sha, "; ")
			}
			if s.DurationMS > 0 {
				detail = strings.TrimSpace(detail + fmt.Sprintf(" (%d ms)", s.DurationMS))
			}
		case trace.KindWaiting:
			detail = fmt.Sprintf("tier %s, due %s", s.Tier, s.DueAt) + retryAfterText(s.DueAt, s.RetryAfter)
		case trace.KindDeadLetter:
			detail = fmt.Sprintf("ref %s, %s, %d errors", s.Ref, s.Reason, s.Errors)
			if s.Resolution != nil {
				detail += fmt.Sprintf("; %s by %s at %s", s.Resolution.Resolution, s.Resolution.By, when(s.Resolution.At))
				if s.Resolution.Note != "" {
					detail += ": " + short(s.Resolution.Note, 80)
				}
			}
		}
		att := "-"
		if s.Attempt > 0 {
			att = fmt.Sprint(s.Attempt)
		}
		row(tw, s.At.UTC().Format("2006-01-02 15:04:05.000Z"), step, att, detail)
	}
	tw.Flush()
}

func nowText(n trace.Now) string {
	switch n.State {
	case trace.StateWaiting:
		return fmt.Sprintf("waiting in retry tier %s, due %s (attempt %d)", n.Tier, n.DueAt, n.NextAttempt) + retryAfterText(n.DueAt, n.RetryAfter)
	case trace.StateParked:
		return fmt.Sprintf("parked in %s since %s, until its destination has room", n.Lane, n.Since)
	case trace.StateDead:
		s := "dead, DLQ entry " + n.Ref
		if n.Resolution != nil {
			s += fmt.Sprintf(" (%s by %s)", n.Resolution.Resolution, n.Resolution.By)
		}
		return s
	case trace.StateDone:
		return "done at " + n.Since
	case trace.StateUnrouted:
		return "unrouted: it matched no route of its provider, so nothing was delivered (" + n.Since + ")"
	case trace.StateSuppressed:
		return "suppressed as a replay of " + n.ReplayOf + " (" + n.Since + "): ingest produced nothing; a real event is delivered when its sender sends it again after the provider's replay_window"
	}
	return "accepted, not processed yet"
}

// retryAfterText says why a retry waits until due when its destination
// named a date (Retry-After): "" when it named none.
func retryAfterText(due, retryAfter string) string {
	if retryAfter == "" {
		return ""
	}
	s := "; the destination asked to be called again no earlier than " + retryAfter + " (Retry-After)"
	d, derr := headers.ParseTime(due)
	ra, rerr := headers.ParseTime(retryAfter)
	if derr == nil && rerr == nil && d.Before(ra) {
		s += ", later than the route's last retry tier: it is called at the tier's time"
	}
	return s
}
