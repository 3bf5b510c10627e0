package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/dlq/internal/mail"
	"github.com/hookline/hookline/dlq/internal/status"
)

const reportHelp = `usage: dlq health-report [--email ADDR,...] [--window DUR] [--print]

Sends the health report by e-mail: a summary, not an alert. Its body is
what dlq status prints (the verdict and its reasons, webhooks.raw's lag,
in flight and completed, and per provider and route accepted, done,
completed, retrying, parked, dead letters, breaker and setting), its
subject the verdict:

  Subject: hookline health: DEGRADED (2 reasons) at 2026-03-01 08:00:00Z

It goes to --email (addresses separated by commas), else to
HOOKLINE_HEALTH_REPORT_TO, through the SMTP server make observe gives
Alertmanager: HOOKLINE_ALERT_SMTP_HOST (host:port; port 465 is TLS from
the start, any other upgrades with STARTTLS when offered),
HOOKLINE_ALERT_EMAIL_FROM, HOOKLINE_ALERT_SMTP_USERNAME and
HOOKLINE_ALERT_SMTP_PASSWORD (a PLAIN login, when set), and
HOOKLINE_ALERT_SMTP_REQUIRE_TLS (default true: nothing is sent over a
connection STARTTLS did not encrypt). --print writes the message to
stdout instead and needs no SMTP server.

dlq serve sends the same report every HOOKLINE_HEALTH_REPORT_INTERVAL
(default 24h, the first one interval after it starts) when
HOOKLINE_HEALTH_REPORT_TO names someone; off otherwise. Its counter
hookline_dlq_health_reports_total{result="sent"|"failed"} says whether
they go out (a failed one is logged; the next waits for the next
interval).

Exit codes: 0 sent (whatever the verdict); 1 a topic could not be read or
the server refused the message; 2 usage (no recipient, a bad address).
`

// reportWindow is the window the report counts accepted and done over, as
// dlq status by default.
const reportWindow = DefaultStatusWindow

func runHealthReport(ctx context.Context, env Env, args []string) error {
	fs := newFlags("health-report")
	email := fs.String("email", "", "send to `ADDR,...` (default HOOKLINE_HEALTH_REPORT_TO)")
	window := fs.Duration("window", reportWindow, "count accepted and done records over the last `DUR`")
	toStdout := fs.Bool("print", false, "write the message to stdout; send nothing")
	pos, err := parse(fs, env, "health-report", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("health-report takes no arguments, got %q", pos[0])
	}
	if err := checkWindow("health-report", *window); err != nil {
		return err
	}
	cfg, err := loadConfig(env.Lookup)
	if err != nil {
		return usagef("%v", err)
	}
	rc := cfg.Report
	if *email != "" {
		rc.To = addressList(*email)
		if bad := badAddress(rc.To); bad != "" {
			return usagef("health-report: --email %s: %q is not an e-mail address", *email, bad)
		}
	}
	if !*toStdout {
		switch {
		case len(rc.To) == 0:
			return usagef("health-report: no recipient: give --email or set HOOKLINE_HEALTH_REPORT_TO (or --print)")
		case rc.SMTP.Host == "" || rc.SMTP.From == "":
			return usagef("health-report: set HOOKLINE_ALERT_SMTP_HOST and HOOKLINE_ALERT_EMAIL_FROM, the server and sender make observe uses (or --print)")
		}
	}
	rep, err := readStatus(ctx, env, *window)
	if err != nil {
		return err
	}
	m := reportMessage(rep, rc.To, "dlq health-report")
	if *toStdout {
		fmt.Fprintf(env.Stdout, "To: %s\nSubject: %s\n\n%s", strings.Join(m.To, ", "), m.Subject, m.Body)
		return nil
	}
	if err := mail.Send(ctx, rc.SMTP, m); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "dlq: health report (%s) sent to %s\n", rep.Verdict, strings.Join(m.To, ", "))
	return nil
}

// reportMessage is the e-mail of rep: the verdict in the subject, dlq
// status's table as the body, and who sent it.
func reportMessage(rep status.Report, to []string, by string) mail.Message {
	var b bytes.Buffer
	printStatus(&b, rep)
	fmt.Fprintf(&b, "\n-- \nSent by %s (dlq help health-report).\n", by)
	reasons := ""
	switch n := len(rep.Reasons); n {
	case 0:
	case 1:
		reasons = " (1 reason)"
	default:
		reasons = fmt.Sprintf(" (%d reasons)", n)
	}
	subject := fmt.Sprintf("hookline health: %s%s at %s", strings.ToUpper(rep.Verdict), reasons, when(rep.At))
	return mail.Message{To: to, Subject: subject, Body: b.String(), Date: rep.At}
}

// reportEvery calls send every interval until ctx ends, the first time
// one interval after it starts (a restart sends nothing at once); a
// failed send is logged and counted, and the next waits for the next
// interval.
func reportEvery(ctx context.Context, log *slog.Logger, interval time.Duration, sent *prometheus.CounterVec, send func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := send(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			sent.WithLabelValues("failed").Inc()
			log.Warn("health report not sent", "err", err, "next_in", interval.String())
			continue
		}
		sent.WithLabelValues("sent").Inc()
	}
}

// newReportCounter registers hookline_dlq_health_reports_total.
func newReportCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookline_dlq_health_reports_total",
		Help: "Health reports dlq serve tried to send by e-mail (HOOKLINE_HEALTH_REPORT_TO, every HOOKLINE_HEALTH_REPORT_INTERVAL), by result: sent or failed.",
	}, []string{"result"})
	reg.MustRegister(c)
	for _, r := range []string{"sent", "failed"} {
		c.WithLabelValues(r)
	}
	return c
}
