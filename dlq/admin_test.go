package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/proctest"
	"github.com/hookline/hookline/schemas"
)

const adminToken = "test-admin-token-5f1c9a7e"

// call makes one admin API request; token "" sends no Authorization.
func call(t *testing.T, method, url, token string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestAdminAPI: no token and a wrong token get 401 on every API route,
// writes included, and change nothing; the right one gets the data, a
// replay and a resolution.
func TestAdminAPI(t *testing.T) {
	skipShort(t)
	sys, recs := withEntries(t,
		dead{"stripe", "evt_api_a", headers.DeadPermanent, 2 * time.Minute},
		dead{"stripe", "evt_api_b", headers.DeadExhausted, time.Minute},
	)
	a, b := refOf(recs[0]), refOf(recs[1])
	svc := sys.StartDLQServe(adminToken, nil)
	base := "http://" + svc.Addr
	raw0 := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.Raw)
	status0 := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.DLQStatus)

	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/dlq", nil},
		{"GET", "/dlq/stats", nil},
		{"GET", "/dlq/" + a, nil},
		{"POST", "/dlq/replay", map[string]any{"refs": []string{a}, "by": "mallory"}},
		{"POST", "/dlq/" + a + "/resolve", map[string]any{"resolution": "ignored", "note": "x", "by": "mallory"}},
		{"GET", "/nope", nil},
	}
	for _, r := range routes {
		for _, tok := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + adminToken + "x", "Basic " + adminToken, adminToken} {
			code, h, body := call(t, r.method, base+r.path, tok, r.body)
			if code != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %d %s, want 401", r.method, r.path, tok, code, body)
			}
		}
	}
	if r, s := kafkatest.EndOffsets(t, sys.Brokers, sys.Names.Raw), kafkatest.EndOffsets(t, sys.Brokers, sys.Names.DLQStatus); r != raw0 || s != status0 {
		t.Fatalf("refused requests wrote: raw %d -> %d, dlq-status %d -> %d", raw0, r, status0, s)
	}

	auth := "Bearer " + adminToken
	code, _, body := call(t, "GET", base+"/dlq?limit=1", auth, nil)
	var page struct {
		Entries []map[string]any `json:"entries"`
		Total   int              `json:"total"`
	}
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || page.Total != 2 || len(page.Entries) != 1 || page.Entries[0]["ref"] != b {
		t.Fatalf("GET /dlq?limit=1: %d %s, want the newest of 2 (%s)", code, body, b)
	}
	if code, _, body := call(t, "GET", base+"/dlq?reason=exhausted&provider=stripe&since=1h", "bearer "+adminToken, nil); code != 200 || !strings.Contains(string(body), `"total":1`) {
		t.Fatalf("GET /dlq filtered: %d %s", code, body)
	}
	if code, _, body := call(t, "GET", base+"/dlq/stats", auth, nil); code != 200 || !strings.Contains(string(body), `"unresolved":2`) {
		t.Fatalf("GET /dlq/stats: %d %s", code, body)
	}
	code, _, body = call(t, "GET", base+"/dlq/"+a, auth, nil)
	var detail map[string]any
	if err := json.Unmarshal(body, &detail); code != 200 || err != nil || detail["body"] != string(recs[0].Value) || len(detail["errors"].([]any)) != 1 {
		t.Fatalf("GET /dlq/%s: %d %s", a, code, body)
	}
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/dlq/x:1", nil, 400},
		{"GET", "/dlq?reason=tired", nil, 400},
		{"GET", "/dlq?limit=0", nil, 400},
		{"GET", fmt.Sprintf("/dlq/%d:%d", recs[0].Partition, recs[0].Offset+100), nil, 404},
		{"GET", "/nope", nil, 404},
		{"POST", "/dlq/replay", map[string]any{"by": "alice"}, 400},
		{"POST", "/dlq/replay", map[string]any{"refs": []string{a}}, 400},
		{"POST", "/dlq/replay", map[string]any{"refs": []string{a}, "all": true, "by": "alice"}, 400},
		{"POST", "/dlq/" + b + "/resolve", map[string]any{"resolution": "replayed", "note": "x", "by": "alice"}, 400},
		{"POST", "/dlq/" + b + "/resolve", map[string]any{"resolution": "ignored", "by": "alice"}, 400},
	} {
		if code, _, body := call(t, c.method, base+c.path, auth, c.body); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
		}
	}

	code, _, body = call(t, "POST", base+"/dlq/replay", auth, map[string]any{"refs": []string{a}, "by": "alice", "note": "api"})
	var ans struct {
		Results []map[string]any `json:"results"`
		Sent    int              `json:"sent"`
	}
	if err := json.Unmarshal(body, &ans); code != 200 || err != nil || ans.Sent != 1 || ans.Results[0]["replay_id"] != "dlq:"+a {
		t.Fatalf("POST /dlq/replay: %d %s", code, body)
	}
	code, _, body = call(t, "POST", base+"/dlq/"+b+"/resolve", auth, map[string]any{"resolution": "ignored", "note": "test event", "by": "alice"})
	if code != 200 {
		t.Fatalf("POST /dlq/%s/resolve: %d %s", b, code, body)
	}
	if err := schemas.Validate(schemas.DLQStatus, body); err != nil {
		t.Fatalf("resolve answer fails the dlq-status schema: %v\n%s", err, body)
	}
	res := statusRecords(t, sys, 2)
	if res[a]["resolution"] != "replayed" || res[a]["by"] != "alice" || res[b]["resolution"] != "ignored" {
		t.Fatalf("resolutions: %v", res)
	}
	if code, _, body := call(t, "GET", base+"/dlq?unresolved=true", auth, nil); code != 200 || !strings.Contains(string(body), `"total":0`) {
		t.Fatalf("GET /dlq?unresolved=true after resolving both: %d %s", code, body)
	}

	// The page itself carries no data and needs no token.
	code, h, body := call(t, "GET", base+"/ui/", "", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") ||
		!strings.Contains(string(body), "/ui/app.js") {
		t.Fatalf("GET /ui/: %d %v", code, h)
	}
}

