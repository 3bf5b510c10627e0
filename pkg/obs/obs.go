// Package obs holds what every hookline service needs to be observed: a JSON
// slog logger, a Prometheus registry (never the global one), and the
// /healthz, /readyz and /metrics handlers.
package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/tracing"
)

// NewLogger returns a JSON logger at level (ReadLogLevel reads it). The
// service name is on every line.
func NewLogger(w io.Writer, level slog.Level, service string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("service", service)
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Health tracks named readiness checks. The service is ready when every
// check has reported success and it is not draining. Safe for concurrent use.
type Health struct {
	mu       sync.Mutex
	checks   map[string]error
	draining bool
}

// errPending marks a check that has not reported yet.
var errPending = fmt.Errorf("not checked yet")

// NewHealth returns a Health whose named checks start as pending (not ready).
func NewHealth(checks ...string) *Health {
	h := &Health{checks: make(map[string]error, len(checks))}
	for _, c := range checks {
		h.checks[c] = errPending
	}
	return h
}

// Set records the result of a check; nil means healthy.
func (h *Health) Set(check string, err error) {
	h.mu.Lock()
	h.checks[check] = err
	h.mu.Unlock()
}

// Drain marks the service as shutting down: /readyz answers 503 from now on,
// so load balancers stop sending before the listener closes.
func (h *Health) Drain() {
	h.mu.Lock()
	h.draining = true
	h.mu.Unlock()
}

// Ready reports whether the service is ready, and why not.
func (h *Health) Ready() (bool, map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	failing := map[string]string{}
	if h.draining {
		failing["shutdown"] = "draining"
	}
	for name, err := range h.checks {
		if err != nil {
			failing[name] = err.Error()
		}
	}
	return len(failing) == 0, failing
}

// Healthz answers 200 while the process is alive.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// Readyz answers 200 when h is ready and 503 with the failing checks otherwise.
func (h *Health) Readyz(w http.ResponseWriter, _ *http.Request) {
	ok, failing := h.Ready()
	if ok {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
		return
	}
	names := make([]string, 0, len(failing))
	for n := range failing {
		names = append(names, n)
	}
	sort.Strings(names)
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{
		"status":  "not ready",
		"failing": failing,
		"message": "not ready: " + strings.Join(names, ", "),
	})
}

// Metrics serves the registry in the Prometheus text format, or in
// OpenMetrics when the scraper asks for it (Prometheus does): the format
// that carries the latency histograms' exemplars (Observe).
func Metrics(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true})
}

// Observe observes v on h, with the trace id of ctx's span as the
// exemplar (label trace_id) when that span is sampled, so that a
// latency bucket links to a trace. Cost off: one context lookup.
func Observe(ctx context.Context, h prometheus.Observer, v float64) {
	if id := tracing.TraceID(ctx); id != "" {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": id})
			return
		}
	}
	h.Observe(v)
}

// Mux serves /healthz, /readyz and /metrics: the side port of the processor
// and the retrier (HOOKLINE_METRICS_ADDR).
func Mux(h *Health, reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", Healthz)
	mux.HandleFunc("GET /readyz", h.Readyz)
	mux.Handle("GET /metrics", Metrics(reg))
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeSide serves Mux(h, reg) on addr (HOOKLINE_METRICS_ADDR) in the
// background and returns the address it listens on and a function that stops
// it (waiting up to 5 s for scrapes in flight).
func ServeSide(addr string, h *Health, reg *prometheus.Registry) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("HOOKLINE_METRICS_ADDR=%s: %w", addr, err)
	}
	hs := &http.Server{Handler: Mux(h, reg), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}

// WatchLag calls set with the lag of every partition the consumer group
// has committed, every interval, until ctx is done (kadm.Lag: one describe,
// one offset fetch and one list-offsets request per call). Errors are logged
// at debug: lag is a metric, not a reason to stop.
func WatchLag(ctx context.Context, cl *kgo.Client, group string, interval time.Duration, log *slog.Logger, set func(topic string, partition int32, lag int64)) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lags, err := adm.Lag(cctx, group)
		cancel()
		if err != nil {
			log.Debug("consumer group lag", "group", group, "err", err)
			continue
		}
		lags.Each(func(l kadm.DescribedGroupLag) {
			for topic, ps := range l.Lag {
				for p, gl := range ps {
					set(topic, p, gl.Lag)
				}
			}
		})
	}
}

// KafkaLogger hands franz-go's own log lines to log, tagged "kafka_client":
// its errors and warnings always (a broker unreachable, a group session
// lost), its info lines (several per transaction, per rebalance step) only
// when log is at debug level, and its debug lines (one per request) never.
func KafkaLogger(log *slog.Logger) kgo.Logger {
	return kafkaLogger{log.With("source", "kafka_client")}
}

type kafkaLogger struct{ log *slog.Logger }

func (k kafkaLogger) Level() kgo.LogLevel {
	if k.log.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (k kafkaLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug // franz-go's info
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelDebug:
		return
	}
	k.log.Log(context.Background(), l, msg, keyvals...)
}

// ReadLogLevel reads HOOKLINE_LOG_LEVEL with r: debug, info (the default),
// warn or error, for NewLogger.
func ReadLogLevel(r *envconf.Reader) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(r.OneOf("HOOKLINE_LOG_LEVEL", "info", "debug", "info", "warn", "error"))) // each choice parses
	return l
}
