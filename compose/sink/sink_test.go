package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRules(t *testing.T) {
	// Keys picked for their FNV-1a hash: the first is divisible by 3.
	var flaky, steady string
	for i := 0; flaky == "" || steady == ""; i++ {
		k := "acme:d-" + strconv.Itoa(i)
		if flakyKey(k) && flaky == "" {
			flaky = k
		} else if !flakyKey(k) && steady == "" {
			steady = k
		}
	}
	for _, tc := range []struct {
		key     string
		attempt int
		want    int
	}{
		{steady, 1, 200},
		{flaky, 1, 503},
		{flaky, 2, 503},
		{flaky, 3, 200},
		{"acme:bad-1", 1, 422},
		{"acme:bad-1", 3, 422},
		{"acme:down-1", 1, 503},
		{"acme:down-1", 6, 503},
	} {
		if got, why := Rules(tc.key, tc.attempt); got != tc.want {
			t.Errorf("Rules(%q, %d) = %d (%s), want %d", tc.key, tc.attempt, got, why, tc.want)
		}
	}
	// About a third, over many keys.
	n := 0
	for i := range 3000 {
		if flakyKey("acme:k" + strconv.Itoa(i)) {
			n++
		}
	}
	if n < 900 || n > 1100 {
		t.Errorf("%d of 3000 keys fail twice, want about 1000", n)
	}
}

func TestHandler(t *testing.T) {
	var out bytes.Buffer
	at := time.Date(2026, 11, 27, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewServer(New(&out, func() time.Time { return at }))
	defer srv.Close()
	post := func(path, key, attempt string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"type":"invoice.paid"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(headerIdempotencyKey, key)
		req.Header.Set(headerAttempt, attempt)
		req.Header.Set(headerProvider, "acme")
		req.Header.Set(headerEventType, "invoice.paid")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		path, key, attempt string
		status             int
		line               string
	}{
		{"/ok/stripe", "acme:bad-1", "1", 200, `sink: 03:04:05.000 /ok/stripe provider=acme key=acme:bad-1 event=invoice.paid attempt=1 bytes=23 -> 200`},
		{"/flaky/acme", "acme:bad-1", "1", 422, `sink: 03:04:05.000 /flaky/acme provider=acme key=acme:bad-1 event=invoice.paid attempt=1 bytes=23 -> 422 (flaky: key has "bad", refused always)`},
		{"/flaky/acme", "acme:down\t1", "4", 503, `sink: 03:04:05.000 /flaky/acme provider=acme key=acme:down\t1 event=invoice.paid attempt=4 bytes=23 -> 503 (flaky: key has "down", unavailable always)`},
		{"/other", "acme:x", "1", 404, `sink: 03:04:05.000 /other provider=acme key=acme:x event=invoice.paid attempt=1 bytes=23 -> 404 (paths are /ok/<name> and /flaky/<name>)`},
	} {
		out.Reset()
		if got := post(tc.path, tc.key, tc.attempt); got != tc.status {
			t.Errorf("POST %s key %q: status %d, want %d", tc.path, tc.key, got, tc.status)
		}
		if got := strings.TrimSuffix(out.String(), "\n"); got != tc.line {
			t.Errorf("POST %s key %q printed\n  %s\nwant\n  %s", tc.path, tc.key, got, tc.line)
		}
	}
}

// TestHeaderNames checks that the sink reads the headers the processor's
// HTTP destination sets, by their constants in its source.
func TestHeaderNames(t *testing.T) {
	src, err := os.ReadFile("../../processor/internal/deliver/http.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"HeaderIdempotencyKey": headerIdempotencyKey,
		"HeaderAttempt":        headerAttempt,
		"HeaderProvider":       headerProvider,
		"HeaderEventType":      headerEventType,
	} {
		if !regexp.MustCompile(`\b` + name + `\s*=\s*` + regexp.QuoteMeta(strconv.Quote(value))).Match(src) {
			t.Errorf("processor/internal/deliver/http.go has no %s = %q", name, value)
		}
	}
}
