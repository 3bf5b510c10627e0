package main

import (
	"net/netip"
	"strings"
	"time"

	"github.com/hookline/hookline/ingest/internal/api"
	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/startup"
)

// config is everything ingest reads from its environment.
type config struct {
	startup.Common
	Addr            string        // HOOKLINE_INGEST_ADDR
	ProvidersFile   string        // HOOKLINE_PROVIDERS or --providers
	ProduceDeadline time.Duration // HOOKLINE_PRODUCE_DEADLINE
	ShutdownTimeout time.Duration // HOOKLINE_SHUTDOWN_TIMEOUT
	// IPLimit is HOOKLINE_IP_RATE_LIMIT with HOOKLINE_TRUSTED_PROXIES; nil: off.
	IPLimit *api.IPLimit
	Trusted []netip.Prefix // HOOKLINE_TRUSTED_PROXIES
	// ReplayCacheEntries is HOOKLINE_REPLAY_CACHE_ENTRIES: how many accepted
	// signatures are remembered to recognise replays; 0 turns it off.
	ReplayCacheEntries int
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
	}
	r.Add(c.validate())
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
