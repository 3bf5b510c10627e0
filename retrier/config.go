package main

import (
	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/startup"
	"github.com/hookline/hookline/pkg/tracing"
)

// config is everything the retrier reads from its environment. It needs no
// providers file: it creates and checks only the topics it reads and writes
// (see run). Of Common it uses the Kafka and topic settings and the tiers
// (read as the processor reads them); HOOKLINE_RETRY_JITTER is checked so
// that a wrong value stops the retrier as it stops the processor, but the
// processor applies it when it computes hookline.due-at.
type config struct {
	startup.Common
	Tracing     tracing.Settings // OTEL_* (pkg/tracing)
	MetricsAddr string           // HOOKLINE_METRICS_ADDR, default :9102
}

// loadConfig reads the configuration; the error names every wrong
// variable. No two of the retrier's variables constrain each other beyond
// what Common checks, so it has no validate of its own.
func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	r := envconf.New(lookupEnv)
	c := config{
		Common:      startup.ReadCommon(r),
		MetricsAddr: r.Addr("HOOKLINE_METRICS_ADDR", ":9102"),
		Tracing:     tracing.Read(r),
	}
	return c, r.Err()
}
