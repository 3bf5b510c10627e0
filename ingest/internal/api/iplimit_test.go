package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
)

// mustIPServer is the real handler with a per-IP limit and a clock the test
// moves.
func mustIPServer(tb testing.TB, pub Publisher, lim IPLimit, now *time.Time) (http.Handler, *providers.Registry, *Server) {
	tb.Helper()
	s, reg := testServer(tb, pub, func(c *Config) {
		c.Now, c.IPLimit = func() time.Time { return *now }, &lim
	})
	return s.Handler(), reg, s
}

// TestIPRateLimit is the acceptance check of issue 13: with 5/5, 50
// requests in one second from one address get at least 40 answers 429
// with Retry-After and the JSON error; another address is unaffected.
func TestIPRateLimit(t *testing.T) {
	pub := &fakePublisher{}
	now := time.Now()
	h, reg, _ := mustIPServer(t, pub, IPLimit{PerSecond: 5, Burst: 5}, &now)
	post := func(i int, remote string) *httptest.ResponseRecorder {
		body := []byte(fmt.Sprintf(`{"id":"evt_ip_%s_%d","object":"event","type":"x"}`, remote, i))
		req := signed(t, reg, "stripe", "application/json", body, now, nil)
		req.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	start := now
	codes := map[int]int{}
	for i := range 50 { // 50 requests, 20 ms apart: one second
		now = start.Add(time.Duration(i) * 20 * time.Millisecond)
		w := post(i, "198.51.100.7:40000")
		codes[w.Code]++
		if w.Code != http.StatusTooManyRequests {
			continue
		}
		var e errAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error != CodeRateLimited || !strings.Contains(e.Message, "198.51.100.7") {
			t.Fatalf("429 body %s, want rate_limited naming the address", w.Body)
		}
		if ra := w.Header().Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After %q, want 1", ra)
		}
	}
	// 5 at once, then one every 200 ms: 9 accepted in 0..980 ms.
	if codes[429] < 40 || codes[202]+codes[429] != 50 {
		t.Fatalf("codes %v, want at least 40×429 and the rest 202", codes)
	}
	t.Logf("one address, 50 requests in 1 s at 5/5: %v", codes)
	accepted := pub.count()

	// Another address, at the same instant, has its whole burst.
	for i := range 5 {
		if w := post(i, "203.0.113.9:1234"); w.Code != http.StatusAccepted {
			t.Fatalf("other address, request %d: %d %s", i, w.Code, w.Body)
		}
	}
	if pub.count() != accepted+5 {
		t.Fatalf("%d published, want %d", pub.count(), accepted+5)
	}
}

// TestIPRateLimitBeforeProvider: a limited address is refused before its
// provider is looked up or its body read, so a flood of unknown providers
// is limited too (and labelled "unknown").
func TestIPRateLimitBeforeProvider(t *testing.T) {
	now := time.Now()
	h, _, _ := mustIPServer(t, &fakePublisher{}, IPLimit{PerSecond: 1, Burst: 1}, &now)
	var got []int
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/nope", strings.NewReader(`{}`))
		req.RemoteAddr = "192.0.2.1:5"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		got = append(got, w.Code)
	}
	if got[0] != http.StatusNotFound || got[1] != http.StatusTooManyRequests {
		t.Fatalf("codes %v, want [404 429]", got)
	}
}

