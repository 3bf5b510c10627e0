package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookline/hookline/dlq/internal/admin"
	"github.com/hookline/hookline/dlq/internal/backfill"
	"github.com/hookline/hookline/dlq/internal/mail"
	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/timerslack"
)

const serveHelp = `usage: dlq serve [--addr HOST:PORT]

Serves the DLQ admin API and the console page on HOOKLINE_ADMIN_ADDR (default
127.0.0.1:8081; --addr overrides it):

  GET  /dlq               entries, newest first (?provider= &route= &reason= &key= &since= &unresolved=true &limit= &offset=)
  GET  /dlq/stats         counts by provider, provider/route, reason and resolution; the oldest entries (?provider= &route=)
  GET  /dlq/{ref}         one entry: headers, error history, body
  POST /dlq/replay        {"refs":["3:17"], "by":"alice"} or {"provider":"stripe", "since":"24h", "by":"alice"}
  POST /dlq/{ref}/resolve {"resolution":"ignored", "note":"test event", "by":"alice"}
  GET  /providers         every provider's setting: {"providers":[{"provider","state","paused","rate","text","by","at"}],
                          "caught_up"} (state running, paused or draining)
  POST /providers/{name}/pause    {"by":"alice"} (optional body; ?by= too; default "api")
  POST /providers/{name}/resume   running again, no cap
  POST /providers/{name}/rate     {"rate":5} or ?rate=5 (or 5/s, 300/m): drain at N calls/s; 0 clears the cap
  GET  /routes            every route's own setting: {"routes":[{"provider","route","state",...}],"caught_up"}
  POST /routes/{provider}/{route}/pause, /resume, /rate   as /providers/{name}/..., for one route
  GET  /events           recent deliveries, newest first: one row per outcome (?provider= &route= &event_type=
                          &status= &since= &until= &limit= &cursor=): {"events":[{"at","key","provider","route",
                          "event_type","status","attempt",...,"trace_id"}],"next_cursor","limit","seeks"} (dlq help events)
  GET  /events/{key}      the key's trace: {"key","provider","now":{"state","route",...},"routes":[{"route","now",
                          "last_outcome",...}],"steps":[...],"accepted","attempts","duplicates","unrouted","replays",
                          "dead_letters"} (dlq help trace); 404 for an unknown key
  GET  /parked            what waits in the retry tiers and lanes (?tier= &provider= &route= &limit= &offset=):
                          {"total","counts":[{"tier","provider","route","records","oldest"}],"oldest","records":[...],"offset","limit"}
  GET  /status            dlq status --json over the last 5m: {"verdict","reasons","raw":{"lag","oldest_unprocessed_at",...},
                          "totals",...,"providers":[{"provider",...,"routes":[...]}]} (dlq help status)
  POST /rules/test        with HOOKLINE_PROVIDERS: {"provider","body","headers":{"K":"V"},"event_type"} or
                          {"from_dlq":"3:17"} or {"from_raw":"0:42"}: per route, whether it matches and why
                          (dlq rules test --json's answer; dlq help rules)
  GET  /ui/               the console: overview (/status), dead letters, events, trace, waiting; pause/resume/drain
  GET  /metrics           Prometheus: hookline_dlq_entries, hookline_dlq_unresolved_entries,
                          hookline_dlq_oldest_unresolved_age_seconds, hookline_dlq_tally_timestamp_seconds,
                          hookline_dlq_provider_paused{provider}, hookline_dlq_provider_rate{provider},
                          hookline_dlq_route_paused{provider,route}, hookline_dlq_route_rate{provider,route},
                          hookline_dlq_parked_oldest_age_seconds{tier},
                          hookline_dlq_raw_oldest_unprocessed_age_seconds{topic}, hookline_dlq_redrives_total{provider},
                          hookline_dlq_redrive_held_total{provider}, hookline_dlq_redrive_errors_total{provider},
                          hookline_dlq_health_reports_total{result} (with HOOKLINE_HEALTH_REPORT_TO)

Every API request needs "Authorization: Bearer $HOOKLINE_ADMIN_TOKEN" (at
least 16 characters); anything else is answered 401. Without a token the
server refuses to start unless it listens on loopback only; it then makes a
token for this run and prints the page's address with it on stderr. The page
keeps the token in the tab's sessionStorage and sends it as the bearer
header. Logs are JSON on stderr. SIGTERM or SIGINT stops it.

/metrics is served without the token: it carries counts and ages, never a
key, header or body. One consumer follows webhooks.dlq and
webhooks.dlq-status (each record is read once, kept as a time and a ref in
memory) and the counts are refreshed every HOOKLINE_DLQ_METRICS_INTERVAL
(default 30s), so a scrape costs no Kafka request. Another follows
webhooks.control (dlq help provider, dlq help route) for the provider and
route settings and their gauges; a POST writes the setting there (every
in-sync replica acknowledging) and answers once it has read it back (at
most 5s). With HOOKLINE_PROVIDERS set, a provider or route not in that
file is 404; without it any valid name is taken.

The trace index (HOOKLINE_TRACE_DIR, default data/dlq-trace; a Badger
directory only this process may hold) is fed by one consumer reading
webhooks.raw, webhooks.outcomes, the retry tiers, webhooks.dlq and
webhooks.dlq-status from where it stopped (dlq help trace). The parked gauge
is refreshed every HOOKLINE_DLQ_METRICS_INTERVAL from the first waiting
record of each partition; the raw backlog gauge as often, from the record
at the processor group's committed offset of each partition of
webhooks.raw that has lag. GET /status reads the topics as dlq status does,
with the settings and breaker reports serve follows.

Automatic re-drive: a provider with "redrive: {after: 1h, max: 2}" in
HOOKLINE_PROVIDERS has its DLQ entries with reason exhausted replayed once
they are that old, at most max times per delivery, only while no processor
reports the breaker of the entry's route open (breaker records on
webhooks.control; one without a route is the route default's); each is
marked replayed by auto-redrive, and replayed to its route only. Permanent
entries are never re-driven.

Health report: with HOOKLINE_HEALTH_REPORT_TO set, serve e-mails what GET
/status says (as dlq health-report does) every HOOKLINE_HEALTH_REPORT_INTERVAL
(default 24h; the first one interval after it starts) through
HOOKLINE_ALERT_SMTP_HOST as HOOKLINE_ALERT_EMAIL_FROM (dlq help
health-report). Off without it.
`

