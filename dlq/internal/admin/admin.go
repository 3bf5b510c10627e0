// Package admin is `dlq serve`: the DLQ admin API (gin) and the console page
// it serves.
//
//	GET  /dlq               entries, newest first: ?provider= &route= &reason= &key= &since= &unresolved=true &limit= &offset=
//	GET  /dlq/stats         counts by provider, provider/route, reason and resolution; the oldest entries: ?provider= &route=
//	GET  /dlq/{ref}         one entry: headers, error history, body
//	POST /dlq/replay        {"refs":[...]} or {"key"|"provider"|"all", "route", "reason", "since", "include_resolved"}, "dry_run", "by", "note"
//	POST /dlq/{ref}/resolve {"resolution":"ignored"|"manual_fix", "note", "by"}
//	GET  /providers         every provider's provider-wide setting (running, paused, draining at N/s), when Config.Settings is set
//	POST /providers/{name}/pause, /resume, /rate  {"rate": N} or ?rate=N for /rate; "by" or ?by= (default "api")
//	GET  /routes            every route's own setting, when Config.Settings is set
//	POST /routes/{provider}/{route}/pause, /resume, /rate  as /providers/{name}/...
//	GET  /events            the events list, newest first (trace.go): ?provider= &route= &event_type= &status= &since= &until= &limit= &cursor=, when Config.Events is set
//	GET  /events/{key}      the key's trace (trace.go), when Config.Trace is set
//	GET  /parked            what waits in the retry tiers and lanes: ?tier= &provider= &route= &limit= &offset=, when Config.Parked is set
//	GET  /status            the status report and verdict (dlq status --json), when Config.Status is set
//	POST /backfills         start a backfill of a route ({"provider","route","since",...}; dry_run answers its report), when Config.Backfills is set
//	GET  /backfills, /backfills/{id}  the backfills this process started, and one with its progress
//	POST /rules/test        per route of a provider, whether a delivery ({"provider","body","headers","event_type"} or {"from_dlq"|"from_raw"}) matches and why, when Config.Providers is set
//	GET  /ui/               the console (static: HTML, JS and CSS, no data; it reads the API)
//	GET  /metrics           Prometheus: the DLQ's counts (Metrics), when Config.Metrics is set
//
// Every API request needs "Authorization: Bearer <token>", compared in
// constant time; anything else is 401. The page's three static files carry
// no data and are served without it, since a browser cannot put a bearer
// header on a navigation: the page asks for the token, keeps it in
// sessionStorage (gone when the tab closes, never in a cookie, so no request
// carries it unless the page's own script adds it, which also rules out
// CSRF) and sends it on every API call. A URL fragment #token=... (never sent
// to the server) is taken and then removed from the address bar. /metrics
// carries counts and ages only, never a key, a header or a body, and is
// served without the token so Prometheus can scrape it.
//
// Errors are JSON {"error":"<code>","message":"..."}: 400 bad_request, 401
// unauthorized, 404 not_found, 502 kafka (a Kafka request failed).
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookline/hookline/dlq/internal/backfill"
	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
)

//go:embed web
var web embed.FS

// MaxReplay is the most entries one POST /dlq/replay sends; larger sets are
// for `dlq replay`, which shows progress and can be interrupted.
const MaxReplay = 1000

// Config wires a Server.
type Config struct {
	Store    *store.Store
	Replayer *replay.Replayer
	// Token is the bearer token every API request must carry; required.
	Token string
	// BeforeWrite runs before a replay or resolution is written (creates
	// webhooks.dlq-status when missing).
	BeforeWrite func(context.Context) error
	// Metrics, when set, is served on GET /metrics without the token (see
	// NewMetrics: it holds no payload data).
	Metrics http.Handler
	// Settings, when set, serves /providers and /routes: the providers'
	// and routes' settings as followed from webhooks.control (and the
	// providers and routes a name is checked against); SetProvider writes
	// one there (provider-wide or a route's) and is required with it.
	Settings    *settings.Live
	SetProvider func(context.Context, control.Setting) error
	// Trace, when set, serves GET /events/{key} (trace.go); Events GET
	// /events; Parked GET /parked.
	Trace  func(key string) (trace.Trace, error)
	Events func(ctx context.Context, f trace.ListFilter, cursor string, limit int) (trace.ListPage, error)
	Parked func(ctx context.Context, f parked.Filter, offset, limit int) (parked.Report, error)
	// Status, when set, serves GET /status (status.Collect).
	Status func(ctx context.Context) (status.Report, error)
	// Backfills, when set with Providers, serves POST and GET /backfills.
	// Providers, when set, serves POST /rules/test.
	Backfills *backfill.Jobs
	Providers *providers.Registry
	// Hosts are the host names, lower case, that requests may name in
	// their Host header besides IP addresses and localhost
	// (HOOKLINE_ADMIN_HOSTS); any other is answered 421 (hostAllowed).
	Hosts  []string
	Logger *slog.Logger
}