// chromiumPath finds Debian's chromium (or another Chromium build).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// startBrowser starts headless Chromium with a window of width x height
// and returns a context for it, with a 90 s deadline for what the test
// does in it. Without Chromium it skips, and fails under CI=true (.ci/run
// installs it).
func startBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	browser := chromiumPath()
	if browser == "" {
		msg := "no chromium on PATH (Debian: apt-get install chromium): the console is not tested in a browser"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI installs it (.ci/run)")
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // start the browser, without a deadline
		t.Fatalf("start %s: %v", browser, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// screenshotDir is where a browser test keeps its screenshots:
// HOOKLINE_SCREENSHOT_DIR when set (CI artifacts, for instance), else
// bin/screenshots/<test> in the repository (ignored by git, kept after
// the run, unlike t.TempDir).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HOOKLINE_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join(proctest.RepoRoot(), "bin", "screenshots")
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the whole page as dir/name and logs its path.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	saveScreenshot(t, ctx, chromedp.FullScreenshot(100), dir, name)
}

// saveScreenshot saves what capture takes as dir/name and logs its path.
func saveScreenshot(t *testing.T, ctx context.Context, capture chromedp.Action[[]byte], dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// TestTriagePage drives the console's dead letters in headless Chromium:
// it takes the token from the URL fragment, lists the entries, opens one
// with its error history and body, and its Replay button puts the record
// on webhooks.raw. Screenshots: screenshotDir.
func TestTriagePage(t *testing.T) {
	skipShort(t)
	ctx := startBrowser(t, 1500, 950)
	sys, recs := withEntries(t,
		dead{"stripe", "evt_page_a", headers.DeadPermanent, 3 * time.Minute},
		dead{"stripe", "evt_page_b", headers.DeadExhausted, 2 * time.Minute},
		dead{"outcomes", "evt_page_c", headers.DeadPermanent, time.Minute},
	)
	ref := refOf(recs[0])
	svc := sys.StartDLQServe(adminToken, nil)
	raw := sys.Read(sys.Names.Raw)

	shots := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		screenshot(t, ctx, shots, name)
	}
	row := fmt.Sprintf(`#entries tr[data-ref=%q]`, ref)
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+svc.Addr+"/ui/#token="+adminToken),
		chromedp.Click(chromedp.CSS("#tab-dlq")),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.SendKeys(chromedp.CSS("#by"), "pat"),
		chromedp.Click(chromedp.CSS("#auth button[type=submit]")),
		// The submit reloads the lists and replaces their rows: click one
		// of the new rows, not one about to go.
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#entries:not([aria-busy]) tr[data-ref=%q]`, ref))),
		chromedp.Click(chromedp.CSS(row+" td")),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-ref=%q] #d-replay:enabled`, ref))),
	)
	if err != nil {
		t.Fatalf("open entry %s: %v", ref, err)
	}
	hash, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.hash"))
	if hash != "" {
		t.Errorf("the token stayed in the address bar: %q", hash)
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#d-body")))
	if err != nil || !strings.Contains(body, `"id": "evt_page_a"`) {
		t.Fatalf("body shown: %q %v", body, err)
	}
	history, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#d-errors")))
	if !strings.Contains(history, "HTTP 400 Bad Request") {
		t.Fatalf("error history shown: %q", history)
	}
	shot("triage-entry.png")

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#d-replay")),
		chromedp.WaitVisible(chromedp.CSS("#status.ok")),
	); err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
		t.Fatalf("replay button: %v (status %q)", err, status)
	}
	status, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
	resolution, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#d-resolution-text")))
	if !strings.Contains(status, "dlq:"+ref) || !strings.HasPrefix(resolution, "replayed by pat") {
		t.Fatalf("after replay: status %q, resolution %q", status, resolution)
	}
	shot("triage-replayed.png")

	// Resolve another entry as ignored, from its page.
	other := refOf(recs[2])
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#entries:not([aria-busy]) tr[data-ref=%q]`, other))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#entries tr[data-ref=%q] td`, other))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-ref=%q] #d-resolve:enabled`, other))),
		chromedp.SendKeys(chromedp.CSS("#d-note"), "test event from the dashboard"),
		chromedp.Click(chromedp.CSS("#d-resolve")),
	); err != nil {
		t.Fatalf("resolve %s: %v", other, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("status").textContent.startsWith("Resolved %s ")`, other))); err != nil {
		t.Fatalf("resolve %s: %v", other, err)
	}
	if resolution, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#d-resolution-text"))); !strings.HasPrefix(resolution, "ignored by pat") {
		t.Fatalf("after resolve: resolution %q", resolution)
	}

	// Each entry links to its key's trace (GET /events/{key}): the entry
	// just resolved shows there with its resolution, once the index has it.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#entries a.trace[data-key=%q]`, string(recs[1].Key))))); err != nil {
		t.Fatalf("no trace link in the row of %s: %v", refOf(recs[1]), err)
	}
	key := string(recs[2].Key) // resolved: out of the unresolved list, still shown in the detail
	link := fmt.Sprintf(`#detail[data-ref=%q] #d-trace a.trace[data-key=%q]`, other, key)
	var steps string
	for deadline := time.Now().Add(30 * time.Second); ; {
		// The link opens the Trace view: back to the dead letters for it.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#tab-dlq")), chromedp.WaitVisible(chromedp.CSS(link)), chromedp.Click(chromedp.CSS(link)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#trace[data-key=%q]`, key)))); err != nil {
			t.Fatalf("trace link of %s: %v", key, err)
		}
		steps, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#t-steps")))
		if strings.Contains(steps, "ref "+other+", permanent; ignored by pat") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace of %s shows %q, want its DLQ entry %s ignored by pat", key, steps, other)
		}
		time.Sleep(300 * time.Millisecond)
	}
	shot("triage-trace.png")

	raw.Until(30*time.Second, "the replay on "+sys.Names.Raw, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if headers.Value(r, headers.ReplayID) == "dlq:"+ref && string(r.Value) == string(recs[0].Value) {
				return true
			}
		}
		return false
	})
	res := statusRecords(t, sys, 2)
	if res[ref]["resolution"] != "replayed" || res[ref]["by"] != "pat" || res[other]["resolution"] != "ignored" {
		t.Fatalf("resolutions after the page's replay and resolve: %v", res)
	}
}

