package admin

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookline/hookline/dlq/internal/backfill"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/providers/route"
)

// backfillRequest is POST /backfills' body.
type backfillRequest struct {
	Provider string   `json:"provider"`
	Route    string   `json:"route"`
	Since    string   `json:"since"`
	Until    string   `json:"until"`
	Events   []string `json:"events"`
	Again    bool     `json:"again"`
	ID       string   `json:"id"`
	Rate     float64  `json:"rate"`
	DryRun   bool     `json:"dry_run"`
	By       string   `json:"by"`
}

// spec checks req and turns it into a backfill; the error is the 400's.
func (s *Server) spec(req backfillRequest, now time.Time) (backfill.Spec, error) {
	var spec backfill.Spec
	if req.Since == "" {
		return spec, errors.New("since is required: from when to send the events again")
	}
	var err error
	if spec.Since, err = store.ParseSince(req.Since, now); err != nil {
		return spec, errors.New("since: " + err.Error())
	}
	spec.Until = now
	if req.Until != "" {
		if spec.Until, err = store.ParseSince(req.Until, now); err != nil {
			return spec, errors.New("until: " + err.Error())
		}
	}
	if !spec.Since.Before(spec.Until) {
		return spec, errors.New("since is not before until")
	}
	if spec.Events, err = route.ParseEventFilter(req.Events); err != nil {
		return spec, errors.New("events: " + err.Error())
	}
	if req.Rate < 0 {
		return spec, errors.New("rate: want a positive number per second, or 0 for no cap")
	}
	spec.ID = req.ID
	if spec.ID == "" {
		spec.ID = backfill.NewID(now)
	} else if err := backfill.CheckID(spec.ID); err != nil {
		return spec, err
	}
	if spec.Provider, spec.Route, err = backfill.Resolve(s.cfg.Providers, req.Provider, req.Route); err != nil {
		return spec, err
	}
	spec.Again, spec.Rate, spec.DryRun = req.Again, req.Rate, req.DryRun
	return spec, nil
}

// startBackfill answers POST /backfills: a dry run's report (200), or the
// job started (202, Location /backfills/{id}).
func (s *Server) startBackfill(c *gin.Context) {
	var req backfillRequest
	if !readJSON(c, &req) {
		return
	}
	spec, err := s.spec(req, time.Now())
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if spec.DryRun {
		rep, err := s.cfg.Backfills.DryRun(c.Request.Context(), spec)
		if err != nil {
			kafkaFail(c, err)
			return
		}
		c.JSON(http.StatusOK, rep)
		return
	}
	by := strings.TrimSpace(req.By)
	if by == "" {
		fail(c, http.StatusBadRequest, "bad_request", "by is required: who backfills")
		return
	}
	if err := s.cfg.BeforeWrite(c.Request.Context()); err != nil {
		kafkaFail(c, err)
		return
	}
	job, err := s.cfg.Backfills.Start(spec, by)
	if errors.Is(err, backfill.ErrBusy) {
		fail(c, http.StatusConflict, "conflict", err.Error())
		return
	}
	if err != nil {
		kafkaFail(c, err)
		return
	}
	s.cfg.Logger.Info("backfill", "id", job.ID, "provider", job.Provider, "route", job.Route, "by", by, "again", spec.Again)
	c.Header("Location", "/backfills/"+job.ID)
	c.JSON(http.StatusAccepted, job)
}

// backfills answers GET /backfills: the jobs this process started.
func (s *Server) backfills(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"backfills": s.cfg.Backfills.List()})
}

// backfillJob answers GET /backfills/{id}.
func (s *Server) backfillJob(c *gin.Context) {
	job, ok := s.cfg.Backfills.Get(c.Param("id"))
	if !ok {
		fail(c, http.StatusNotFound, "not_found", "no backfill "+c.Param("id")+" started by this dlq serve since it started")
		return
	}
	c.JSON(http.StatusOK, job)
}
