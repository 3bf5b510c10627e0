package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
)

// TestPrintTraceEscapesControls: a trace's text comes from providers,
// destinations and operators; no byte of it reaches the terminal as a
// control character, the first line (what the key is now) included
// (issue 25: a resolution's "by" printed a raw ESC).
func TestPrintTraceEscapesControls(t *testing.T) {
	esc := "\x1b[2J\x1b]0;owned\x07"
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	res := &store.Resolution{Ref: "0-1", Resolution: "discarded", By: "mallory" + esc, Note: "n" + esc, At: at}
	tr := trace.Trace{
		Key: "stripe:evt" + esc, Provider: "stripe" + esc,
		Now: trace.Now{State: trace.StateDead, Ref: "0-1", Resolution: res},
		Steps: []trace.Event{
			{Kind: trace.KindOutcome, At: at, Status: "dead", Reason: "permanent" + esc, Error: "400" + esc},
			{Kind: trace.KindDeadLetter, At: at, Ref: "0-1", Reason: "permanent", Resolution: res},
		},
	}
	var b strings.Builder
	printTrace(&b, tr)
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("trace output holds a control character:\n%q", out)
	}
	if !strings.Contains(strings.SplitN(out, "\n", 2)[0], "mallory") {
		t.Fatalf("first line %q: want the resolution's author, escaped", strings.SplitN(out, "\n", 2)[0])
	}
}

// TestPrintTraceByRoute: the key's own steps, then each route's under
// where it stands; the first line names the route the key stands on.
func TestPrintTraceByRoute(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tr := trace.Trace{
		Key: "stripe:evt_1", Provider: "stripe",
		Now: trace.Now{State: trace.StateWaiting, Route: "crm", Tier: "5m", DueAt: "2026-11-26T12:05:00.000Z", NextAttempt: 2},
		Routes: []trace.RouteTrace{
			{Route: "billing", Now: trace.Now{State: trace.StateDone, Since: "2026-11-26T12:00:00.001Z"}, Attempts: 1},
			{Route: "crm", Now: trace.Now{State: trace.StateWaiting, Tier: "5m", DueAt: "2026-11-26T12:05:00.000Z", NextAttempt: 2}, Attempts: 1},
		},
		Steps: []trace.Event{
			{Kind: trace.KindAccepted, At: at, Origin: "ingest"},
			{Kind: trace.KindOutcome, At: at, Status: "done", Route: "billing"},
			{Kind: trace.KindOutcome, At: at, Status: "retrying", Tier: "5m", Route: "crm", Error: "HTTP 503"},
			{Kind: trace.KindOutcome, At: at, Status: "duplicate"},
		},
		Accepted: 1, Attempts: 2, Duplicates: 1,
	}
	var b strings.Builder
	printTrace(&b, tr)
	out := b.String()
	order := []string{"route crm waiting in retry tier 5m", "the key, for every route:", "accepted", "duplicate",
		"route billing: done at", "done", "route crm: waiting in retry tier 5m", "to tier 5m; error: HTTP 503", "accepted 1, attempts 2, duplicates 1"}
	inOrder(t, out, order)
}

// TestPrintTraceSuppressed: a key ingest suppressed as a replay says so,
// naming the key it repeated, on its first line and its step.
func TestPrintTraceSuppressed(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tr := trace.Trace{
		Key: "github:b", Provider: "github",
		Now:        trace.Now{State: trace.StateSuppressed, ReplayOf: "github:a", Since: "2026-11-26T12:00:00.000Z"},
		Steps:      []trace.Event{{Kind: trace.KindOutcome, At: at, Status: "suppressed", ReplayOf: "github:a", Attempt: 1}},
		Suppressed: 1,
	}
	var b strings.Builder
	printTrace(&b, tr)
	out := b.String()
	order := []string{"github:b (provider github): suppressed as a replay of github:a", "the key, for every route:",
		"suppressed", "suppressed as a replay of github:a (ingest:", "accepted 0, attempts 0, duplicates 0, suppressed as replays 1"}
	inOrder(t, out, order)
}

// inOrder fails the test unless out holds each of order, in that order.
func inOrder(t *testing.T, out string, order []string) {
	t.Helper()
	rest := out
	for _, want := range order {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("trace output lacks %q after what came before:\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
}

// TestRetryAfterText: a wait the destination asked for says so, and says
// when the route's tiers made it shorter.
func TestRetryAfterText(t *testing.T) {
	for _, tt := range []struct {
		name, due, ra, want string
	}{
		{"none", "2026-11-26T12:05:00.000Z", "", ""},
		{"honoured", "2026-11-26T12:05:00.000Z", "2026-11-26T12:04:30.000Z",
			"; the destination asked to be called again no earlier than 2026-11-26T12:04:30.000Z (Retry-After)"},
		{"capped by the last tier", "2026-11-26T12:05:00.000Z", "2026-11-26T12:20:00.000Z",
			"; the destination asked to be called again no earlier than 2026-11-26T12:20:00.000Z (Retry-After), later than the route's last retry tier: it is called at the tier's time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfterText(tt.due, tt.ra); got != tt.want {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