// Server serves the admin API and the console page.
type Server struct {
	cfg   Config
	token [sha256.Size]byte
}

// New returns a Server. It panics on an empty token: the caller decides
// whether to generate one.
func New(c Config) *Server {
	if c.Token == "" {
		panic("admin: empty token")
	}
	if c.BeforeWrite == nil {
		c.BeforeWrite = func(context.Context) error { return nil }
	}
	if c.Settings != nil && c.SetProvider == nil {
		panic("admin: Settings without SetProvider")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{cfg: c, token: sha256.Sum256([]byte(c.Token))}
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	r := gin.New()
	r.Use(gin.Recovery(), s.logRequests, secureHeaders, s.checkHost)
	r.GET("/", func(c *gin.Context) { c.Redirect(http.StatusFound, "/ui/") })
	r.GET("/ui/", s.static("web/index.html", "text/html; charset=utf-8"))
	r.GET("/ui/app.js", s.static("web/app.js", "text/javascript; charset=utf-8"))
	r.GET("/ui/style.css", s.static("web/style.css", "text/css; charset=utf-8"))
	if s.cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(s.cfg.Metrics))
	}

	api := r.Group("/dlq", s.auth)
	api.GET("", s.list)
	api.GET("/stats", s.stats)
	api.GET("/:ref", s.show)
	api.POST("/replay", s.replay)
	api.POST("/:ref/resolve", s.resolve)
	if s.cfg.Settings != nil {
		pr := r.Group("/providers", s.auth)
		pr.GET("", s.providers)
		rt := r.Group("/routes", s.auth)
		rt.GET("", s.routes)
		for _, verb := range []string{"pause", "resume", "rate"} {
			pr.POST("/:name/"+verb, s.setProvider(verb))
			rt.POST("/:provider/:route/"+verb, s.setRoute(verb))
		}
	}
	if s.cfg.Trace != nil {
		r.GET("/events/*key", s.auth, s.events)
	}
	if s.cfg.Events != nil {
		r.GET("/events", s.auth, s.listEvents)
	}
	if s.cfg.Parked != nil {
		r.GET("/parked", s.auth, s.parked)
	}
	if s.cfg.Status != nil {
		r.GET("/status", s.auth, s.status)
	}
	if s.cfg.Backfills != nil && s.cfg.Providers != nil {
		bf := r.Group("/backfills", s.auth)
		bf.POST("", s.startBackfill)
		bf.GET("", s.backfills)
		bf.GET("/:id", s.backfillJob)
	}
	if s.cfg.Providers != nil {
		r.POST("/rules/test", s.auth, s.testRules)
	}
	r.NoRoute(s.auth, func(c *gin.Context) { fail(c, http.StatusNotFound, "not_found", "no such route") })
	return r
}

