package retry

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/envconf"
)

// Environment variables read by Read; the processor and the retrier read
// the same ones (DESIGN §7).
const (
	EnvTiers  = "HOOKLINE_RETRY_TIERS"
	EnvJitter = "HOOKLINE_RETRY_JITTER"
)

// DefaultTiers is the schedule used when HOOKLINE_RETRY_TIERS is unset or
// empty, in its syntax.
const DefaultTiers = "1m,5m,15m,1h,6h"

// MaxTier is the longest tier delay a schedule accepts. Retry topics keep
// records for 7 days (DESIGN §2) and full jitter doubles a delay, so a tier
// of at most a day leaves five days for a retrier outage before a parked
// record could be deleted unread.
const MaxTier = 24 * time.Hour

// Schedule is the list of retry tiers: strictly increasing, strictly positive
// delays, each a whole number of milliseconds (the precision of
// hookline.due-at) and at most MaxTier.
//
// Tiers are numbered from 1 in the whole API: tier 1 is the first delay, and
// attempt n that fails retryably goes to tier n. The zero Schedule has no
// tiers, so every failure goes straight to the DLQ; use DefaultSchedule,
// ParseSchedule or NewSchedule. A Schedule is immutable and safe to share.
//
// Only restricts a schedule to some of its tiers (a provider's retry policy):
// Route then picks among those alone, while tier numbers, Len, Tier, Names,
// DueAt and String keep meaning the whole schedule.
type Schedule struct {
	tiers []time.Duration
	// use, when not nil, are the tier numbers (1-based, increasing) Route
	// picks from; nil means every tier.
	use []int
}

// DefaultSchedule returns the schedule of DefaultTiers: 1m, 5m, 15m, 1h, 6h.
func DefaultSchedule() Schedule {
	return Schedule{tiers: []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}}
}

// NewSchedule checks tiers and returns them as a Schedule. The error names
// the first bad tier (1-based).
func NewSchedule(tiers ...time.Duration) (Schedule, error) {
	for i, d := range tiers {
		switch {
		case d <= 0:
			return Schedule{}, fmt.Errorf("tier %d (%s) is not positive", i+1, d)
		case d%time.Millisecond != 0:
			return Schedule{}, fmt.Errorf("tier %d (%s) is not a whole number of milliseconds", i+1, d)
		case d > MaxTier:
			return Schedule{}, fmt.Errorf("tier %d (%s) is longer than %s", i+1, d, TierName(MaxTier))
		case i > 0 && d <= tiers[i-1]:
			return Schedule{}, fmt.Errorf("tier %d (%s) is not longer than tier %d (%s): tiers must be strictly increasing", i+1, TierName(d), i, TierName(tiers[i-1]))
		}
	}
	return Schedule{tiers: slices.Clone(tiers)}, nil
}

// ParseSchedule reads the HOOKLINE_RETRY_TIERS syntax: Go durations separated
// by commas, such as "1m,5m,15m,1h,6h" (spaces around elements are ignored).
// An empty string gives DefaultSchedule. The error names the variable and the
// bad element.
func ParseSchedule(s string) (Schedule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultSchedule(), nil
	}
	sch, err := parseTiers(s)
	if err != nil {
		return Schedule{}, fmt.Errorf("%s=%q: %w (want durations such as %s)", EnvTiers, s, err, DefaultTiers)
	}
	return sch, nil
}

// parseTiers reads a non-empty HOOKLINE_RETRY_TIERS; the error names the
// bad tier.
func parseTiers(s string) (Schedule, error) {
	parts := strings.Split(s, ",")
	tiers := make([]time.Duration, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return Schedule{}, fmt.Errorf("tier %d is empty", i+1)
		}
		d, err := time.ParseDuration(p)
		if err != nil {
			return Schedule{}, fmt.Errorf("tier %d %q is not a duration", i+1, p)
		}
		tiers[i] = d
	}
	return NewSchedule(tiers...)
}

// Read reads the retry settings with r, which collects every problem:
// HOOKLINE_RETRY_TIERS gives the schedule (unset or empty:
// DefaultSchedule), HOOKLINE_RETRY_JITTER the jitter fraction from 0 to 1
// (unset or empty: 0).
func Read(r *envconf.Reader) (Schedule, float64) {
	sch := envconf.Parse(r, EnvTiers, DefaultSchedule(), "durations such as "+DefaultTiers, parseTiers)
	jitter := envconf.Parse(r, EnvJitter, 0.0, "a fraction from 0 to 1, such as 0.2", func(v string) (float64, error) {
		j, err := strconv.ParseFloat(v, 64)
		if err != nil || !(j >= 0 && j <= 1) { // also refuses NaN
			return 0, new(envconf.Error)
		}
		return j, nil
	})
	return sch, jitter
}

