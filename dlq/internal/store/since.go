package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSince reads a --since value: a duration back from now (90m, 36h, 7d,
// 1d12h; a "d" is 24h) or a time (2026-03-01 is UTC midnight,
// 2026-03-01T12:00 UTC, or RFC 3339).
func ParseSince(v string, now time.Time) (time.Time, error) {
	if d, err := parseAgo(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%q: want a positive duration", v)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration back from now (90m, 36h, 7d) or a time (2026-03-01, 2026-03-01T12:00:00Z)", v)
}

// parseAgo is time.ParseDuration with a leading "<n>d" for days.
func parseAgo(v string) (time.Duration, error) {
	days := time.Duration(0)
	if i := strings.Index(v, "d"); i > 0 {
		n, err := strconv.Atoi(v[:i])
		if err != nil {
			return 0, err
		}
		days, v = time.Duration(n)*24*time.Hour, v[i+1:]
		if v == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(v)
	if err == nil && days > 0 && d < 0 {
		return 0, fmt.Errorf("%q: a negative part after the days", v)
	}
	return days + d, err
}
