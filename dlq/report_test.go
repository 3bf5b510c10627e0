package main

import (
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/testkit/smtptest"
)

// atLine is the report's time, which differs between two runs.
var atLine = regexp.MustCompile(`(?m)^(HEALTHY|DEGRADED|FAILING) at .*$`)

// TestHealthReportByEmail (issue 32, item 7): dlq health-report --email
// sends one message, through HOOKLINE_ALERT_SMTP_HOST as
// HOOKLINE_ALERT_EMAIL_FROM, to a real SMTP server on 127.0.0.1: its
// subject has the verdict, its body is what dlq status prints on the same
// system (the counts of 3 webhooks accepted and done: 3 done, 3 completed
// by the processor), then who sent it; without a recipient nothing is
// sent and the exit code is 2; dlq serve with HOOKLINE_HEALTH_REPORT_TO
// sends the same report after HOOKLINE_HEALTH_REPORT_INTERVAL (1m here).
func TestHealthReportByEmail(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Partitions: 2})
	sys.EnsureTopics()
	sys.StartIngest()
	proc := sys.StartProcessor("p1", nil)
	outcomes := sys.Read(sys.Names.Outcomes)
	for _, id := range []string{"evt_r1", "evt_r2", "evt_r3"} {
		if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
			t.Fatalf("post %s: %d %v", id, code, err)
		}
	}
	outcomes.Until(60*time.Second, "3 outcomes", func(rs []*kgo.Record) bool { return len(rs) >= 3 })
	waitLag(t, sys, 0)

	sink := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{
		"HOOKLINE_PROCESSOR_METRICS":      "http://" + proc.Addr + "/metrics",
		"HOOKLINE_ALERT_SMTP_HOST":        sink.Addr,
		"HOOKLINE_ALERT_EMAIL_FROM":       "hookline@example.com",
		"HOOKLINE_ALERT_SMTP_REQUIRE_TLS": "false",
	}
	sys.DLQ(env, "health-report").Want(t, 2)
	if n := len(sink.Messages()); n != 0 {
		t.Fatalf("%d messages without a recipient", n)
	}

	want := statusUntil(t, sys, env, "3 done, 3 completed", func(r status.Report) bool {
		return r.Totals.Done == 3 && intOr(r.Totals.Completed) == 3
	})
	run := sys.DLQ(env, "health-report", "--email", "ops@example.com").Want(t, 0)
	table := sys.DLQ(env, "status").Want(t, 0).Stdout
	got := sink.Wait(t, 1, 10*time.Second)
	if len(got) != 1 || got[0].From != "hookline@example.com" || len(got[0].To) != 1 || got[0].To[0] != "ops@example.com" {
		t.Fatalf("received %+v, want one message from hookline@example.com to ops@example.com", got)
	}
	m, err := mail.ReadMessage(bytes.NewReader(got[0].Data))
	if err != nil {
		t.Fatalf("the message does not parse: %v\n%s", err, got[0].Data)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if !strings.HasPrefix(subject, "hookline health: "+strings.ToUpper(want.Verdict)) {
		t.Errorf("subject %q, want the verdict %s", subject, want.Verdict)
	}
	raw, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.ReplaceAll(string(raw), "\r\n", "\n")
	report, sig, ok := strings.Cut(body, "\n-- \n")
	if !ok || !strings.Contains(sig, "Sent by dlq health-report") {
		t.Fatalf("body without its signature:\n%s", body)
	}
	if a, b := atLine.ReplaceAllString(report, "$1 at T"), atLine.ReplaceAllString(table, "$1 at T"); a != b {
		t.Errorf("the e-mail's body is not what dlq status prints:\n%s\ndlq status:\n%s", a, b)
	}
	if !strings.Contains(report, "processors (1 read): 0 in flight; 3 completed since") {
		t.Errorf("the report lacks in flight and completed:\n%s", report)
	}
	if !strings.Contains(run.Stderr, "sent to ops@example.com") {
		t.Errorf("stderr %q does not say where it went", run.Stderr)
	}

	// dlq serve with HOOKLINE_HEALTH_REPORT_TO sends the same report every
	// HOOKLINE_HEALTH_REPORT_INTERVAL (1m, the shortest allowed), the
	// first one interval after it starts, and counts it.
	periodic := smtptest.Start(t, smtptest.Options{})
	env["HOOKLINE_ALERT_SMTP_HOST"] = periodic.Addr
	env["HOOKLINE_HEALTH_REPORT_TO"] = "ops@example.com, lead@example.com"
	env["HOOKLINE_HEALTH_REPORT_INTERVAL"] = "1m"
	svc := sys.StartDLQServe(adminToken, env)
	got = periodic.Wait(t, 1, 2*time.Minute)
	if len(got[0].To) != 2 {
		t.Errorf("serve's report went to %v, want both recipients", got[0].To)
	}
	m, err = mail.ReadMessage(bytes.NewReader(got[0].Data))
	if err != nil {
		t.Fatalf("serve's message does not parse: %v\n%s", err, got[0].Data)
	}
	raw, err = io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	body = strings.ReplaceAll(string(raw), "\r\n", "\n")
	if !strings.Contains(body, "3 completed since") || !strings.Contains(body, "Sent by dlq serve, every 1m0s") || !atLine.MatchString(body) {
		t.Errorf("serve's report:\n%s", body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := loadtest.CounterSum(t.Context(), "http://"+svc.Addr+"/metrics", "hookline_dlq_health_reports_total", `result="sent"`)
		if err == nil && n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hookline_dlq_health_reports_total{result=\"sent\"}: %v %v, want 1 after a report was received", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
