package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
)

// config is everything the retrier reads from its environment. It needs no
// providers file: it creates and checks only the topics it reads and writes
// (see run).
type config struct {
	MetricsAddr string // HOOKLINE_METRICS_ADDR, default :9102
	LogLevel    string // HOOKLINE_LOG_LEVEL
	Kafka       kafkaconf.Config
	Topics      topics.Env     // HOOKLINE_TOPIC_PREFIX, HOOKLINE_PARTITIONS, ...
	Retry       retry.Schedule // HOOKLINE_RETRY_TIERS, read as the processor reads it
	// Jitter (HOOKLINE_RETRY_JITTER) is validated here so that a wrong value
	// stops the retrier as it stops the processor, but the retrier does not
	// use it: the processor applies it when it computes hookline.due-at.
	Jitter float64
}

// loadConfig reads and validates the configuration; the error names every
// wrong variable.
func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	c := config{MetricsAddr: get("HOOKLINE_METRICS_ADDR"), LogLevel: get("HOOKLINE_LOG_LEVEL")}
	if c.MetricsAddr == "" {
		c.MetricsAddr = ":9102"
	}
	var errs []error
	if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
		errs = append(errs, fmt.Errorf("HOOKLINE_METRICS_ADDR=%q: want host:port or :port", c.MetricsAddr))
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("HOOKLINE_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	var err error
	if c.Kafka, err = kafkaconf.FromEnv(lookupEnv); err != nil {
		errs = append(errs, err)
	}
	if c.Topics, err = topics.EnvFrom(lookupEnv); err != nil {
		errs = append(errs, err)
	}
	if c.Retry, c.Jitter, err = retry.FromEnv(lookupEnv); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return config{}, fmt.Errorf("configuration: %w", errors.Join(errs...))
	}
	return c, nil
}
