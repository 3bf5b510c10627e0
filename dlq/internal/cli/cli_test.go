package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/store"
)

// run runs the command in process with env vars; commands here fail before
// they reach Kafka.
func run(env map[string]string, args ...string) (int, string, string) {
	var out, errb strings.Builder
	err := Run(context.Background(), Env{
		Args:   args,
		Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stdout: &out, Stderr: &errb,
	})
	if msg := Message(err); msg != "" {
		errb.WriteString(msg + "\n")
	}
	return ExitCode(err), out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	user := map[string]string{"USER": "tester"}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		says string
	}{
		{nil, nil, "no command"},
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"list", "--nope"}, nil, "flag provided but not defined"},
		{[]string{"list", "x"}, nil, "no arguments"},
		{[]string{"list", "--limit=-2"}, nil, "--limit"},
		{[]string{"list", "--since", "soon"}, nil, "since"},
		{[]string{"list", "--reason", "bored"}, nil, "--reason"},
		{[]string{"show"}, nil, "one <partition>:<offset>"},
		{[]string{"show", "3"}, nil, "bad ref"},
		{[]string{"show", "3:1", "--json", "--body"}, nil, "exclude"},
		{[]string{"replay"}, user, "needs refs"},
		{[]string{"replay", "1:2", "--provider", "stripe"}, user, "not both"},
		{[]string{"replay", "1:2", "--since", "1h"}, user, "not both"},
		{[]string{"replay", "--all", "--key", "k"}, user, "drop it"},
		{[]string{"replay", "--all", "--rate", "-1"}, user, "rate"},
		{[]string{"replay", "--all", "--rate", "5/d"}, user, "unit"},
		{[]string{"replay", "--all", "--wait", "-1s"}, user, "--wait"},
		{[]string{"replay", "--all", "--dry-run", "--wait", "1s"}, user, "dry run"},
		{[]string{"replay", "--all"}, nil, "--by"},
		{[]string{"resolve"}, user, "at least one"},
		{[]string{"resolve", "1:2"}, user, "--resolution"},
		{[]string{"resolve", "1:2", "--resolution", "replayed", "--note", "x"}, user, "dlq replay itself"},
		{[]string{"resolve", "1:2", "--resolution", "fixed", "--note", "x"}, user, "ignored or manual_fix"},
		{[]string{"resolve", "1:2", "--resolution", "ignored"}, user, "--note"},
		{[]string{"resolve", "1:2", "--resolution", "ignored", "--note", "x"}, nil, "--by"},
		{[]string{"stats", "x"}, nil, "no arguments"},
		{[]string{"events", "x"}, nil, "no arguments"},
		{[]string{"events", "--status", "ok"}, nil, "status \"ok\""},
		{[]string{"events", "--route", "Billing"}, nil, "route"},
		{[]string{"events", "--limit", "501"}, nil, "--limit 501"},
		{[]string{"events", "--since", "soon", "--until", "later"}, nil, "--until"},
		{[]string{"list"}, map[string]string{"KAFKA_BROKERS": "nohost"}, "no port"},
		{[]string{"serve"}, map[string]string{"HOOKLINE_ADMIN_ADDR": ":8081"}, "not loopback"},
		{[]string{"serve"}, map[string]string{"HOOKLINE_ADMIN_ADDR": "10.1.2.3:8081"}, "HOOKLINE_ADMIN_TOKEN"},
		{[]string{"serve"}, map[string]string{"HOOKLINE_ADMIN_TOKEN": "short"}, "16 or more"},
		{[]string{"serve", "--addr", "nonsense"}, nil, "HOOKLINE_ADMIN_ADDR"},
		{[]string{"serve"}, map[string]string{"HOOKLINE_DLQ_METRICS_INTERVAL": "often"}, "HOOKLINE_DLQ_METRICS_INTERVAL"},
		{[]string{"serve"}, map[string]string{"HOOKLINE_DLQ_METRICS_INTERVAL": "1ms"}, "100ms or more"},
	} {
		code, _, stderr := run(tc.env, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.says) {
			t.Errorf("dlq %s: exit %d, stderr %q; want 2 saying %q", strings.Join(tc.args, " "), code, stderr, tc.says)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "serve"}, {"help", "events"}, {"events", "-h"}, {"replay", "-h"}, {"list", "--help"}} {
		code, out, _ := run(nil, args...)
		if code != 0 || !strings.Contains(out, "usage") && !strings.Contains(out, "Usage") {
			t.Errorf("dlq %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{usagef("x"), 2},
		{fmt.Errorf("get: %w", store.ErrNotFound), 2},
		{fmt.Errorf("x: %w", store.ErrBadRef), 2},
		{errors.New("kafka down"), 1},
		{fmt.Errorf("list: %w", store.ErrNoTopic), 1},
		{errFailed, 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := newFlags("replay")
	dry := fs.Bool("dry-run", false, "")
	by := fs.String("by", "", "")
	pos, err := parse(fs, Env{}, "replay", []string{"1:2", "--dry-run", "3:4", "--by", "ann", "--", "--5:6"})
	if err != nil || !*dry || *by != "ann" || strings.Join(pos, " ") != "1:2 3:4 --5:6" {
		t.Fatalf("parse: %v %v %q %v", pos, *dry, *by, err)
	}
}

func TestRateAndSince(t *testing.T) {
	for in, want := range map[string]float64{"50": 50, "50/s": 50, "600/m": 10, "7200/h": 2, "0.5": 0.5} {
		var r rateFlag
		if err := r.Set(in); err != nil || r.perSecond != want {
			t.Errorf("rate %q = %v, %v", in, r.perSecond, err)
		}
	}
	for _, bad := range []string{"", "0", "-3", "x", "5/d", "1e9"} {
		var r rateFlag
		if r.Set(bad) == nil {
			t.Errorf("rate %q accepted", bad)
		}
	}
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	s := sinceFlag{now: func() time.Time { return now }}
	if err := s.Set("2d"); err != nil || !s.t.Equal(now.Add(-48*time.Hour)) || s.String() != "2d" {
		t.Fatalf("since 2d: %v %v", s.t, err)
	}
}

func TestCellEscapesTerminalControls(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "-",
		"plain":                "plain",
		"two\nlines\tand\rtab": "two lines and tab",
		"\x1b[31mred\x1b[0m":   `\x1b[31mred\x1b[0m`,
		"bell\a":               `bell\a`,
		"bad \xff byte":        `bad \xff byte`,
		"unicode ✓ stays":      "unicode ✓ stays",
		"line\u2028separator":  `line\u2028separator`,
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
	if got := block("{\n\t\"a\": \"\x1b]0;title\a\"\n}"); got != "{\n\t\"a\": \"\\x1b]0;title\\a\"\n}" {
		t.Errorf("block = %q", got)
	}
}

func TestProgressLine(t *testing.T) {
	p := replay.Progress{Done: 120, Total: 500, Elapsed: 2400 * time.Millisecond, PerSecond: 50, ETA: 7600 * time.Millisecond}
	if got := progressLine(p); got != "replay 120/500 24% 50.0/s ETA 8s" {
		t.Errorf("progress %q", got)
	}
	p = replay.Progress{Done: 500, Total: 500, Elapsed: 10 * time.Second, PerSecond: 50}
	if got := progressLine(p); got != "replay 500/500 100% 50.0/s in 10s" {
		t.Errorf("final progress %q", got)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8081": true, "[::1]:8081": true, "localhost:1": true, "127.9.9.9:80": true,
		":8081": false, "0.0.0.0:8081": false, "[::]:8081": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		if got, err := isLoopback(addr); err != nil || got != want {
			t.Errorf("isLoopback(%q) = %v, %v", addr, got, err)
		}
	}
}
