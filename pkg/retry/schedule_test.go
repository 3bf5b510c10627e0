package retry

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/envconf"
)

func mustSchedule(tb testing.TB, s string) Schedule {
	tb.Helper()
	sch, err := ParseSchedule(s)
	if err != nil {
		tb.Fatal(err)
	}
	return sch
}

func tiersOf(s Schedule) []time.Duration {
	out := make([]time.Duration, s.Len())
	for i := range out {
		out[i] = s.Tier(i + 1)
	}
	return out
}

func TestParseSchedule(t *testing.T) {
	const s, m, h = time.Second, time.Minute, time.Hour
	tests := []struct {
		in      string
		want    []time.Duration
		wantErr string // substring; "" means success
	}{
		{"", []time.Duration{m, 5 * m, 15 * m, h, 6 * h}, ""},
		{"  ", []time.Duration{m, 5 * m, 15 * m, h, 6 * h}, ""},
		{DefaultTiers, []time.Duration{m, 5 * m, 15 * m, h, 6 * h}, ""},
		{"1s,2s", []time.Duration{s, 2 * s}, ""},
		{" 1s , 2s ", []time.Duration{s, 2 * s}, ""},
		{"500ms", []time.Duration{500 * time.Millisecond}, ""},
		{"90s,1h30m,24h", []time.Duration{90 * s, 90 * m, 24 * h}, ""},
		{"1m,x", nil, `HOOKLINE_RETRY_TIERS="1m,x": tier 2 "x" is not a duration`},
		{"1m,,5m", nil, `HOOKLINE_RETRY_TIERS="1m,,5m": tier 2 is empty`},
		{"1m,", nil, "tier 2 is empty"},
		{"5", nil, `tier 1 "5" is not a duration`},
		{"0s,1m", nil, "tier 1 (0s) is not positive"},
		{"-1m", nil, "tier 1 (-1m0s) is not positive"},
		{"5m,1m", nil, "tier 2 (1m) is not longer than tier 1 (5m): tiers must be strictly increasing"},
		{"1m,1m", nil, "tier 2 (1m) is not longer than tier 1 (1m)"},
		{"1m,60s", nil, "tier 2 (1m) is not longer than tier 1 (1m)"},
		{"1500us", nil, "tier 1 (1.5ms) is not a whole number of milliseconds"},
		{"25h", nil, "tier 1 (25h0m0s) is longer than 24h"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSchedule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSchedule(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tiersOf(got), tt.want) {
				t.Errorf("tiers = %v, want %v", tiersOf(got), tt.want)
			}
			if back := mustSchedule(t, got.String()); !slices.Equal(tiersOf(back), tt.want) {
				t.Errorf("String() %q does not parse back to the same tiers", got.String())
			}
		})
	}
}

func TestNewScheduleCopies(t *testing.T) {
	in := []time.Duration{time.Second, 2 * time.Second}
	sch, err := NewSchedule(in...)
	if err != nil {
		t.Fatal(err)
	}
	in[0] = time.Hour
	if sch.Tier(1) != time.Second {
		t.Error("NewSchedule must not alias its argument")
	}
	if (Schedule{}).Len() != 0 {
		t.Error("the zero Schedule has no tiers")
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		wantTiers  string
		wantJitter float64
		wantErr    []string // substrings
	}{
		{"unset", nil, DefaultTiers, 0, nil},
		{"empty", map[string]string{EnvTiers: "", EnvJitter: ""}, DefaultTiers, 0, nil},
		{"set", map[string]string{EnvTiers: "1s,2s", EnvJitter: "0.2"}, "1s,2s", 0.2, nil},
		{"jitter bounds", map[string]string{EnvJitter: "1"}, DefaultTiers, 1, nil},
		{"jitter zero", map[string]string{EnvJitter: " 0 "}, DefaultTiers, 0, nil},
		{"bad tiers", map[string]string{EnvTiers: "1m,soon"}, "", 0, []string{`HOOKLINE_RETRY_TIERS="1m,soon": tier 2 "soon" is not a duration (want durations such as 1m,5m,15m,1h,6h)`}},
		{"jitter not a number", map[string]string{EnvJitter: "lots"}, "", 0, []string{`HOOKLINE_RETRY_JITTER="lots": want a fraction from 0 to 1, such as 0.2`}},
		{"jitter negative", map[string]string{EnvJitter: "-0.1"}, "", 0, []string{`HOOKLINE_RETRY_JITTER="-0.1"`}},
		{"jitter above one", map[string]string{EnvJitter: "1.5"}, "", 0, []string{`HOOKLINE_RETRY_JITTER="1.5"`}},
		{"jitter NaN", map[string]string{EnvJitter: "NaN"}, "", 0, []string{`HOOKLINE_RETRY_JITTER="NaN"`}},
		{"jitter percent", map[string]string{EnvJitter: "20%"}, "", 0, []string{`HOOKLINE_RETRY_JITTER="20%"`}},
		{"both bad", map[string]string{EnvTiers: "2m,1m", EnvJitter: "2"}, "", 0, []string{EnvTiers, EnvJitter}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			r := envconf.New(lookup)
			sch, jitter := Read(r)
			err := r.Err()
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("want an error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sch.String() != tt.wantTiers || jitter != tt.wantJitter {
				t.Errorf("got %s, %v; want %s, %v", sch, jitter, tt.wantTiers, tt.wantJitter)
			}
		})
	}
}

