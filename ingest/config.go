package main

import (
	"net/netip"
	"strings"
	"time"

	"github.com/hookline/hookline/ingest/internal/api"
	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/providers/typelabel"
	"github.com/hookline/hookline/pkg/startup"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/tracing"
)

// config is everything ingest reads from its environment.
type config struct {
	startup.Common
	Tracing         tracing.Settings // OTEL_* (pkg/tracing)
	Addr            string           // HOOKLINE_INGEST_ADDR
	ProvidersFile   string           // HOOKLINE_PROVIDERS or --providers
	ProduceDeadline time.Duration    // HOOKLINE_PRODUCE_DEADLINE
	ShutdownTimeout time.Duration    // HOOKLINE_SHUTDOWN_TIMEOUT
	// Server holds the HTTP server's timeouts (HOOKLINE_INGEST_*_TIMEOUT).
	Server serverTimeouts
	// IPLimit is HOOKLINE_IP_RATE_LIMIT with HOOKLINE_TRUSTED_PROXIES; nil: off.
	IPLimit *api.IPLimit
	Trusted []netip.Prefix // HOOKLINE_TRUSTED_PROXIES
	// ReplayCacheEntries is HOOKLINE_REPLAY_CACHE_ENTRIES: how many accepted
	// signatures are remembered to recognise replays; 0 turns it off.
	ReplayCacheEntries int
	// EventTypeLabels is HOOKLINE_EVENT_TYPE_LABELS (package typelabel).
	EventTypeLabels int
	// GCFloor is HOOKLINE_INGEST_GC_FLOOR: the heap the collector lets grow
	// before collecting while the live heap is under half of it (package
	// gcpace); 0 turns it off, and so does GOGC in the environment.
	GCFloor int64
	// TimerSlack is HOOKLINE_TIMER_SLACK (package timerslack).
	TimerSlack time.Duration
}

// serverTimeouts are http.Server's timeouts: each bounds how long a slow
// or idle client may hold a connection (and its goroutine).
type serverTimeouts struct {
	ReadHeader time.Duration // HOOKLINE_INGEST_READ_HEADER_TIMEOUT
	Read       time.Duration // HOOKLINE_INGEST_READ_TIMEOUT
	Write      time.Duration // HOOKLINE_INGEST_WRITE_TIMEOUT; default 30s + HOOKLINE_PRODUCE_DEADLINE
	Idle       time.Duration // HOOKLINE_INGEST_IDLE_TIMEOUT
}

// maxReplayCacheEntries bounds HOOKLINE_REPLAY_CACHE_ENTRIES: about 1 GB.
const maxReplayCacheEntries = 10_000_000

// loadConfig reads the configuration; the error names every wrong variable.
func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	r := envconf.New(lookupEnv)
	c := config{
		Common:             startup.ReadCommon(r),
		Addr:               r.Addr("HOOKLINE_INGEST_ADDR", ":8080"),
		ProvidersFile:      startup.ReadProvidersFile(r),
		ProduceDeadline:    r.Duration("HOOKLINE_PRODUCE_DEADLINE", 5*time.Second, 100*time.Millisecond, 5*time.Minute),
		ShutdownTimeout:    r.Duration("HOOKLINE_SHUTDOWN_TIMEOUT", 30*time.Second, time.Nanosecond, 0),
		IPLimit:            envconf.Parse(r, "HOOKLINE_IP_RATE_LIMIT", nil, "", api.ParseIPRateLimit),
		Trusted:            envconf.Parse(r, "HOOKLINE_TRUSTED_PROXIES", nil, "", api.ParseTrustedProxies),
		ReplayCacheEntries: r.Int("HOOKLINE_REPLAY_CACHE_ENTRIES", api.DefaultReplayCacheEntries, 0, maxReplayCacheEntries),
		EventTypeLabels:    typelabel.ReadEnv(r),
		GCFloor:            r.Bytes("HOOKLINE_INGEST_GC_FLOOR", 64<<20, 0, 16<<30),
		Tracing:            tracing.Read(r),
		// While any goroutine runs, the runtime's monitor thread wakes
		// every 20 µs plus the slack: with Linux's 50 µs, ingest spent a
		// fifth more CPU an event at 100/s, an eighth more at 1,000/s
		// (docs/performance.md).
		TimerSlack: timerslack.ReadEnv(r),
	}
	c.Server = serverTimeouts{
		ReadHeader: r.Duration("HOOKLINE_INGEST_READ_HEADER_TIMEOUT", 5*time.Second, time.Nanosecond, 0),
		Read:       r.Duration("HOOKLINE_INGEST_READ_TIMEOUT", 30*time.Second, time.Nanosecond, 0),
		Write:      r.Duration("HOOKLINE_INGEST_WRITE_TIMEOUT", 30*time.Second+c.ProduceDeadline, time.Nanosecond, 0),
		Idle:       r.Duration("HOOKLINE_INGEST_IDLE_TIMEOUT", 120*time.Second, time.Nanosecond, 0),
	}
	r.Add(c.validate(), c.validateTimeouts())
	if c.IPLimit != nil {
		c.IPLimit.Trusted = c.Trusted
	}
	return c, r.Err()
}

// validate checks what no single variable shows: trusted proxies serve
// only the per-address limit.
func (c config) validate() error {
	if len(c.Trusted) > 0 && c.IPLimit == nil {
		return &envconf.Error{Name: "HOOKLINE_TRUSTED_PROXIES", Value: prefixes(c.Trusted),
			Why:  "HOOKLINE_IP_RATE_LIMIT is off, and the proxies only serve to find the client address the limit is keyed by",
			Want: "HOOKLINE_IP_RATE_LIMIT set too, or this unset"}
	}
	return nil
}

// validateTimeouts checks that a request waiting the whole produce
// deadline can still be answered before the write timeout cuts it off.
func (c config) validateTimeouts() error {
	if c.Server.Write > c.ProduceDeadline {
		return nil
	}
	return &envconf.Error{Name: "HOOKLINE_INGEST_WRITE_TIMEOUT", Value: c.Server.Write.String(),
		Why:  "a request waits up to HOOKLINE_PRODUCE_DEADLINE (" + c.ProduceDeadline.String() + ") for Kafka's ack, and its answer would be cut off",
		Want: "more than HOOKLINE_PRODUCE_DEADLINE"}
}

// prefixes prints HOOKLINE_TRUSTED_PROXIES back: a single address without
// its prefix length.
func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		if s[i] = p.String(); p.IsSingleIP() {
			s[i] = p.Addr().String()
		}
	}
	return strings.Join(s, ",")
}
