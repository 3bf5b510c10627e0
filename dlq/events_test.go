package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// evOutcome is an outcome record the Events view and dlq events list.
type evOutcome struct {
	key, provider, route, event, status string
	ago                                 time.Duration
	extra                               string
}

// evTraceID is the trace id of stripe:evt_ev_a's outcome.
const evTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

var evOutcomes = []evOutcome{
	{"stripe:evt_ev_e", "stripe", "billing", "charge.failed", "done", 90 * time.Minute, ""},
	{"stripe:evt_ev_a", "stripe", "billing", "invoice.paid", "done", 5 * time.Minute, `,"trace_id":"` + evTraceID + `"`},
	{"stripe:evt_ev_b", "stripe", "crm", "invoice.paid", "dead", 4 * time.Minute, `,"dead_reason":"permanent","error":"HTTP 400 Bad Request"`},
	{"github:ev-c", "github", "default", "push", "retrying", 3 * time.Minute, `,"tier":"1m","error":"HTTP 503"`},
	{"github:ev-d", "github", "default", "pull_request", "done", 2 * time.Minute, ""},
}

// TestEventsView drives the console's Events view in headless Chromium at
// 1400 and 390 px: the outcomes of 55 deliveries newest first, in two
// pages (older, newer), then
// filtered by provider, route, event type, status, since and until (each
// showing exactly its rows), a row's trace id, its Trace link opening the
// key's trace, no sideways scroll at 390 px. dlq events lists the same rows
// from the index itself before dlq serve holds it, and by asking dlq
// serve after. Screenshots: screenshotDir.
func TestEventsView(t *testing.T) {
	skipShort(t)
	ctx := startBrowser(t, 1400, 900)
	sys, _ := withEntries(t, dead{"stripe", "evt_ev_b", headers.DeadPermanent, 4 * time.Minute})
	cl := kafkatest.Client(t, sys.Brokers)
	now := time.Now()
	// 50 held outcomes of provider bulk between evt_ev_a and evt_ev_e: the
	// list is two pages.
	outcomes := evOutcomes
	for i := range 50 {
		outcomes = append(outcomes, evOutcome{fmt.Sprintf("bulk:%02d", i), "bulk", "lane1", "bulk.evt", "held", 6*time.Minute + time.Duration(i)*time.Second, ""})
	}
	var recs []*kgo.Record
	for _, o := range outcomes {
		at := now.Add(-o.ago)
		r := &kgo.Record{Topic: sys.Names.Outcomes, Key: []byte(o.key), Timestamp: at,
			Value: fmt.Appendf(nil, `{"key":%q,"provider":%q,"event_type":%q,"status":%q,"attempt":1,"origin":"ingest","duration_ms":5,"time":%q,"route":%q%s}`,
				o.key, o.provider, o.event, o.status, headers.FormatTime(at), o.route, o.extra)}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// dlq events reads the index itself while no dlq serve holds it.
	rows := sys.DLQ(nil, "events", "--provider", "github", "--json").Want(t, 0).JSONLines(t)
	if len(rows) != 3 || rows[0]["key"] != "github:ev-d" || rows[1]["key"] != "github:ev-c" || rows[2]["kind"] != "page" || rows[2]["next_cursor"] != "" {
		t.Fatalf("dlq events --provider github --json: %v", rows)
	}

	svc := sys.StartDLQServe(adminToken, nil)
	shots := screenshotDir(t)
	const wait = 45 * time.Second
	view := pageText("v-events")
	shown := `Array.from(document.querySelectorAll('#ev-table tbody tr[data-key]')).map((tr) => tr.dataset.key).join(' ')`
	// filter sets the form's fields (the others emptied), applies it and
	// waits for exactly the keys given, newest first.
	filter := func(at string, set map[string]string, keys ...string) {
		t.Helper()
		js := ""
		for _, name := range []string{"provider", "route", "event_type", "status", "since", "until"} {
			js += fmt.Sprintf(`document.querySelector('#events-form [name=%s]').value = %q;`, name, set[name])
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](js+` document.querySelector('#events-form button[type=submit]').click(); null`)); err != nil {
			t.Fatal(err)
		}
		want := strings.Join(keys, " ")
		waitPage(t, ctx, fmt.Sprintf("at %s, filtered by %v, the rows of %s", at, set, want),
			fmt.Sprintf(`!document.getElementById("v-events").hasAttribute("aria-busy") && %s === %q`, shown, want), shown+`+" | "+`+view, wait)
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+svc.Addr+"/ui/#token="+adminToken),
		chromedp.Click(chromedp.CSS("#tab-events")),
	); err != nil {
		t.Fatal(err)
	}
	// Every outcome, newest first, 50 a page, once the index has read them
	// all.
	var bulk []string
	for i := range 50 {
		bulk = append(bulk, fmt.Sprintf("bulk:%02d", i))
	}
	first := append([]string{"github:ev-d", "github:ev-c", "stripe:evt_ev_b", "stripe:evt_ev_a"}, bulk[:46]...)
	second := append(bulk[46:], "stripe:evt_ev_e")
	for deadline := time.Now().Add(wait); ; {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#events-form button[type=submit]"))); err != nil {
			t.Fatal(err)
		}
		waitPage(t, ctx, "the Events view loads", `document.getElementById("v-events").dataset.loaded !== undefined && !document.getElementById("v-events").hasAttribute("aria-busy")`, view, wait)
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](shown))
		if got == strings.Join(first, " ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Events view shows %q, want %q", got, strings.Join(first, " "))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if id, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#ev-table tr[data-key="stripe:evt_ev_a"] td.trace-id').textContent`)); id != evTraceID {
		t.Errorf("trace id shown for stripe:evt_ev_a: %q, want %s", id, evTraceID)
	}
	screenshot(t, ctx, shots, "events-1400.png")
	// Older, then newer again.
	page := func(button string, keys []string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(button))); err != nil {
			t.Fatal(err)
		}
		want := strings.Join(keys, " ")
		waitPage(t, ctx, button+" shows "+want, fmt.Sprintf(`!document.getElementById("v-events").hasAttribute("aria-busy") && %s === %q`, shown, want), shown, wait)
	}
	page("#ev-older", second)
	if off, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("ev-older").disabled`)); !off {
		t.Error("older is enabled on the last page")
	}
	page("#ev-newer", first)

	for _, width := range []int{1400, 390} {
		at := fmt.Sprintf("%d px", width)
		if width != 1400 {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), 844), chromedp.Reload(), chromedp.Click(chromedp.CSS("#tab-events"))); err != nil {
				t.Fatal(err)
			}
		}
		filter(at, map[string]string{"provider": "github"}, "github:ev-d", "github:ev-c")
		filter(at, map[string]string{"route": "crm"}, "stripe:evt_ev_b")
		filter(at, map[string]string{"event_type": "invoice.paid"}, "stripe:evt_ev_b", "stripe:evt_ev_a")
		filter(at, map[string]string{"status": "done"}, "github:ev-d", "stripe:evt_ev_a", "stripe:evt_ev_e")
		filter(at, map[string]string{"since": "1h", "status": "done"}, "github:ev-d", "stripe:evt_ev_a")
		filter(at, map[string]string{"until": "1h"}, "stripe:evt_ev_e")
		filter(at, map[string]string{"provider": "stripe", "route": "billing", "status": "done", "since": "1h"}, "stripe:evt_ev_a")
		noHorizontalScroll(t, ctx, at)
		screenshot(t, ctx, shots, fmt.Sprintf("events-filtered-%d.png", width))
		filter(at, map[string]string{"provider": "nobody"})
		if empty, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText("ev-table"))); !strings.Contains(empty, "No outcome matches.") {
			t.Errorf("at %s, no match shows %q", at, empty)
		}
	}
	saveScreenshot(t, ctx, chromedp.CaptureScreenshot(), shots, "events-390-screen.png")

	// A row's Trace link opens the key's trace.
	filter("390 px", map[string]string{"status": "dead"}, "stripe:evt_ev_b")
	link := `#ev-table tr[data-key="stripe:evt_ev_b"] a.trace`
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS(`#trace[data-key="stripe:evt_ev_b"]`))); err != nil {
		t.Fatalf("the Trace link of stripe:evt_ev_b: %v", err)
	}
	if steps, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText("t-steps"))); !strings.Contains(steps, "HTTP 400 Bad Request") {
		t.Errorf("the trace of stripe:evt_ev_b shows %q", steps)
	}

	// With dlq serve holding the index, dlq events asks it.
	out := sys.DLQ(map[string]string{"HOOKLINE_ADMIN_TOKEN": adminToken, "HOOKLINE_ADMIN_ADDR": svc.Addr}, "events", "--status", "done", "--limit", "2").Want(t, 0).Stdout
	if !strings.Contains(out, "github:ev-d") || !strings.Contains(out, "stripe:evt_ev_a") || strings.Contains(out, "evt_ev_e") || !strings.Contains(out, evTraceID) || !strings.Contains(out, "next page: --cursor ") {
		t.Fatalf("dlq events --status done --limit 2 through dlq serve:\n%s", out)
	}
	t.Logf("dlq events --status done --limit 2:\n%s", out)
}
