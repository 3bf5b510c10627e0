package capacity

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// waitFor polls cond until it holds or a deadline passes, reporting what
// it saw.
func waitFor(t *testing.T, what string, cond func() bool, saw func() any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; saw %v", what, saw())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCapacity: calls beyond C are refused at once with the configured
// status and Retry-After, those within it are taken; a new C applies to
// the next call; the answers are counted.
func TestCapacity(t *testing.T) {
	for _, tt := range []struct {
		name       string
		refuse     int
		retryAfter *string
		wantRA     string
	}{
		{"429 with Retry-After 1 (default)", 0, nil, "1"},
		{"503 without Retry-After", http.StatusServiceUnavailable, new(string), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Options{Capacity: 2, Refuse: tt.refuse, RetryAfter: tt.retryAfter})
			r.hold = make(chan struct{})
			srv := httptest.NewServer(r)
			defer srv.Close()
			done := make(chan int, 2)
			for range 2 {
				go func() {
					resp, err := http.Post(srv.URL, "text/plain", nil)
					if err != nil {
						done <- 0
						return
					}
					resp.Body.Close()
					done <- resp.StatusCode
				}()
			}
			waitFor(t, "2 calls in flight", func() bool { return r.Stats().InFlight == 2 }, func() any { return r.Stats() })
			resp, err := http.Post(srv.URL, "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := tt.refuse
			if want == 0 {
				want = http.StatusTooManyRequests
			}
			if resp.StatusCode != want || resp.Header.Get("Retry-After") != tt.wantRA {
				t.Fatalf("third call: %d, Retry-After %q; want %d, %q", resp.StatusCode, resp.Header.Get("Retry-After"), want, tt.wantRA)
			}
			r.SetCapacity(3)
			close(r.hold) // the held calls end, and the next one is taken at once
			for range 2 {
				if code := <-done; code != http.StatusNoContent {
					t.Fatalf("a held call: %d, want 204", code)
				}
			}
			resp, err = http.Post(srv.URL, "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("after SetCapacity(3): %d, want 204", resp.StatusCode)
			}
			if s := r.Stats(); s.Calls != 4 || s.OK != 3 || s.Refused != 1 {
				t.Fatalf("stats %+v, want 4 calls, 3 taken, 1 refused", s)
			}
		})
	}
}

// TestAllows: the most a receiver gives at capacity C is C over its
// latency at C.
func TestAllows(t *testing.T) {
	r := New(Options{Capacity: 8, Base: 50 * time.Millisecond, Rise: 0.5})
	if got := r.Allows(32); got < 426 || got > 427 {
		t.Fatalf("Allows(32) = %.1f, want 32/75ms = 426.7", got)
	}
}