// auth checks the bearer token in constant time (both sides hashed first,
// so the token's length does not leak either).
func (s *Server) auth(c *gin.Context) {
	h := c.GetHeader("Authorization")
	var got string
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		got = strings.TrimSpace(h[7:])
	}
	sum := sha256.Sum256([]byte(got))
	if got == "" || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="hookline-dlq"`)
		fail(c, http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <HOOKLINE_ADMIN_TOKEN>")
		return
	}
	c.Next()
}

// checkHost answers 421 to a request whose Host is a name this server was
// not told it has: a DNS-rebinding page (attacker.example resolving to
// 127.0.0.1) runs in the browser with its own origin, and the browser sends
// its name as the Host. IP addresses and localhost are always answered: a
// page cannot rebind an address.
func (s *Server) checkHost(c *gin.Context) {
	host := c.Request.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if net.ParseIP(host) != nil || host == "localhost" || slices.Contains(s.cfg.Hosts, host) {
		c.Next()
		return
	}
	c.AbortWithStatusJSON(http.StatusMisdirectedRequest, gin.H{"error": "misdirected",
		"message": fmt.Sprintf("this server does not answer to host %q: name it in HOOKLINE_ADMIN_HOSTS, or use its address", host)})
}

func secureHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	c.Next()
}

func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	if c.Request.URL.Path == "/metrics" {
		level = slog.LevelDebug // a scrape every few seconds
	}
	s.cfg.Logger.Log(c.Request.Context(), level, "request", "method", c.Request.Method, "path", c.Request.URL.Path, "status", c.Writer.Status(),
		"ms", time.Since(start).Milliseconds(), "remote", c.ClientIP())
}

func (s *Server) static(name, contentType string) gin.HandlerFunc {
	return func(c *gin.Context) {
		b, err := web.ReadFile(name)
		if err != nil {
			fail(c, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		c.Data(http.StatusOK, contentType, b)
	}
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func fail(c *gin.Context, code int, kind, msg string) {
	c.AbortWithStatusJSON(code, errorBody{Error: kind, Message: msg})
}

// kafkaFail answers a store error: 404 for a missing entry, 502 otherwise.
func kafkaFail(c *gin.Context, err error) {
	if errors.Is(err, store.ErrNotFound) {
		fail(c, http.StatusNotFound, "not_found", err.Error())
		return
	}
	fail(c, http.StatusBadGateway, "kafka", err.Error())
}

// listPage is GET /dlq's answer.
type listPage struct {
	Entries []store.Summary `json:"entries"`
	// Total is how many entries match, of which Entries is the page at
	// Offset.
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

func (s *Server) list(c *gin.Context) {
	f, err := filterFrom(c.Query("provider"), c.Query("route"), c.Query("reason"), c.Query("key"), c.Query("since"), s.cfg.Store.Now())
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	f.Unresolved = c.Query("unresolved") == "true" || c.Query("unresolved") == "1"
	limit, err1 := queryInt(c, "limit", 50, 1, 1000)
	offset, err2 := queryInt(c, "offset", 0, 0, 1<<31)
	if err := errors.Join(err1, err2); err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	es, err := s.cfg.Store.List(c.Request.Context(), f, false)
	if err != nil {
		kafkaFail(c, err)
		return
	}
	page := listPage{Entries: []store.Summary{}, Total: len(es), Offset: offset, Limit: limit}
	for i := offset; i < len(es) && i < offset+limit; i++ {
		page.Entries = append(page.Entries, es[i].Summary())
	}
	c.JSON(http.StatusOK, page)
}

// queryInt reads a whole number from lo to hi, written as such: digits
// only, no sign, no leading zero (what the document calls an integer;
// Atoi alone takes "+5" and "007"). Left out or empty, it is def.
func queryInt(c *gin.Context, name string, def, lo, hi int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || strings.TrimLeft(v, "0123456789") != "" || len(v) > 1 && v[0] == '0' || n < lo || n > hi {
		return 0, errors.New(name + "=" + strconv.Quote(v) + ": want a whole number from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi))
	}
	return n, nil
}

// filterFrom builds a filter from request fields; since takes what
// store.ParseSince takes, route a route name.
func filterFrom(provider, route, reason, key, since string, now time.Time) (store.Filter, error) {
	f := store.Filter{Provider: provider, Route: route, Reason: reason, Key: key}
	if reason != "" && !headers.IsDeadReason(reason) {
		return f, errors.New("reason " + strconv.Quote(reason) + ": want permanent, exhausted, invalid_payload or transform_failed")
	}
	if route != "" {
		if err := control.CheckRoute(route); err != nil {
			return f, err
		}
	}
	if since != "" {
		t, err := store.ParseSince(since, now)
		if err != nil {
			return f, fmt.Errorf("since %w", err)
		}
		f.Since = t
	}
	return f, nil
}

func (s *Server) stats(c *gin.Context) {
	f, err := filterFrom(c.Query("provider"), c.Query("route"), "", "", "", s.cfg.Store.Now())
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	es, err := s.cfg.Store.List(c.Request.Context(), f, false)
	if err != nil {
		kafkaFail(c, err)
		return
	}
	c.JSON(http.StatusOK, store.Summarise(es, s.cfg.Store.Now()))
}

func (s *Server) show(c *gin.Context) {
	ref, err := store.ParseRef(c.Param("ref"))
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	e, err := s.cfg.Store.Get(c.Request.Context(), ref)
	if err != nil {
		kafkaFail(c, err)
		return
	}
	c.JSON(http.StatusOK, e.Detail())
}

// replayRequest is POST /dlq/replay's body.
type replayRequest struct {
	Refs            []string `json:"refs"`
	Key             string   `json:"key"`
	Provider        string   `json:"provider"`
	Route           string   `json:"route"`
	All             bool     `json:"all"`
	Reason          string   `json:"reason"`
	Since           string   `json:"since"`
	IncludeResolved bool     `json:"include_resolved"`
	DryRun          bool     `json:"dry_run"`
	By              string   `json:"by"`
	Note            string   `json:"note"`
}

// replayAnswer is POST /dlq/replay's answer: one result per entry.
type replayAnswer struct {
	Results []replay.Result `json:"results"`
	Sent    int             `json:"sent"`
	Failed  int             `json:"failed"`
}

func (s *Server) replay(c *gin.Context) {
	var req replayRequest
	if !readJSON(c, &req) {
		return
	}
	sel := store.Selection{All: req.All, IncludeResolved: req.IncludeResolved}
	for _, r := range req.Refs {
		ref, err := store.ParseRef(r)
		if err != nil {
			fail(c, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		sel.Refs = append(sel.Refs, ref)
	}
	f, err := filterFrom(req.Provider, req.Route, req.Reason, req.Key, req.Since, s.cfg.Store.Now())
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	sel.Filter = f
	if err := sel.Validate(); err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error()+" (fields refs, key, provider, all, route, reason, since, include_resolved)")
		return
	}
	if strings.TrimSpace(req.By) == "" && !req.DryRun {
		fail(c, http.StatusBadRequest, "bad_request", "by is required: who replays")
		return
	}
	ctx := c.Request.Context()
	entries, err := s.cfg.Store.Select(ctx, sel)
	if err != nil {
		kafkaFail(c, err)
		return
	}
	if len(entries) > MaxReplay {
		fail(c, http.StatusBadRequest, "bad_request", strconv.Itoa(len(entries))+" entries match; the API replays at most "+strconv.Itoa(MaxReplay)+" at once (use dlq replay)")
		return
	}
	if !req.DryRun && len(entries) > 0 {
		if err := s.cfg.BeforeWrite(ctx); err != nil {
			kafkaFail(c, err)
			return
		}
	}
	names := s.cfg.Store.Names()
	ans := replayAnswer{Results: []replay.Result{}}
	sum := s.cfg.Replayer.Run(ctx, entries, replay.Options{
		Raw: names.Raw, Status: names.DLQStatus, DryRun: req.DryRun, By: strings.TrimSpace(req.By), Note: req.Note,
	}, func(r replay.Result) { ans.Results = append(ans.Results, r) })
	ans.Sent, ans.Failed = sum.Sent, sum.Failed
	s.cfg.Logger.Info("replay", "by", req.By, "entries", len(entries), "sent", sum.Sent, "failed", sum.Failed, "dry_run", req.DryRun)
	c.JSON(http.StatusOK, ans)
}

// resolveRequest is POST /dlq/{ref}/resolve's body.
type resolveRequest struct {
	Resolution string `json:"resolution"`
	Note       string `json:"note"`
	By         string `json:"by"`
}

func (s *Server) resolve(c *gin.Context) {
	ref, err := store.ParseRef(c.Param("ref"))
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var req resolveRequest
	if !readJSON(c, &req) {
		return
	}
	if req.Resolution != store.Ignored && req.Resolution != store.ManualFix {
		fail(c, http.StatusBadRequest, "bad_request", "resolution "+strconv.Quote(req.Resolution)+": want ignored or manual_fix (replayed is written by a replay)")
		return
	}
	if strings.TrimSpace(req.Note) == "" {
		fail(c, http.StatusBadRequest, "bad_request", "note is required: say why")
		return
	}
	rs, err := store.NewResolution(ref, req.Resolution, req.Note, req.By, s.cfg.Store.Now())
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	ctx := c.Request.Context()
	if _, err := s.cfg.Store.Get(ctx, ref); err != nil {
		kafkaFail(c, err)
		return
	}
	if err := s.cfg.BeforeWrite(ctx); err != nil {
		kafkaFail(c, err)
		return
	}
	if err := s.cfg.Store.Resolve(ctx, rs); err != nil {
		kafkaFail(c, err)
		return
	}
	s.cfg.Logger.Info("resolve", "ref", rs.Ref, "resolution", rs.Resolution, "by", rs.By)
	c.JSON(http.StatusOK, rs)
}

// maxBody bounds a request body.
const maxBody = 64 << 10

func readJSON(c *gin.Context, v any) bool {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBody)
	if err := c.ShouldBindJSON(v); err != nil {
		fail(c, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return false
	}
	return true
}

// status answers GET /status: the report dlq status --json prints.
func (s *Server) status(c *gin.Context) {
	rep, err := s.cfg.Status(c.Request.Context())
	if err != nil {
		kafkaFail(c, err)
		return
	}
	c.JSON(http.StatusOK, rep)
}