// Only returns s restricted to the tiers given, a route's retry.tiers: a
// subset of s's tiers in s's order. Route on the result sends attempt k to
// the k-th of them and attempt len(tiers)+1 that fails to the DLQ; the tier
// numbers it returns are s's, so they name the same topics. An empty list
// keeps no tier: every retryable failure of the result goes to the DLQ as
// exhausted (a single attempt). A tier that is not one of s's, or tiers out
// of order are an error that lists the allowed values. Cost: a binary
// search per tier.
func (s Schedule) Only(tiers []time.Duration) (Schedule, error) {
	allowed := func() string {
		return fmt.Sprintf("want tiers of %s=%s, in that order", EnvTiers, s.String())
	}
	use := make([]int, len(tiers)) // never nil: nil means every tier
	for i, d := range tiers {
		j, found := slices.BinarySearch(s.tiers, d)
		switch {
		case !found:
			return Schedule{}, fmt.Errorf("%s is not a retry tier (%s)", TierName(d), allowed())
		case i > 0 && j+1 <= use[i-1]:
			return Schedule{}, fmt.Errorf("%s comes after %s (%s)", TierName(d), TierName(tiers[i-1]), allowed())
		}
		use[i] = j + 1
	}
	return Schedule{tiers: s.tiers, use: use}, nil
}

// Used returns the tier numbers (1-based) Route picks from, in order: every
// tier, or those Only kept. Cost: a new slice.
func (s Schedule) Used() []int {
	if s.use != nil {
		return slices.Clone(s.use)
	}
	all := make([]int, len(s.tiers))
	for i := range all {
		all[i] = i + 1
	}
	return all
}

// Len returns the number of tiers (of the whole schedule, also after Only).
// Without Only, attempt Len()+1 is the last one before the DLQ; with it,
// attempt len(Used())+1.
func (s Schedule) Len() int { return len(s.tiers) }

// Tier returns the delay of tier i (1-based). It panics when i is not in
// [1, Len()], like a slice index.
func (s Schedule) Tier(i int) time.Duration { return s.tiers[i-1] }

// Names returns the tier names in tier order ("1m", "5m", ...), as
// topics.NewNames takes them.
func (s Schedule) Names() []string {
	names := make([]string, len(s.tiers))
	for i, d := range s.tiers {
		names[i] = TierName(d)
	}
	return names
}

// String returns the schedule in HOOKLINE_RETRY_TIERS syntax; ParseSchedule
// reads it back to an equal Schedule.
func (s Schedule) String() string { return strings.Join(s.Names(), ",") }

// TierName returns d as Go prints it without trailing zero units, the form
// used in tier topic names (DESIGN §2): 1m0s is "1m", 1h0m0s is "1h", 90s is
// "1m30s", 1h30m0s is "1h30m", 1500ms is "1.5s".
func TierName(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Route says where attempt (1-based; values below 1 count as 1) goes after a
// failure classified as d (DESIGN §7):
//
//   - not retryable: ok is false (DLQ, dead reason "permanent");
//   - attempt > Len(): ok is false (DLQ, dead reason "exhausted");
//   - otherwise tier n = attempt; with a Retry-After, the first tier whose
//     delay is at least After when that is later than n, or the last tier when
//     none is that long (the wait is then capped at the last tier's delay).
//
// A Retry-After lengthens one wait without using up attempts: attempt n+1
// failing again goes to tier n+1, so a key always gets Len()+1 attempts.
//
// After Only, the same holds over the kept tiers: attempt n goes to the n-th
// of them, a Retry-After picks the first kept tier at least that long, and
// the tier returned is its number in the whole schedule.
func (s Schedule) Route(attempt int, d Decision) (tier int, ok bool) {
	n, number := len(s.tiers), func(k int) int { return k + 1 } // the k-th routed tier's number (k from 0)
	if s.use != nil {
		n, number = len(s.use), func(k int) int { return s.use[k] }
	}
	attempt = max(attempt, 1)
	if !d.Retryable || attempt > n {
		return 0, false
	}
	k := attempt - 1
	if d.After > 0 {
		i := sort.Search(n, func(j int) bool { return s.tiers[number(j)-1] >= d.After }) // first tier >= After
		k = max(k, min(i, n-1))
	}
	return number(k), true
}

// DueAt returns when a record parked in tier i (1-based) at now may be
// re-delivered: now + delay × (1 + jitter × rnd()). jitter is clamped to
// [0, 1] and rnd's result to [0, 1]; a nil rnd means no jitter. Jitter only
// ever delays. The result is in UTC and rounded up to the millisecond, so the
// hookline.due-at header (millisecond precision) is never earlier than the
// delay. It panics when i is out of range.
func (s Schedule) DueAt(now time.Time, i int, jitter float64, rnd func() float64) time.Time {
	delay := float64(s.Tier(i))
	if jitter > 0 && rnd != nil {
		r := rnd()
		if !(r > 0) { // also NaN
			r = 0
		}
		delay *= 1 + min(jitter, 1)*min(r, 1)
	}
	due := now.Add(time.Duration(math.Ceil(delay)))
	if t := due.Truncate(time.Millisecond); t.Before(due) {
		due = t.Add(time.Millisecond)
	}
	return due.UTC()
}

// NotBefore returns due, or floor when floor is later (a Retry-After's
// date, decide.Effect.NotBefore), rounded up to the millisecond like
// DueAt, in UTC. A zero floor leaves due as it is.
func NotBefore(due, floor time.Time) time.Time {
	if !floor.After(due) {
		return due
	}
	if t := floor.Truncate(time.Millisecond); t.Before(floor) {
		floor = t.Add(time.Millisecond)
	}
	return floor.UTC()
}