func TestTierName(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Minute, "1m"},
		{time.Hour, "1h"},
		{90 * time.Second, "1m30s"},
		{90 * time.Minute, "1h30m"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{10 * time.Minute, "10m"},
		{70 * time.Minute, "1h10m"},
		{time.Hour + time.Second, "1h0m1s"},
		{6 * time.Hour, "6h"},
		{24 * time.Hour, "24h"},
		{250 * time.Millisecond, "250ms"},
	}
	for _, tt := range tests {
		if got := TierName(tt.d); got != tt.want {
			t.Errorf("TierName(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestRoute(t *testing.T) {
	sch := DefaultSchedule() // 1m 5m 15m 1h 6h
	retry := Decision{Retryable: true}
	after := func(d time.Duration) Decision { return Decision{Retryable: true, After: d} }
	tests := []struct {
		name     string
		attempt  int
		d        Decision
		wantTier int
		wantOK   bool
	}{
		{"attempt 1 to tier 1", 1, retry, 1, true},
		{"attempt 3 to tier 3", 3, retry, 3, true},
		{"last tier", 5, retry, 5, true},
		{"exhausted", 6, retry, 0, false},
		{"far past exhausted", 60, retry, 0, false},
		{"attempt 0 counts as 1", 0, retry, 1, true},
		{"permanent", 1, Decision{}, 0, false},
		{"permanent on last tier", 5, Decision{}, 0, false},
		{"retry-after shorter than tier n", 3, after(10 * time.Second), 3, true},
		{"retry-after equal to a tier", 1, after(15 * time.Minute), 3, true},
		{"retry-after between tiers", 1, after(20 * time.Minute), 4, true},
		{"retry-after longer than every tier", 1, after(48 * time.Hour), 5, true},
		{"retry-after does not save an exhausted key", 6, after(time.Hour), 0, false},
		{"retry-after below tier n keeps n", 4, after(2 * time.Minute), 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tier, ok := sch.Route(tt.attempt, tt.d)
			if tier != tt.wantTier || ok != tt.wantOK {
				t.Errorf("Route(%d, %+v) = %d, %v; want %d, %v", tt.attempt, tt.d, tier, ok, tt.wantTier, tt.wantOK)
			}
		})
	}
	if _, ok := (Schedule{}).Route(1, retry); ok {
		t.Error("the zero Schedule must send every failure to the DLQ")
	}
}

func TestDueAt(t *testing.T) {
	sch := mustSchedule(t, "1s,1m")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	at := func(d time.Duration) time.Time { return now.Add(d).UTC() }
	const s = time.Second
	tests := []struct {
		name   string
		now    time.Time
		tier   int
		jitter float64
		rnd    func() float64
		want   time.Time
	}{
		{"no jitter", now, 1, 0, nil, at(s)},
		{"jitter without rnd", now, 1, 0.5, nil, at(s)},
		{"zero draw", now, 2, 0.5, func() float64 { return 0 }, at(time.Minute)},
		{"half draw", now, 2, 0.5, func() float64 { return 0.5 }, at(75 * s)},
		{"jitter capped at 1", now, 1, 3, func() float64 { return 0.5 }, at(1500 * time.Millisecond)},
		{"negative jitter never advances", now, 2, -1, func() float64 { return 0.9 }, at(time.Minute)},
		{"negative draw never advances", now, 2, 1, func() float64 { return -0.5 }, at(time.Minute)},
		{"NaN draw never advances", now, 2, 1, func() float64 { return math.NaN() }, at(time.Minute)},
		{"draw capped at 1", now, 1, 1, func() float64 { return 7 }, at(2 * s)},
		{"rounded up to the millisecond", now.Add(time.Microsecond), 1, 0, nil, at(s + time.Millisecond)},
		{"whole millisecond stays", now.Add(time.Millisecond), 1, 0, nil, at(s + time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sch.DueAt(tt.now, tt.tier, tt.jitter, tt.rnd)
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("DueAt = %v, want %v in UTC", got, tt.want)
			}
		})
	}
}

