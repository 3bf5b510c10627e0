package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/topics"
)

// DefaultAdminAddr is where `dlq serve` listens unless HOOKLINE_ADMIN_ADDR
// or --addr says otherwise: loopback only.
const DefaultAdminAddr = "127.0.0.1:8081"

// DefaultMetricsInterval is how often `dlq serve` tallies the DLQ for
// /metrics unless HOOKLINE_DLQ_METRICS_INTERVAL says otherwise.
const DefaultMetricsInterval = 30 * time.Second

// config is everything dlq reads from its environment.
type config struct {
	Kafka      kafkaconf.Config
	Topics     topics.Env
	AdminAddr  string // HOOKLINE_ADMIN_ADDR
	AdminToken string // HOOKLINE_ADMIN_TOKEN
	User       string // USER: the default of --by
	LogLevel   string // HOOKLINE_LOG_LEVEL (serve)
	// ProvidersFile is HOOKLINE_PROVIDERS (provider, serve): the provider
	// names a setting may name; "" accepts any name.
	ProvidersFile string
	// MetricsInterval is HOOKLINE_DLQ_METRICS_INTERVAL (serve; read by
	// metricsInterval, so other commands ignore it).
	MetricsInterval string
	// TraceDir is HOOKLINE_TRACE_DIR (trace, serve): the trace index.
	TraceDir string
}

func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	c := config{
		AdminAddr: get("HOOKLINE_ADMIN_ADDR"),
		User:      get("USER"),
		LogLevel:  get("HOOKLINE_LOG_LEVEL"),

		ProvidersFile: get("HOOKLINE_PROVIDERS"),
	}
	c.AdminToken, _ = lookupEnv("HOOKLINE_ADMIN_TOKEN") // a token is taken as is
	if c.AdminAddr == "" {
		c.AdminAddr = DefaultAdminAddr
	}
	c.MetricsInterval = get("HOOKLINE_DLQ_METRICS_INTERVAL")
	c.TraceDir = get("HOOKLINE_TRACE_DIR")
	var err error
	if c.Kafka, err = kafkaconf.FromEnv(lookupEnv); err != nil {
		return config{}, err
	}
	if c.Topics, err = topics.EnvFrom(lookupEnv); err != nil {
		return config{}, err
	}
	return c, nil
}

// metricsInterval is how often serve tallies the DLQ for /metrics.
func (c config) metricsInterval() (time.Duration, error) {
	if c.MetricsInterval == "" {
		return DefaultMetricsInterval, nil
	}
	d, err := time.ParseDuration(c.MetricsInterval)
	if err != nil || d < 100*time.Millisecond {
		return 0, fmt.Errorf("HOOKLINE_DLQ_METRICS_INTERVAL=%q: want a duration of 100ms or more, such as 30s", c.MetricsInterval)
	}
	return d, nil
}
