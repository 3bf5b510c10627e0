package main

import (
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The headers the processor's HTTP destination sets on every call
// (processor/internal/deliver, which this command cannot import; a test
// checks that the names match).
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerAttempt        = "X-Hookline-Attempt"
	headerProvider       = "X-Hookline-Provider"
	headerEventType      = "X-Hookline-Event-Type"
)

// maxBody bounds what is read of a delivery: it is only counted.
const maxBody = 64 << 20

// RulesText says what Rules does, for the start line and the docs.
const RulesText = `keys containing "bad" 422 always; "down" 503 always; one key in three (FNV-1a of the key mod 3 = 0) 503 on attempts 1 and 2`

// Rules answers a call to a /flaky/ path from the delivery's key and
// attempt only, so the same call always gets the same answer:
//   - a key containing "bad" is refused with 422 on every attempt: the
//     processor dead-letters it at once (reason permanent);
//   - a key containing "down" gets 503 on every attempt: it goes through
//     every retry tier, then to the DLQ (reason exhausted);
//   - a key whose FNV-1a hash is divisible by 3 (about one in three) gets
//     503 on attempts 1 and 2 and 200 on the third: two retries, then done;
//   - every other key gets 200.
//
// It returns the status and a short reason for the printed line.
func Rules(key string, attempt int) (int, string) {
	switch {
	case strings.Contains(key, "bad"):
		return http.StatusUnprocessableEntity, `flaky: key has "bad", refused always`
	case strings.Contains(key, "down"):
		return http.StatusServiceUnavailable, `flaky: key has "down", unavailable always`
	case flakyKey(key) && attempt <= 2:
		return http.StatusServiceUnavailable, "flaky: one key in three fails attempts 1 and 2"
	}
	return http.StatusOK, ""
}

// flakyKey reports whether key is one of the third that fail twice.
func flakyKey(key string) bool {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()%3 == 0
}

// Delivery is what one call carried, as printed.
type Delivery struct {
	At        time.Time
	Path      string
	Provider  string
	Key       string
	EventType string
	Attempt   string
	Bytes     int64
	Status    int
	Why       string
}

// Line is the delivery as one line of text.
func (d Delivery) Line() string {
	s := fmt.Sprintf("sink: %s %s provider=%s key=%s event=%s attempt=%s bytes=%d -> %d",
		d.At.Format("15:04:05.000"), d.Path, orDash(d.Provider), orDash(d.Key), orDash(d.EventType), orDash(d.Attempt), d.Bytes, d.Status)
	if d.Why != "" {
		s += " (" + d.Why + ")"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	q := strconv.Quote(s) // no control characters reach the terminal
	return q[1 : len(q)-1]
}

// Handler receives deliveries; each call costs reading its body and one
// write of a line under a mutex (so that lines never interleave).
type Handler struct {
	mu  sync.Mutex
	out io.Writer
	now func() time.Time
}

// New returns a Handler that prints to out, stamping lines with now.
func New(out io.Writer, now func() time.Time) *Handler {
	return &Handler{out: out, now: now}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := Delivery{
		At:        h.now(),
		Path:      r.URL.Path,
		Provider:  r.Header.Get(headerProvider),
		Key:       r.Header.Get(headerIdempotencyKey),
		EventType: r.Header.Get(headerEventType),
		Attempt:   r.Header.Get(headerAttempt),
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	d.Bytes = n
	attempt, _ := strconv.Atoi(d.Attempt)
	switch {
	case r.Method != http.MethodPost:
		d.Status, d.Why = http.StatusMethodNotAllowed, "POST only"
	case err != nil:
		d.Status, d.Why = http.StatusBadRequest, "reading the body: "+err.Error()
	case strings.HasPrefix(r.URL.Path, "/ok/"):
		d.Status = http.StatusOK
	case strings.HasPrefix(r.URL.Path, "/flaky/"):
		d.Status, d.Why = Rules(d.Key, attempt)
	default:
		d.Status, d.Why = http.StatusNotFound, "paths are /ok/<name> and /flaky/<name>"
	}
	h.mu.Lock()
	fmt.Fprintln(h.out, d.Line())
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(d.Status)
	if d.Why != "" {
		fmt.Fprintln(w, d.Why)
	}
}