// TestServeKeepsEveryResolution: one dlq serve writing resolutions one
// request at a time, several to the same partition of webhooks.dlq-status,
// loses none. (Checking the status topic before every write purged it from
// the client, which reset the idempotent producer's sequence numbers: the
// broker then took each later write to a partition for a duplicate of the
// first and dropped it, answering with the old offset.)
func TestServeKeepsEveryResolution(t *testing.T) {
	skipShort(t)
	var ds []dead
	for i := range 8 {
		ds = append(ds, dead{"stripe", fmt.Sprintf("evt_keep_%d", i), headers.DeadPermanent, time.Minute})
	}
	sys, recs := withEntries(t, ds...)
	svc := sys.StartDLQServe(adminToken, nil)
	for _, r := range recs {
		code, _, body := call(t, "POST", "http://"+svc.Addr+"/dlq/"+refOf(r)+"/resolve", "Bearer "+adminToken,
			map[string]any{"resolution": "ignored", "note": "keep test", "by": "alice"})
		if code != http.StatusOK {
			t.Fatalf("resolve %s: %d %s", refOf(r), code, body)
		}
	}
	res := statusRecords(t, sys, len(recs))
	for _, r := range recs {
		if res[refOf(r)]["by"] != "alice" {
			t.Fatalf("resolution of %s lost: have %d of %d", refOf(r), len(res), len(recs))
		}
	}
}

