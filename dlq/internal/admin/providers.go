package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/pkg/control"
)

// awaitFollowed bounds how long a POST /providers/... or /routes/... waits,
// after its write, for the follower to read the setting back, so that the
// GET after it shows it.
const awaitFollowed = 5 * time.Second

// providersAnswer is GET /providers's answer.
type providersAnswer struct {
	Providers []settings.View `json:"providers"`
	// CaughtUp says the control topic was read to its end: until then an
	// older setting may show.
	CaughtUp bool `json:"caught_up"`
}

func (s *Server) providers(c *gin.Context) {
	views, caught := s.cfg.Settings.Views()
	c.JSON(http.StatusOK, providersAnswer{Providers: views, CaughtUp: caught})
}

// routesAnswer is GET /routes's answer: every route's own setting.
type routesAnswer struct {
	Routes   []settings.View `json:"routes"`
	CaughtUp bool            `json:"caught_up"`
}

func (s *Server) routes(c *gin.Context) {
	views, caught := s.cfg.Settings.RouteViews()
	c.JSON(http.StatusOK, routesAnswer{Routes: views, CaughtUp: caught})
}

// providerRequest is the optional body of POST /providers/{name}/... and
// /routes/{provider}/{route}/...: rate (for /rate; ?rate= also takes it,
// as N, N/s or N/m) and who sets it (by or ?by=; "api" when neither says).
type providerRequest struct {
	Rate *float64 `json:"rate"`
	By   string   `json:"by"`
}

// setProvider serves POST /providers/{name}/pause, /resume and /rate: a
// provider-wide setting.
func (s *Server) setProvider(verb string) gin.HandlerFunc {
	return s.setSetting(verb, func(c *gin.Context) (string, string) { return c.Param("name"), "" })
}

// setRoute serves POST /routes/{provider}/{route}/pause, /resume and
// /rate: one route's setting, answered as the provider's are.
func (s *Server) setRoute(verb string) gin.HandlerFunc {
	return s.setSetting(verb, func(c *gin.Context) (string, string) { return c.Param("provider"), c.Param("route") })
}

// setSetting writes the setting verb makes for the provider (route "") or
// route target names, and answers its view once it is read back.
func (s *Server) setSetting(verb string, target func(*gin.Context) (provider, route string)) gin.HandlerFunc {
	return func(c *gin.Context) {
		provider, route := target(c)
		if err := s.cfg.Settings.Known().Check(provider, route); err != nil {
			if errors.Is(err, settings.ErrUnknown) {
				fail(c, http.StatusNotFound, "not_found", err.Error())
				return
			}
			fail(c, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		var req providerRequest
		if !readOptionalJSON(c, &req) {
			return
		}
		by := strings.TrimSpace(req.By)
		if by == "" {
			by = strings.TrimSpace(c.Query("by"))
		}
		if by == "" {
			by = "api"
		}
		set := control.Setting{Provider: provider, Route: route, Paused: verb == "pause", By: by, At: s.cfg.Store.Now().UTC()}
		rate, given, err := rateFrom(req.Rate, c.Query("rate"))
		switch {
		case err != nil:
			fail(c, http.StatusBadRequest, "bad_request", err.Error())
			return
		case verb == "rate" && !given:
			fail(c, http.StatusBadRequest, "bad_request", `rate is required: {"rate": N} or ?rate=N, calls per second (0 clears the cap)`)
			return
		case verb != "rate" && given:
			fail(c, http.StatusBadRequest, "bad_request", "rate is for POST "+strings.TrimSuffix(c.Request.URL.Path, verb)+"rate")
			return
		}
		set.Rate = rate
		ctx := c.Request.Context()
		if err := s.cfg.SetProvider(ctx, set); err != nil {
			fail(c, http.StatusBadGateway, "kafka", err.Error())
			return
		}
		wctx, cancel := context.WithTimeout(ctx, awaitFollowed)
		defer cancel()
		if !s.cfg.Settings.Await(wctx, set) {
			s.cfg.Logger.Warn("setting written but not read back yet", "provider", provider, "route", route, "setting", set.String(), "in", awaitFollowed.String())
		}
		s.cfg.Logger.Info("setting", "provider", provider, "route", route, "setting", set.String(), "by", by)
		c.JSON(http.StatusOK, settings.ViewOf(set))
	}
}

// rateFrom takes the rate from the body or the query, not both.
func rateFrom(body *float64, query string) (rate float64, given bool, err error) {
	switch {
	case body != nil && query != "":
		return 0, false, errors.New("rate given twice: in the body and in the query")
	case body != nil:
		if err := settings.CheckRate(*body); err != nil {
			return 0, false, errors.New("rate: " + err.Error())
		}
		return *body, true, nil
	case query != "":
		r, err := settings.ParseRate(query)
		if err != nil {
			return 0, false, errors.New("rate " + err.Error())
		}
		return r, true, nil
	}
	return 0, false, nil
}

// readOptionalJSON is readJSON for a body that may be left out.
func readOptionalJSON(c *gin.Context, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return false
	}
	// Empty, or JSON's own white space only (not bytes.TrimSpace's: a
	// form feed or a no-break space alone is not JSON, and was accepted
	// as no body; found by schemathesis).
	if len(bytes.Trim(b, " \t\r\n")) == 0 {
		return true
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(b))
	return readJSON(c, v)
}