// TestOnly: a provider's retry.tiers restrict Route to those tiers, in
// order, while tier numbers stay the whole schedule's; anything but a subset
// in order is refused with the allowed values.
func TestOnly(t *testing.T) {
	sch := DefaultSchedule() // 1m 5m 15m 1h 6h
	only := func(tb testing.TB, tiers ...time.Duration) Schedule {
		tb.Helper()
		s, err := sch.Only(tiers)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	retry := Decision{Retryable: true}
	after := func(d time.Duration) Decision { return Decision{Retryable: true, After: d} }
	fiveHour := only(t, 5*time.Minute, time.Hour) // tiers 2 and 4
	tests := []struct {
		name     string
		sch      Schedule
		attempt  int
		d        Decision
		wantTier int
		wantOK   bool
	}{
		{"attempt 1 to the first kept tier", fiveHour, 1, retry, 2, true},
		{"attempt 2 to the second", fiveHour, 2, retry, 4, true},
		{"attempt 3 is exhausted", fiveHour, 3, retry, 0, false},
		{"permanent", fiveHour, 1, Decision{}, 0, false},
		{"retry-after picks a kept tier at least that long", fiveHour, 1, after(10 * time.Minute), 4, true},
		{"retry-after longer than every kept tier: the last kept", fiveHour, 1, after(3 * time.Hour), 4, true},
		{"retry-after shorter keeps the attempt's tier", fiveHour, 2, after(time.Second), 4, true},
		{"one tier: attempt 1", only(t, 15*time.Minute), 1, retry, 3, true},
		{"one tier: attempt 2 exhausted", only(t, 15*time.Minute), 2, retry, 0, false},
		{"every tier is the whole schedule", only(t, time.Minute, 5*time.Minute, 15*time.Minute, time.Hour, 6*time.Hour), 5, retry, 5, true},
		{"no tier: attempt 1 is exhausted", only(t), 1, retry, 0, false},
		{"no tier: a retry-after changes nothing", only(t), 1, after(time.Minute), 0, false},
		{"no tier: permanent", only(t), 1, Decision{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tier, ok := tt.sch.Route(tt.attempt, tt.d)
			if tier != tt.wantTier || ok != tt.wantOK {
				t.Errorf("Route(%d, %+v) = %d, %v; want %d, %v", tt.attempt, tt.d, tier, ok, tt.wantTier, tt.wantOK)
			}
		})
	}
	t.Run("the whole schedule is kept", func(t *testing.T) {
		if fiveHour.Len() != 5 || fiveHour.String() != DefaultTiers || fiveHour.Tier(4) != time.Hour {
			t.Fatalf("Len %d, String %q, Tier(4) %s: want the whole schedule", fiveHour.Len(), fiveHour.String(), fiveHour.Tier(4))
		}
		if got := fiveHour.Used(); len(got) != 2 || got[0] != 2 || got[1] != 4 {
			t.Fatalf("Used() = %v, want [2 4]", got)
		}
		if got := sch.Used(); len(got) != 5 || got[4] != 5 {
			t.Fatalf("Used() of the whole schedule = %v", got)
		}
	})
	t.Run("no tier keeps the whole schedule and uses none", func(t *testing.T) {
		none := only(t)
		if none.Len() != 5 || none.String() != DefaultTiers || len(none.Used()) != 0 {
			t.Fatalf("Len %d, String %q, Used %v: want the whole schedule, none used", none.Len(), none.String(), none.Used())
		}
	})
	for _, bad := range []struct {
		name  string
		tiers []time.Duration
		want  string
	}{
		{"not a tier", []time.Duration{2 * time.Minute}, "2m is not a retry tier"},
		{"out of order", []time.Duration{time.Hour, 5 * time.Minute}, "5m comes after 1h"},
		{"twice", []time.Duration{5 * time.Minute, 5 * time.Minute}, "5m comes after 5m"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := sch.Only(bad.tiers)
			if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "HOOKLINE_RETRY_TIERS=1m,5m,15m,1h,6h") {
				t.Fatalf("error %v, want one saying %q and naming the allowed tiers", err, bad.want)
			}
		})
	}
}

// TestNotBefore: a Retry-After's date floors a due time, rounded up to the
// millisecond; an earlier or zero floor leaves it.
func TestNotBefore(t *testing.T) {
	due := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		floor time.Time
		want  time.Time
	}{
		{"zero floor", time.Time{}, due},
		{"earlier floor", due.Add(-time.Second), due},
		{"later floor", due.Add(1500 * time.Millisecond), due.Add(1500 * time.Millisecond)},
		{"later floor, sub-millisecond", due.Add(time.Second + 1), due.Add(time.Second + time.Millisecond)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NotBefore(due, tt.floor); !got.Equal(tt.want) {
				t.Fatalf("NotBefore = %s, want %s", got, tt.want)
			}
		})
	}
}
