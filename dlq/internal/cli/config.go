package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hookline/hookline/dlq/internal/mail"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/topics"
)

// DefaultAdminAddr is where `dlq serve` listens unless HOOKLINE_ADMIN_ADDR
// or --addr says otherwise: loopback only.
const DefaultAdminAddr = "127.0.0.1:8081"

// DefaultMetricsInterval is how often `dlq serve` tallies the DLQ for
// /metrics unless HOOKLINE_DLQ_METRICS_INTERVAL says otherwise.
const DefaultMetricsInterval = 30 * time.Second

// minTokenLen is the shortest HOOKLINE_ADMIN_TOKEN accepted.
const minTokenLen = 16

// config is everything dlq reads from its environment. Every command reads
// and checks all of it, so a wrong variable is named whichever command runs
// first, with every other wrong one.
type config struct {
	Kafka      kafkaconf.Config
	Topics     topics.Env
	AdminAddr  string     // HOOKLINE_ADMIN_ADDR (serve listens, trace asks serve there)
	AdminToken string     // HOOKLINE_ADMIN_TOKEN (serve, trace)
	LogLevel   slog.Level // HOOKLINE_LOG_LEVEL (serve)
	// ProvidersFile is HOOKLINE_PROVIDERS (provider, serve): the provider
	// names a setting may name; "" accepts any name.
	ProvidersFile string
	// MetricsInterval is HOOKLINE_DLQ_METRICS_INTERVAL (serve): how often
	// serve tallies the DLQ for /metrics.
	MetricsInterval time.Duration
	// TraceDir is HOOKLINE_TRACE_DIR (trace, serve): the trace index.
	TraceDir string
	// HeldAfter is HOOKLINE_HELD_ALERT_AFTER (status, serve): how long an
	// entity of an ordered provider may be held before the status verdict
	// says degraded; keep it equal to HooklineEntityHeldLong's threshold.
	HeldAfter time.Duration
	// AdminHosts is HOOKLINE_ADMIN_HOSTS (serve): the host names, besides
	// IP addresses and localhost, that serve answers to (admin.Config.Hosts).
	AdminHosts []string
	// TraceURL is HOOKLINE_TRACE_URL (serve): the tracing backend's page
	// of one trace, {trace_id} standing for the id, such as
	// http://jaeger:16686/trace/{trace_id}; the console links each step's
	// trace there. Empty: the console shows the trace ids unlinked.
	TraceURL string
	// ProcessorMetrics is HOOKLINE_PROCESSOR_METRICS (status, serve,
	// health-report): the processors' /metrics URLs, separated by commas or
	// spaces, read for the records in flight and the deliveries completed
	// (status.ProcessorMetrics); empty leaves both out.
	ProcessorMetrics []string
	// Report is the e-mail health report's settings (health-report, serve).
	Report reportConfig
	// TimerSlack is HOOKLINE_TIMER_SLACK (serve; package timerslack).
	TimerSlack time.Duration
}

// DefaultReportInterval is how often `dlq serve` sends the health report
// unless HOOKLINE_HEALTH_REPORT_INTERVAL says otherwise (and only when
// HOOKLINE_HEALTH_REPORT_TO names someone).
const DefaultReportInterval = 24 * time.Hour

// reportConfig is where the health report goes and through which server:
// the SMTP settings are the ones `make observe` gives Alertmanager.
type reportConfig struct {
	// To is HOOKLINE_HEALTH_REPORT_TO: the recipients, separated by commas;
	// empty turns serve's periodic report off.
	To []string
	// Interval is HOOKLINE_HEALTH_REPORT_INTERVAL: how often serve sends it.
	Interval time.Duration
	// SMTP is HOOKLINE_ALERT_SMTP_HOST, _USERNAME, _PASSWORD, _REQUIRE_TLS and
	// HOOKLINE_ALERT_EMAIL_FROM.
	SMTP mail.Config
}

// ServeTimerSlack is the timer slack `dlq serve` asks for (dlq's main
// applies it before the command runs, since applying it starts the
// program again); ok false when the configuration is wrong, which the
// command itself reports.
func ServeTimerSlack(lookupEnv func(string) (string, bool)) (d time.Duration, ok bool) {
	c, err := loadConfig(lookupEnv)
	return c.TimerSlack, err == nil
}

