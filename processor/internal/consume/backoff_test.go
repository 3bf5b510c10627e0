package consume

import (
	"testing"
	"time"
)

func TestClientBackoff(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		fails    int
		low, top time.Duration // the jitter's bounds
	}{
		{0, 8 * ms, 12 * ms}, // franz-go may ask before a first failure
		{1, 8 * ms, 12 * ms},
		{2, 32 * ms, 48 * ms},
		{3, 128 * ms, 192 * ms},
		{4, 512 * ms, 768 * ms},
		{5, 2048 * ms, 3072 * ms},
		{6, 4000 * ms, 5000 * ms},
		{40, 4000 * ms, 5000 * ms},
	}
	for _, tc := range tests {
		for range 200 {
			if d := clientBackoff(tc.fails); d < tc.low || d > tc.top {
				t.Fatalf("clientBackoff(%d) = %s, want %s to %s", tc.fails, d, tc.low, tc.top)
			}
		}
	}
}
