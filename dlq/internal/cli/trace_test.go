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