// loadConfig reads the configuration; the error names every wrong variable.
func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	r := envconf.New(lookupEnv)
	c := config{
		Kafka:           kafkaconf.Read(r),
		Topics:          topics.ReadEnv(r),
		AdminAddr:       r.Addr("HOOKLINE_ADMIN_ADDR", DefaultAdminAddr),
		AdminToken:      r.Secret("HOOKLINE_ADMIN_TOKEN"), // a token is taken as is
		LogLevel:        obs.ReadLogLevel(r),
		ProvidersFile:   r.String("HOOKLINE_PROVIDERS", ""),
		MetricsInterval: r.Duration("HOOKLINE_DLQ_METRICS_INTERVAL", DefaultMetricsInterval, 100*time.Millisecond, 0),
		TraceDir:        r.String("HOOKLINE_TRACE_DIR", DefaultTraceDir),
		AdminHosts:      hostList(r.String("HOOKLINE_ADMIN_HOSTS", "")),
		TraceURL:        r.String("HOOKLINE_TRACE_URL", ""),
		HeldAfter:       r.Duration("HOOKLINE_HELD_ALERT_AFTER", status.DefaultHeldAfter, time.Minute, 0),
		Report: reportConfig{
			To:       addressList(r.String("HOOKLINE_HEALTH_REPORT_TO", "")),
			Interval: r.Duration("HOOKLINE_HEALTH_REPORT_INTERVAL", DefaultReportInterval, time.Minute, 0),
			SMTP: mail.Config{
				Host:       r.String("HOOKLINE_ALERT_SMTP_HOST", ""),
				From:       r.String("HOOKLINE_ALERT_EMAIL_FROM", ""),
				Username:   r.String("HOOKLINE_ALERT_SMTP_USERNAME", ""),
				Password:   r.Secret("HOOKLINE_ALERT_SMTP_PASSWORD"),
				RequireTLS: r.Bool("HOOKLINE_ALERT_SMTP_REQUIRE_TLS", true),
			},
		},
		ProcessorMetrics: strings.FieldsFunc(r.String("HOOKLINE_PROCESSOR_METRICS", ""), func(r rune) bool { return r == ',' || r == ' ' }),
		TimerSlack:       timerslack.ReadEnv(r),
	}
	r.Add(c.validate())
	return c, r.Err()
}

// addressList splits e-mail addresses separated by commas, trimmed.
func addressList(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// hostList splits HOOKLINE_ADMIN_HOSTS: names separated by commas or
// spaces, lower-cased.
func hostList(v string) []string {
	return strings.FieldsFunc(strings.ToLower(v), func(r rune) bool { return r == ',' || r == ' ' })
}

// validate checks the token's length. Whether serve needs a token at all
// depends on its --addr, so serve checks that itself.
func (c config) validate() error {
	var errs []error
	if c.AdminToken != "" && len(c.AdminToken) < minTokenLen {
		errs = append(errs, &envconf.Error{Name: "HOOKLINE_ADMIN_TOKEN", Value: c.AdminToken, Secret: true, Want: fmt.Sprintf("%d or more characters", minTokenLen)})
	}
	for _, h := range c.AdminHosts {
		if !hostName.MatchString(h) {
			errs = append(errs, &envconf.Error{Name: "HOOKLINE_ADMIN_HOSTS", Value: strings.Join(c.AdminHosts, ","),
				Want: "host names (no port) separated by commas, such as dlq.internal,dlq"})
			break
		}
	}
	if c.TraceURL != "" {
		if pu, err := url.Parse(c.TraceURL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || !strings.Contains(c.TraceURL, "{trace_id}") {
			errs = append(errs, &envconf.Error{Name: "HOOKLINE_TRACE_URL", Value: c.TraceURL,
				Want: "an http(s) URL with {trace_id} where the trace id goes, such as http://jaeger:16686/trace/{trace_id}"})
		}
	}
	errs = append(errs, c.Report.validate()...)
	for _, u := range c.ProcessorMetrics {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			errs = append(errs, &envconf.Error{Name: "HOOKLINE_PROCESSOR_METRICS", Value: strings.Join(c.ProcessorMetrics, ","), Why: fmt.Sprintf("%q is not an http(s) URL", u),
				Want: "the processors' /metrics URLs separated by commas, such as http://processor:9101/metrics"})
			break
		}
	}
	return errors.Join(errs...)
}

// validate checks the addresses and the server; recipients need a sender
// and a server.
func (c reportConfig) validate() []error {
	var errs []error
	if h := c.SMTP.Host; h != "" {
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			errs = append(errs, &envconf.Error{Name: "HOOKLINE_ALERT_SMTP_HOST", Value: h, Want: "host:port, such as smtp.example.com:587"})
		}
	}
	if f := c.SMTP.From; f != "" {
		if _, err := netmail.ParseAddress(f); err != nil {
			errs = append(errs, &envconf.Error{Name: "HOOKLINE_ALERT_EMAIL_FROM", Value: f, Want: "an e-mail address, such as hookline@example.com"})
		}
	}
	if bad := badAddress(c.To); bad != "" {
		return append(errs, &envconf.Error{Name: "HOOKLINE_HEALTH_REPORT_TO", Value: strings.Join(c.To, ","), Why: fmt.Sprintf("%q is not an e-mail address", bad),
			Want: "e-mail addresses separated by commas, such as ops@example.com"})
	}
	if len(c.To) > 0 && (c.SMTP.From == "" || c.SMTP.Host == "") {
		errs = append(errs, &envconf.Error{Name: "HOOKLINE_HEALTH_REPORT_TO", Value: strings.Join(c.To, ","),
			Why:  "the report is sent through HOOKLINE_ALERT_SMTP_HOST as HOOKLINE_ALERT_EMAIL_FROM",
			Want: "both set"})
	}
	return errs
}

// badAddress is the first of list that is not an e-mail address ("" when
// every one is).
func badAddress(list []string) string {
	for _, a := range list {
		if _, err := netmail.ParseAddress(a); err != nil {
			return a
		}
	}
	return ""
}

// hostName is a DNS name, lower case, without a port.
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
