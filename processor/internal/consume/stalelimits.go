package consume

import (
	"sync"
	"time"

	"github.com/hookline/hookline/pkg/control"
)

// staleLimits are the limit reports read from the control topic that no
// restart starts from any more: older than control.LimitKeptFor, which a
// running instance's never is (limitKeepAlive), so their instance stopped
// or their route left the file (or turned adaptive: false) that long
// ago. publishLimits deletes them, so that the compacted topic does not
// keep one record per route and instance for ever.
type staleLimits struct {
	mu sync.Mutex
	m  map[limitID]control.Limit
}

type limitID struct{ provider, route, instance string }

// note keeps l if it is stale at now, and forgets its key otherwise (a
// newer report, or a tombstone).
func (s *staleLimits) note(l control.Limit, now time.Time) {
	id := limitID{l.Provider, control.RouteOr(l.Route), l.Instance}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Limit < 1 || now.Sub(l.At) <= control.LimitKeptFor {
		delete(s.m, id)
		return
	}
	if s.m == nil {
		s.m = map[limitID]control.Limit{}
	}
	s.m[id] = l
}

// take returns the stale reports noted so far and forgets them.
func (s *staleLimits) take() []control.Limit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]control.Limit, 0, len(s.m))
	for _, l := range s.m {
		out = append(out, l)
	}
	clear(s.m)
	return out
}