// controlRetry is how long serve waits before following webhooks.control
// again after it could not (the topic missing, Kafka unreachable).
const controlRetry = 5 * time.Second

func runServe(ctx context.Context, env Env, args []string) error {
	fs := newFlags("serve")
	addrFlag := fs.String("addr", "", "listen on `HOST:PORT` (overrides HOOKLINE_ADMIN_ADDR)")
	pos, err := parse(fs, env, "serve", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve takes no arguments, got %q", pos[0])
	}
	cfg, err := loadConfig(env.Lookup)
	if err != nil {
		return usagef("%v", err)
	}
	addr := cfg.AdminAddr
	if *addrFlag != "" {
		addr = *addrFlag
	}
	loopback, err := isLoopback(addr)
	if err != nil {
		return usagef("HOOKLINE_ADMIN_ADDR=%s: %v", addr, err)
	}
	token, generated := cfg.AdminToken, false
	switch {
	case token == "" && !loopback:
		return usagef("HOOKLINE_ADMIN_TOKEN is not set: refusing to serve on %s, which is not loopback only (set a token of %d or more characters, or listen on 127.0.0.1)", addr, minTokenLen)
	case token == "":
		token, generated = newToken(), true
	}
	log := obs.NewLogger(env.Stderr, cfg.LogLevel, "dlq")

	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	known, err := a.known()
	if err != nil {
		return err
	}
	if err := a.ensureStatusTopic(ctx); err != nil {
		return err
	}
	reg := obs.NewRegistry()
	metrics := admin.NewMetrics(reg)
	go keep(ctx, log, "dlq metrics", cfg.MetricsInterval, func(ctx context.Context) error {
		return a.store.Track(ctx, cfg.MetricsInterval, metrics.Set)
	})
	live := settings.NewLive(known, reg)
	go keep(ctx, log, "provider settings", controlRetry, func(ctx context.Context) error {
		return control.Follow(ctx, a.newClient, a.names.Control, live.Apply, live.CaughtUp, func(err error) {
			log.Warn("provider settings", "topic", a.names.Control, "err", err)
		})
	})
	ix, closeIndex, reports, err := a.serveTrace(ctx, log, cfg, reg, cfg.MetricsInterval)
	if err != nil {
		return err
	}
	defer closeIndex()
	var jobs *backfill.Jobs
	var file *providers.Registry
	if a.cfg.ProvidersFile != "" {
		if file, err = providers.LoadWithoutSecrets(a.cfg.ProvidersFile); err != nil {
			return usagef("%v", err)
		}
		rn, closeRunner, err := a.backfillRunner()
		if err != nil {
			return err
		}
		defer closeRunner()
		jobs = backfill.NewJobs(rn)
		defer jobs.Stop() // before closeRunner: the jobs end first
	}
	collect := func(ctx context.Context) (status.Report, error) {
		return status.Collect(ctx, a.statusSources(known, func(context.Context) (map[string]control.Setting, control.Reports, error) {
			got, _ := live.Settings()
			return got, reports(), nil
		}), DefaultStatusWindow)
	}
	if rc := cfg.Report; len(rc.To) > 0 {
		sent := newReportCounter(reg)
		by := fmt.Sprintf("dlq serve, every %s (HOOKLINE_HEALTH_REPORT_INTERVAL)", rc.Interval)
		go reportEvery(ctx, log, rc.Interval, sent, func(ctx context.Context) error {
			rep, err := collect(ctx)
			if err != nil {
				return err
			}
			return mail.Send(ctx, rc.SMTP, reportMessage(rep, rc.To, by))
		})
		log.Info("health report on", "to", strings.Join(rc.To, ","), "every", rc.Interval.String(), "smtp", rc.SMTP.Host)
	}
	gin.SetMode(gin.ReleaseMode)
	srv := admin.New(admin.Config{
		Store:       a.store,
		Replayer:    replay.New(a.cl),
		Token:       token,
		BeforeWrite: a.ensureStatusTopic,
		Metrics:     obs.Metrics(reg),
		Settings:    live,
		SetProvider: a.writeSetting,
		Trace:       ix.Trace,
		Events:      ix.List,
		Parked:      a.parkedReader().Read,
		Status:      collect,
		Backfills:   jobs,
		Providers:   file,
		Hosts:       a.cfg.AdminHosts,
		TraceURL:    a.cfg.TraceURL,
		Logger:      log,
	})
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      10 * time.Minute, // a replay of MaxReplay entries answers when every one is acknowledged
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("HOOKLINE_ADMIN_ADDR=%s: %w", addr, err)
	}
	page := "http://" + ln.Addr().String() + "/ui/"
	log.Info("dlq admin listening", "addr", ln.Addr().String(), "page", page, "kafka", a.cfg.Kafka.String(), "topic", a.names.DLQ, "timer_slack", timerslack.Text())
	if generated {
		fmt.Fprintf(env.Stderr, "dlq: HOOKLINE_ADMIN_TOKEN is not set; this run's token is in the page address:\n  %s#token=%s\n", page, token)
	}
	if env.Ready != nil {
		env.Ready <- ln.Addr().String()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("dlq admin stopped")
	return nil
}

// keep runs follow until ctx is done; when it stops early (Kafka
// unreachable, a topic missing), it says so and runs it again after wait.
func keep(ctx context.Context, log *slog.Logger, what string, wait time.Duration, follow func(context.Context) error) {
	for {
		err := follow(ctx)
		if ctx.Err() != nil {
			return
		}
		log.Warn(what+": cannot follow; trying again", "err", err, "in", wait.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// isLoopback reports whether addr listens on loopback only: 127.0.0.0/8,
// ::1 or localhost. An empty host (every interface) is not.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}
