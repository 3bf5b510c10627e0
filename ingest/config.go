package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/ingest/internal/api"
	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
)

// config is everything ingest reads from its environment.
type config struct {
	Addr            string        // HOOKLINE_INGEST_ADDR
	ProvidersFile   string        // HOOKLINE_PROVIDERS or --providers
	ProduceDeadline time.Duration // HOOKLINE_PRODUCE_DEADLINE
	ShutdownTimeout time.Duration // HOOKLINE_SHUTDOWN_TIMEOUT
	LogLevel        string        // HOOKLINE_LOG_LEVEL
	Kafka           kafkaconf.Config
	Topics          topics.Env
	Retry           retry.Schedule
	// IPLimit is HOOKLINE_IP_RATE_LIMIT with HOOKLINE_TRUSTED_PROXIES; nil: off.
	IPLimit *api.IPLimit
}

func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	c := config{
		Addr:            orDefault(get("HOOKLINE_INGEST_ADDR"), ":8080"),
		ProvidersFile:   get("HOOKLINE_PROVIDERS"),
		ProduceDeadline: 5 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		LogLevel:        get("HOOKLINE_LOG_LEVEL"),
	}
	var err error
	if c.ProduceDeadline, err = duration("HOOKLINE_PRODUCE_DEADLINE", get("HOOKLINE_PRODUCE_DEADLINE"), c.ProduceDeadline); err != nil {
		return config{}, err
	}
	if c.ShutdownTimeout, err = duration("HOOKLINE_SHUTDOWN_TIMEOUT", get("HOOKLINE_SHUTDOWN_TIMEOUT"), c.ShutdownTimeout); err != nil {
		return config{}, err
	}
	if c.Kafka, err = kafkaconf.FromEnv(lookupEnv); err != nil {
		return config{}, err
	}
	if c.Topics, err = topics.EnvFrom(lookupEnv); err != nil {
		return config{}, err
	}
	if c.Retry, _, err = retry.FromEnv(lookupEnv); err != nil {
		return config{}, err
	}
	if c.IPLimit, err = api.ParseIPRateLimit(get("HOOKLINE_IP_RATE_LIMIT")); err != nil {
		return config{}, err
	}
	trusted, err := api.ParseTrustedProxies(get("HOOKLINE_TRUSTED_PROXIES"))
	switch {
	case err != nil:
		return config{}, err
	case len(trusted) > 0 && c.IPLimit == nil:
		return config{}, fmt.Errorf("HOOKLINE_TRUSTED_PROXIES is set but HOOKLINE_IP_RATE_LIMIT is off: the proxies are only used to find the client address the limit is keyed by")
	case c.IPLimit != nil:
		c.IPLimit.Trusted = trusted
	}
	return c, c.validate()
}

func (c config) validate() error {
	if c.ProvidersFile == "" {
		return fmt.Errorf("HOOKLINE_PROVIDERS (or --providers): the providers file is required")
	}
	if c.ProduceDeadline < 100*time.Millisecond || c.ProduceDeadline > 5*time.Minute {
		return fmt.Errorf("HOOKLINE_PRODUCE_DEADLINE=%s: want between 100ms and 5m", c.ProduceDeadline)
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func duration(name, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 5s", name, v)
	}
	return d, nil
}
