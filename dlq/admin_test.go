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

// TestTriagePage drives the page in headless Chromium: it takes the token
// from the URL fragment, lists the entries, opens one with its error
// history and body, and its Replay button puts the record on webhooks.raw.
// Screenshots go to the test's temp dir, or to HOOKLINE_SCREENSHOT_DIR when
// set (to keep them, as CI artifacts for instance).
func TestTriagePage(t *testing.T) {
	skipShort(t)
	browser := chromiumPath()
	if browser == "" {
		t.Skip("no chromium on PATH (Debian: apt-get install chromium): the triage page is not tested in a browser")
	}
	sys, recs := withEntries(t,
		dead{"stripe", "evt_page_a", headers.DeadPermanent, 3 * time.Minute},
		dead{"stripe", "evt_page_b", headers.DeadExhausted, 2 * time.Minute},
		dead{"outcomes", "evt_page_c", headers.DeadPermanent, time.Minute},
	)
	ref := refOf(recs[0])
	svc := sys.StartDLQServe(adminToken, nil)
	raw := sys.Read(sys.Names.Raw)

	shots := t.TempDir()
	if d := os.Getenv("HOOKLINE_SCREENSHOT_DIR"); d != "" {
		shots = d
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
		chromedp.WindowSize(1500, 950),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil { // start the browser, without a deadline
		t.Fatalf("start %s: %v", browser, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		p := filepath.Join(shots, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	row := fmt.Sprintf(`#entries tr[data-ref=%q]`, ref)
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+svc.Addr+"/ui/#token="+adminToken),
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
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(link)), chromedp.Click(chromedp.CSS(link)),
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
