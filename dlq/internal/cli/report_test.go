package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/status"
)

// TestReportMessage: the report's subject carries the verdict and how
// many reasons, its body is exactly what dlq status prints, then who sent
// it.
func TestReportMessage(t *testing.T) {
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	known, err := settings.LoadKnown("../settings/testdata/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	for _, c := range []struct {
		name    string
		in      status.Inputs
		subject string
	}{
		{"healthy", status.Inputs{}, "hookline health: HEALTHY at 2026-03-01 08:00:00Z"},
		{"one reason", status.Inputs{Processors: []status.Processor{{URL: "http://p1:9101/metrics", Error: "HTTP 404"}}},
			"hookline health: DEGRADED (1 reason) at 2026-03-01 08:00:00Z"},
		{"two reasons", status.Inputs{Processors: []status.Processor{{URL: "http://p1:9101/metrics", Error: "HTTP 404"}, {URL: "http://p2:9101/metrics", Error: "HTTP 404", InFlight: one}}},
			"hookline health: DEGRADED (2 reasons) at 2026-03-01 08:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Now, in.Window, in.Known = now, 5*time.Minute, known
			in.Raw = status.Backlog{Topic: "webhooks.raw", Group: "hookline-processor", Partitions: []status.Partition{}}
			rep := status.Build(in)
			m := reportMessage(rep, []string{"ops@example.com"}, "a test")
			if m.Subject != c.subject {
				t.Errorf("subject %q, want %q", m.Subject, c.subject)
			}
			var b strings.Builder
			printStatus(&b, rep)
			if !strings.HasPrefix(m.Body, b.String()) || !strings.HasSuffix(m.Body, "\n-- \nSent by a test (dlq help health-report).\n") {
				t.Errorf("body:\n%s\nwant dlq status's output:\n%s\nthen the signature", m.Body, b.String())
			}
			if len(m.To) != 1 || m.To[0] != "ops@example.com" || !m.Date.Equal(now) {
				t.Errorf("to %v date %s", m.To, m.Date)
			}
		})
	}
}

// TestReportEvery: nothing is sent at start; one report per interval; a
// failed one is counted and logged and the next interval sends again; the
// loop ends with its context.
func TestReportEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		sent := newReportCounter(reg)
		var calls atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			reportEvery(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), 24*time.Hour, sent, func(context.Context) error {
				if calls.Add(1) == 2 {
					return errors.New("smtp: connection refused")
				}
				return nil
			})
		}()
		check := func(wantCalls int32, wantSent, wantFailed float64) {
			t.Helper()
			synctest.Wait()
			if n := calls.Load(); n != wantCalls {
				t.Errorf("%d sends, want %d", n, wantCalls)
			}
			if s, f := testutil.ToFloat64(sent.WithLabelValues("sent")), testutil.ToFloat64(sent.WithLabelValues("failed")); s != wantSent || f != wantFailed {
				t.Errorf("counter sent %v failed %v, want %v and %v", s, f, wantSent, wantFailed)
			}
		}
		check(0, 0, 0)
		time.Sleep(24*time.Hour - time.Second)
		check(0, 0, 0)
		time.Sleep(time.Second)
		check(1, 1, 0)
		time.Sleep(24 * time.Hour)
		check(2, 1, 1)
		time.Sleep(24 * time.Hour)
		check(3, 2, 1)
		cancel()
		<-done
	})
}
