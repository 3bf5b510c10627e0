package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/control"
)

// GET /events/{key}: the key's trace (trace.Trace), 404 for a key the
// index holds nothing of. The key is the rest of the path, so a key with
// "/" is asked as it is or with %2F.
func (s *Server) events(c *gin.Context) {
	key := strings.TrimPrefix(c.Param("key"), "/")
	if key == "" {
		fail(c, http.StatusBadRequest, "bad_request", "GET /events/{key}: the key is empty")
		return
	}
	t, err := s.cfg.Trace(key)
	switch {
	case errors.Is(err, trace.ErrUnknownKey):
		fail(c, http.StatusNotFound, "not_found", err.Error())
	case err != nil:
		fail(c, http.StatusInternalServerError, "internal", err.Error())
	default:
		c.JSON(http.StatusOK, t)
	}
}

// GET /events?provider=&route=&event_type=&status=&since=&until=&limit=&cursor=:
// one page of trace.ListPage. since and until take what store.ParseSince
// takes (a duration back from now or a time); a cursor is one an earlier
// page gave.
func (s *Server) listEvents(c *gin.Context) {
	f := trace.ListFilter{Provider: c.Query("provider"), Route: c.Query("route"), EventType: c.Query("event_type"), Status: c.Query("status")}
	var errs []error
	if f.Route != "" {
		errs = append(errs, control.CheckRoute(f.Route))
	}
	if f.Status != "" {
		errs = append(errs, trace.CheckStatus(f.Status))
	}
	now := time.Now()
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.Query(b.name); v != "" {
			t, err := store.ParseSince(v, now)
			if err != nil {
				err = fmt.Errorf("%s %w", b.name, err)
			}
			*b.t = t
			errs = append(errs, err)
		}
	}
	limit, err := queryInt(c, "limit", trace.DefaultListLimit, 1, trace.MaxListLimit)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	page, err := s.cfg.Events(c.Request.Context(), f, c.Query("cursor"), limit)
	switch {
	case errors.Is(err, trace.ErrBadCursor):
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
	case err != nil:
		fail(c, http.StatusInternalServerError, "internal", err.Error())
	default:
		c.JSON(http.StatusOK, page)
	}
}

// GET /parked?tier=&provider=&route=&limit=&offset=: parked.Report.
func (s *Server) parked(c *gin.Context) {
	limit, err1 := queryInt(c, "limit", 50, 0, 1000)
	offset, err2 := queryInt(c, "offset", 0, 0, 1<<31)
	var err3 error
	if r := c.Query("route"); r != "" {
		err3 = control.CheckRoute(r)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	rep, err := s.cfg.Parked(c.Request.Context(), parked.Filter{Tier: c.Query("tier"), Provider: c.Query("provider"), Route: c.Query("route")}, offset, limit)
	if err != nil {
		fail(c, http.StatusBadGateway, "kafka", err.Error())
		return
	}
	c.JSON(http.StatusOK, rep)
}

// ParkedMetrics is hookline_dlq_parked_oldest_age_seconds{tier}: now minus
// when the oldest record still waiting in a tier was parked ("lane" for
// every lane together), 0 when none waits; refreshed by Set.
type ParkedMetrics struct {
	mu    sync.Mutex
	heads map[string]time.Time
	now   func() time.Time
	desc  *prometheus.Desc
}

// NewParkedMetrics registers the gauge on reg.
func NewParkedMetrics(reg prometheus.Registerer) *ParkedMetrics {
	return newAgeGauge(prometheus.GaugeOpts{Name: "hookline_dlq_parked_oldest_age_seconds",
		Help: "Now minus the time the oldest record still waiting in a retry tier (tier \"lane\": any destination's lane) was parked; 0 when none waits."},
		[]string{"tier"}, reg)
}

// NewRawMetrics registers hookline_dlq_raw_oldest_unprocessed_age_seconds{topic}
// on reg: now minus the timestamp of the oldest record of webhooks.raw the
// processor group has not processed (the record at its committed offset,
// over every partition with lag), 0 when none waits. Set takes
// {topic: that timestamp}, the zero time when nothing waits.
func NewRawMetrics(reg prometheus.Registerer) *ParkedMetrics {
	return newAgeGauge(prometheus.GaugeOpts{Name: "hookline_dlq_raw_oldest_unprocessed_age_seconds",
		Help: "Now minus the timestamp of the oldest record of webhooks.raw the processor group has not processed (the record at its committed offset); 0 when none waits."},
		[]string{"topic"}, reg)
}

// newAgeGauge is an age gauge of one label, 0 for a zero time.
func newAgeGauge(o prometheus.GaugeOpts, label []string, reg prometheus.Registerer) *ParkedMetrics {
	m := &ParkedMetrics{heads: map[string]time.Time{}, now: time.Now, desc: prometheus.NewDesc(o.Name, o.Help, label, nil)}
	reg.MustRegister(m)
	return m
}

// Set takes the heads parked.Reader.Heads read.
func (m *ParkedMetrics) Set(heads map[string]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heads = heads
}

// Describe implements prometheus.Collector.
func (m *ParkedMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.desc }

// Collect implements prometheus.Collector.
func (m *ParkedMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for tier, t := range m.heads {
		age := 0.0
		if !t.IsZero() {
			age = max(now.Sub(t).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, age, tier)
	}
}

// Refresh reads the heads every interval until ctx ends.
func (m *ParkedMetrics) Refresh(ctx context.Context, interval time.Duration, heads func(context.Context) (map[string]time.Time, error), warn func(error)) {
	for {
		h, err := heads(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			warn(err)
		} else {
			m.Set(h)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
