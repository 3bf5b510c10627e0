package state

import (
	"context"
	"sync"
)

// budget is a weighted semaphore of bytes: restores reserve what they will
// hold before they read, so several partitions restore at once without
// their buffers adding up past the limit.
type budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed (and replaced) whenever memory is released
}

func newBudget(limit int64) *budget {
	return &budget{limit: limit, freed: make(chan struct{})}
}

// acquire waits until n bytes fit (n above the limit waits for the whole
// budget) or ctx ends, and returns what it took.
func (b *budget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 0), b.limit)
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return n, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-freed:
		}
	}
}

// tryAcquire takes n bytes if they fit now.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// inUse reports whether any of the budget is held.
func (b *budget) inUse() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used > 0
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

// Reserve waits until bytes of the store's restore memory budget
// (Split(Options.Memory).Restore) are free, or ctx ends, and takes them; release
// gives them back (calling it again does nothing). A reservation larger
// than the whole budget waits for all of it. Package restore reserves what
// one restore will hold before it reads, so restores of several partitions
// run at once within the budget and the rest wait their turn.
func (s *Store) Reserve(ctx context.Context, bytes int64) (release func(), err error) {
	n, err := s.budget.acquire(ctx, bytes)
	if err != nil {
		return func() {}, err
	}
	var once sync.Once
	// A restore ending: its tables' compactions follow, trim looks again.
	return func() { once.Do(func() { s.budget.release(n); s.touch() }) }, nil
}