// waitPage waits, up to d, until the JavaScript expression cond is true
// in the page, and fails with what the page showed (the JavaScript
// expression seen, a string) when it never is.
func waitPage(t *testing.T, ctx context.Context, what, cond, seen string, d time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(d))); err != nil {
		got, err2 := chromedp.Run(ctx, chromedp.Evaluate[string](seen))
		t.Fatalf("%s: not within %v (%v); the page showed: %q %v", what, d, err, got, err2)
	}
}

// pageText is a JavaScript expression for the text of the element id.
func pageText(id string) string {
	return fmt.Sprintf(`(document.getElementById(%q) || {textContent: "(no #%s)"}).textContent`, id, id)
}

// noHorizontalScroll fails when the page is wider than the window.
func noHorizontalScroll(t *testing.T, ctx context.Context, at string) {
	t.Helper()
	w, err := chromedp.Run(ctx, chromedp.Evaluate[[]int]("[document.documentElement.scrollWidth, window.innerWidth]"))
	if err != nil || len(w) != 2 {
		t.Fatalf("widths at %s: %v %v", at, w, err)
	}
	if w[0] > w[1] {
		t.Errorf("the overview scrolls sideways at %s: scrollWidth %d > innerWidth %d", at, w[0], w[1])
	}
}

// TestConsole drives the console in headless Chromium at 1400 and 390 px
// wide: with no token the overview says a token is required; with it the
// overview shows the status of a provider from the topics, refreshed, and
// does not scroll sideways; a trace search by key shows the key's trace;
// the Waiting view loads; Pause with a wrong token and with none is refused
// and said so, and changes nothing; with the token it pauses the provider
// (GET /providers, what dlq serve follows of webhooks.control, says so).
// Screenshots: screenshotDir.
func TestConsole(t *testing.T) {
	skipShort(t)
	ctx := startBrowser(t, 1400, 900)
	sys, recs := withEntries(t,
		dead{"stripe", "evt_console_a", headers.DeadPermanent, 2 * time.Minute},
		dead{"stripe", "evt_console_b", headers.DeadExhausted, time.Minute},
	)
	svc := sys.StartDLQServe(adminToken, nil)
	base := "http://" + svc.Addr
	shots := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		screenshot(t, ctx, shots, name)
	}
	const wait = 45 * time.Second
	overview := pageText("v-overview")
	providerSetting := func() map[string]any {
		t.Helper()
		code, _, body := call(t, "GET", base+"/providers", "Bearer "+adminToken, nil)
		var ans struct {
			Providers []map[string]any `json:"providers"`
		}
		if err := json.Unmarshal(body, &ans); code != 200 || err != nil {
			t.Fatalf("GET /providers: %d %s", code, body)
		}
		for _, p := range ans.Providers {
			if p["provider"] == "stripe" {
				return p
			}
		}
		t.Fatalf("GET /providers has no stripe: %s", body)
		return nil
	}

	// No token: the overview says one is required.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(base+"/ui/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the overview without a token says one is required",
		`document.getElementById("ov-error").textContent.includes("Token required")`, overview, wait)
	if title, _ := chromedp.Run(ctx, chromedp.Title()); title != "hookline console" {
		t.Errorf("title %q", title)
	}
	shot("console-no-token-1400.png")

	// The token and a name, entered once: the overview shows stripe.
	stripeRow := `document.querySelector('#ov-table tr[data-name="stripe"]')`
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.SendKeys(chromedp.CSS("#by"), "pat"),
		chromedp.Click(chromedp.CSS("#auth button[type=submit]")),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the overview shows provider stripe with its dead letters",
		stripeRow+` !== null && `+stripeRow+`.textContent.includes("2") && document.getElementById("ov-refreshed").textContent.startsWith("refreshed ")`,
		overview, wait)
	if errLine, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText("ov-error"))); errLine != "" {
		t.Errorf("the overview's error line after a good refresh: %q", errLine)
	}
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText("ov-verdict"))); v != "degraded" {
		t.Errorf("verdict shown %q, want degraded (unresolved dead letters)", v)
	}
	noHorizontalScroll(t, ctx, "1400 px")
	shot("console-overview-1400.png")

	// A trace search: the dead letter's key, once the trace index has it.
	key := string(recs[0].Key)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#tab-trace")), chromedp.SendKeys(chromedp.CSS("#trace-key"), key)); err != nil {
		t.Fatal(err)
	}
	traced := fmt.Sprintf(`document.querySelector('#trace[data-key=%q]') !== null && !document.getElementById("trace").hidden && document.getElementById("t-steps").textContent.includes("ref %s")`, key, refOf(recs[0]))
	for deadline := time.Now().Add(wait); ; {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#trace-form button[type=submit]"))); err != nil {
			t.Fatal(err)
		}
		// The answer or an error line, whichever comes.
		waitPage(t, ctx, "an answer to the trace search", `(`+traced+`) || document.getElementById("trace-error").textContent.startsWith("Nothing of")`, pageText("v-trace"), wait)
		if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](traced)); ok {
			break
		}
		if time.Now().After(deadline) {
			seen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText("v-trace")))
			t.Fatalf("the trace of %s never showed its DLQ entry %s: %q", key, refOf(recs[0]), seen)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if now, _ := chromedp.Run(ctx, chromedp.Evaluate[string](pageText("t-now"))); !strings.Contains(now, "dead, DLQ entry "+refOf(recs[0])) {
		t.Errorf("trace says %q", now)
	}
	shot("console-trace-1400.png")

	// What waits: the view loads (nothing does in this test).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#tab-waiting"))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the Waiting view loads", `document.getElementById("v-waiting").dataset.loaded !== undefined`, pageText("v-waiting"), wait)
	shot("console-waiting-1400.png")

	// Pause, with a wrong token then with none: refused, said, not done.
	pause := `#ov-table tr[data-name="stripe"] button.pause`
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#tab-overview")),
		chromedp.WaitVisible(chromedp.CSS(pause)),
		chromedp.SendKeys(chromedp.CSS("#token"), "wrong-token-0123456789"),
		chromedp.Click(chromedp.CSS("#auth button[type=submit]")),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the overview says the wrong token is refused",
		`document.getElementById("ov-error").textContent.includes("Token refused") && document.getElementById("auth-state").textContent.includes("Token refused")`,
		overview+`+" | "+`+pageText("auth-state"), wait)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(pause))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "Pause with a wrong token is refused", `document.getElementById("status").textContent.includes("pause not done. Token refused")`, pageText("status"), wait)
	shot("console-token-refused-1400.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#forget")), chromedp.Click(chromedp.CSS(pause))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "Pause without a token is refused", `document.getElementById("status").textContent.includes("pause not done. Token required")`, pageText("status"), wait)
	if p := providerSetting(); p["state"] != "running" {
		t.Fatalf("a refused Pause changed stripe: %v", p)
	}

	// With the token: paused, by pat, as dlq serve says.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Click(chromedp.CSS("#auth button[type=submit]")),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the overview refreshes with the token again", `document.getElementById("ov-error").textContent === ""`, overview, wait)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(pause))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "Pause with the token", `document.getElementById("status").textContent.startsWith("stripe: paused (set by pat)")`, pageText("status"), wait)
	if p := providerSetting(); p["state"] != "paused" || p["by"] != "pat" {
		t.Fatalf("after Pause, GET /providers has stripe %v, want paused by pat", p)
	}
	waitPage(t, ctx, "the overview shows stripe paused, with Resume",
		`document.querySelector('#ov-table tr[data-name="stripe"] button.resume') !== null`, overview, wait)
	shot("console-paused-1400.png")

	// Drain one route at 5 calls a second: its own setting (GET /routes).
	route := `#ov-table tr[data-name="stripe/default"]`
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(route+" input.rate"), "5"),
		chromedp.Click(chromedp.CSS(route+" button.drain")),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "Drain of stripe/default", `document.getElementById("status").textContent.startsWith("stripe/default: draining at 5/s (set by pat)")`, pageText("status"), wait)
	if code, _, body := call(t, "GET", base+"/routes", "Bearer "+adminToken, nil); code != 200 ||
		!strings.Contains(string(body), `{"provider":"stripe","route":"default","state":"draining","paused":false,"rate":5,"text":"draining at 5/s","by":"pat"`) {
		t.Fatalf("after Drain, GET /routes: %d %s", code, body)
	}

	// A phone's width: the same overview, token kept in the tab, no
	// sideways scroll.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the overview at 390 px shows stripe",
		stripeRow+` !== null && document.getElementById("ov-refreshed").textContent.startsWith("refreshed ")`, overview, wait)
	if w, _ := chromedp.Run(ctx, chromedp.Evaluate[int]("window.innerWidth")); w != 390 {
		t.Errorf("window.innerWidth %d at 390 px", w)
	}
	noHorizontalScroll(t, ctx, "390 px")
	shot("console-overview-390.png")
	saveScreenshot(t, ctx, chromedp.CaptureScreenshot(), shots, "console-overview-390-screen.png") // what a phone shows first
}