func TestClientAddress(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.1, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	with := newIPLimiter(IPLimit{PerSecond: 1, Burst: 1, Trusted: trusted})
	without := newIPLimiter(IPLimit{PerSecond: 1, Burst: 1})
	cases := []struct {
		name   string
		l      *ipLimiter
		remote string
		xff    []string
		want   string
	}{
		{"no proxies: header ignored", without, "10.1.1.1:80", []string{"203.0.113.1"}, "10.1.1.1"},
		{"untrusted peer: header ignored", with, "198.51.100.1:80", []string{"203.0.113.1"}, "198.51.100.1"},
		{"trusted peer, one hop", with, "10.1.1.1:80", []string{"203.0.113.1"}, "203.0.113.1"},
		{"spoofed left part is skipped", with, "10.1.1.1:80", []string{"1.1.1.1, 203.0.113.1"}, "203.0.113.1"},
		{"trusted hops skipped from the right", with, "10.1.1.1:80", []string{"1.1.1.1, 203.0.113.1, 192.168.1.1, 10.2.2.2"}, "203.0.113.1"},
		{"several headers are one list", with, "10.1.1.1:80", []string{"1.1.1.1, 203.0.113.1", "10.3.3.3"}, "203.0.113.1"},
		{"every hop trusted: the leftmost", with, "10.1.1.1:80", []string{"10.9.9.9, 192.168.1.1"}, "10.9.9.9"},
		{"no header: the proxy", with, "10.1.1.1:80", nil, "10.1.1.1"},
		{"garbage ends the walk at the last trusted hop", with, "10.1.1.1:80", []string{"203.0.113.1, bogus, 10.4.4.4"}, "10.4.4.4"},
		{"empty entries skipped", with, "10.1.1.1:80", []string{"203.0.113.1,, "}, "203.0.113.1"},
		{"hop with a port", with, "10.1.1.1:80", []string{"203.0.113.1:5555"}, "203.0.113.1"},
		{"IPv6 hop", with, "[fd00::1]:80", []string{"[2001:db8::5]:443"}, "2001:db8::5"},
		{"IPv4-mapped peer is IPv4", with, "[::ffff:10.1.1.1]:80", []string{"::ffff:203.0.113.1"}, "203.0.113.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", nil)
			req.RemoteAddr = c.remote
			for _, v := range c.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got := c.l.client(req); got != netip.MustParseAddr(c.want) {
				t.Fatalf("client %v, want %s", got, c.want)
			}
		})
	}
}

func TestParseIPRateLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want *IPLimit
		err  string
	}{
		{"", nil, ""},
		{"off", nil, ""},
		{"5/10", &IPLimit{PerSecond: 5, Burst: 10}, ""},
		{" 0.5 / 3 ", &IPLimit{PerSecond: 0.5, Burst: 3}, ""},
		{"5", nil, "no /"},
		{"0/5", nil, "per_second"},
		{"-1/5", nil, "per_second"},
		{"NaN/5", nil, "per_second"},
		{"5/0", nil, "burst"},
		{"5/1.5", nil, "burst"},
	} {
		got, err := ParseIPRateLimit(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "HOOKLINE_IP_RATE_LIMIT") {
				t.Errorf("%q: err %v, want one naming the variable and %q", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.in, err)
		case fmt.Sprint(got) != fmt.Sprint(c.want):
			t.Errorf("%q: %+v, want %+v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1/x", "::ffff:10.0.0.0/8"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "HOOKLINE_TRUSTED_PROXIES") {
			t.Errorf("%q: err %v, want one naming HOOKLINE_TRUSTED_PROXIES", bad, err)
		}
	}
	got, err := ParseTrustedProxies("10.1.2.3/8,::ffff:192.168.0.0/112, 2001:db8::1")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("2001:db8::1/128")}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
}

// TestIPTableBound: 100,000 distinct addresses through the real handler do
// not grow the table past its bound, the heap stays within the bound's
// share, and the addresses seen most recently keep their state.
func TestIPTableBound(t *testing.T) {
	const bound = DefaultMaxAddresses
	now := time.Now()
	h, _, s := mustIPServer(t, &fakePublisher{}, IPLimit{PerSecond: 1, Burst: 1}, &now)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 100_000 {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/nope", nil)
		req.RemoteAddr = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String() + ":1"
		h.ServeHTTP(httptest.NewRecorder(), req)
		if n := s.ips.len(); n > bound {
			t.Fatalf("after %d addresses the table holds %d, over %d", i+1, n, bound)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := s.ips.len(); n != bound {
		t.Fatalf("table holds %d, want it full at %d", n, bound)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("100,000 addresses: table %d entries, heap +%.1f MiB", s.ips.len(), float64(grown)/(1<<20))
	if grown > 32<<20 {
		t.Fatalf("heap grew %d bytes, over 32 MiB for %d entries", grown, bound)
	}
	// The newest address is still limited; the oldest was forgotten.
	for _, c := range []struct {
		addr string
		want int
	}{{"10.1.134.159:1", http.StatusTooManyRequests}, {"10.0.0.0:1", http.StatusNotFound}} {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/nope", nil)
		req.RemoteAddr = c.addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.addr, w.Code, c.want)
		}
	}
	runtime.KeepAlive(s)
}
