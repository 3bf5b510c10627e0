package consume

import (
	"sync"
	"time"
)

// deadRoute tracks since when every call of one route failed, as this
// processor saw its calls: the first failure after the last success
// starts the span, any success ends it. A route whose span reaches its
// destination.auto_pause_after is paused (autoPause). It is safe for
// concurrent use.
type deadRoute struct {
	after time.Duration // > 0

	mu      sync.Mutex
	since   time.Time // the first failure since the last success; zero: none
	lastErr string
	written bool // the pause is written; nothing more until a resume
}

// observe records one answered call: err nil is a success.
func (d *deadRoute) observe(at time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.since, d.lastErr = time.Time{}, ""
		return
	}
	if d.since.IsZero() {
		d.since = at
	}
	d.lastErr = err.Error()
}

// due says whether the route is to be paused now: every call failed since
// since (for at least after), the last with lastErr, and no pause written
// yet. A true answer counts as written.
func (d *deadRoute) due(now time.Time) (since time.Time, lastErr string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.written || d.since.IsZero() || now.Sub(d.since) < d.after {
		return time.Time{}, "", false
	}
	d.written = true
	return d.since, d.lastErr, true
}

// reset forgets the span: the route was resumed, so it needs another
// auto_pause_after of failures to be paused again.
func (d *deadRoute) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.since, d.lastErr, d.written = time.Time{}, "", false
}

// unwritten takes back a due answer whose pause could not be written: the
// next due says it again.
func (d *deadRoute) unwritten() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written = false
}
