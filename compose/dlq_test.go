package compose

import (
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
)

// TestComposeDLQProviders (issue 32, item 5): the dlq service reads the
// processor's providers file, mounted where its HOOKLINE_PROVIDERS points,
// so /status knows each route's priority class and POST /backfills and
// re-drive are on; the example's redrive policy loads with the loader dlq
// uses (providers.LoadWithoutSecrets) and is the one its comment states.
func TestComposeDLQProviders(t *testing.T) {
	cf := loadCompose(t)
	hostFile := func(svc string) string {
		t.Helper()
		s, ok := cf.Services[svc]
		if !ok {
			t.Fatalf("no %s service", svc)
		}
		path := s.Environment["HOOKLINE_PROVIDERS"]
		if path == "" {
			t.Fatalf("%s: HOOKLINE_PROVIDERS is not set: dlq serve then has no routes, priorities, backfills or re-drive", svc)
		}
		host, ok := mounts(t, svc, s.Volumes)[path]
		if !ok {
			t.Fatalf("%s: HOOKLINE_PROVIDERS=%s is not a mounted file (mounts %v)", svc, path, s.Volumes)
		}
		return host
	}
	dlq, processor := hostFile("dlq"), hostFile("processor")
	if dlq != processor {
		t.Fatalf("dlq mounts %s as its providers file, the processor %s: dlq must read the file the processor routes by", dlq, processor)
	}

	reg, err := providers.LoadWithoutSecrets(dlq)
	if err != nil {
		t.Fatalf("dlq cannot load %s: %v", dlq, err)
	}
	// The policy the example's comment states; retell has none.
	want := map[string]*providers.Redrive{
		"stripe": {After: time.Hour, Max: 2},
		"github": {After: time.Hour, Max: 2},
		"calcom": {After: time.Hour, Max: 2},
		"salla":  {After: time.Hour, Max: 2},
		"retell": nil,
	}
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: a provider this test does not know: state its redrive policy here", name)
			continue
		}
		switch {
		case w == nil && p.Redrive != nil:
			t.Errorf("%s: redrive %+v, want none", name, *p.Redrive)
		case w != nil && (p.Redrive == nil || *p.Redrive != *w):
			t.Errorf("%s: redrive %+v, want %+v", name, p.Redrive, *w)
		}
		if len(p.Routes()) == 0 {
			t.Errorf("%s: no route: /status would list it without a priority class", name)
		}
		for _, rt := range p.Routes() {
			switch rt.Priority {
			case providers.PriorityCritical, providers.PriorityHigh, providers.PriorityNormal, providers.PriorityLow:
			default:
				t.Errorf("%s/%s: priority %v", name, rt.Name, rt.Priority)
			}
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s: in this test, not in %s", name, dlq)
	}
}

// TestComposeDLQReadsProcessorMetrics: HOOKLINE_PROCESSOR_METRICS of the dlq
// service is the processor service's /metrics, on the port it listens on,
// so /status has in flight and completed.
func TestComposeDLQReadsProcessorMetrics(t *testing.T) {
	cf := loadCompose(t)
	want := "http://processor:" + portOf(t, cf, "processor") + "/metrics"
	if got := cf.Services["dlq"].Environment["HOOKLINE_PROCESSOR_METRICS"]; got != want {
		t.Errorf("dlq: HOOKLINE_PROCESSOR_METRICS=%q, want %q", got, want)
	}
}

// TestComposeDLQReportMail: the dlq service's health report goes through
// the SMTP server and sender the alertmanager service's e-mail receiver
// uses (each HOOKLINE_ALERT_SMTP_* and HOOKLINE_ALERT_EMAIL_FROM passed the
// same way, with the same default), and is off unless
// HOOKLINE_HEALTH_REPORT_TO is given.
func TestComposeDLQReportMail(t *testing.T) {
	cf := loadCompose(t)
	dlq, am := cf.Services["dlq"], cf.Services["alertmanager"]
	for _, k := range []string{"HOOKLINE_ALERT_EMAIL_FROM", "HOOKLINE_ALERT_SMTP_HOST", "HOOKLINE_ALERT_SMTP_USERNAME",
		"HOOKLINE_ALERT_SMTP_PASSWORD", "HOOKLINE_ALERT_SMTP_REQUIRE_TLS"} {
		if d, a := dlq.Environment[k], am.Environment[k]; d != a || a == "" {
			t.Errorf("%s: dlq %q, alertmanager %q: want the same", k, d, a)
		}
	}
	if to := dlq.Environment["HOOKLINE_HEALTH_REPORT_TO"]; to != "${HOOKLINE_HEALTH_REPORT_TO:-}" {
		t.Errorf("dlq: HOOKLINE_HEALTH_REPORT_TO=%q: want it passed through, empty (off) by default", to)
	}
}
