package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/state"
)

// config is everything the processor reads from its environment.
type config struct {
	MetricsAddr     string        // HOOKLINE_METRICS_ADDR
	ProvidersFile   string        // HOOKLINE_PROVIDERS or --providers
	StateDir        string        // HOOKLINE_STATE_DIR
	InstanceID      string        // HOOKLINE_INSTANCE_ID
	MaxInflight     int           // HOOKLINE_MAX_INFLIGHT
	MaxPending      int           // HOOKLINE_MAX_PENDING
	MaxPendingBytes int64         // HOOKLINE_MAX_PENDING_BYTES
	StateMemory     int64         // HOOKLINE_STATE_MEMORY
	MaxBatch        int           // HOOKLINE_BATCH_MAX_RECORDS
	ShutdownGrace   time.Duration // HOOKLINE_SHUTDOWN_GRACE
	StandbyReplicas int           // HOOKLINE_STANDBY_REPLICAS
	BreakerFailures int           // HOOKLINE_BREAKER_FAILURES
	BreakerCooldown time.Duration // HOOKLINE_BREAKER_COOLDOWN
	SessionTimeout  time.Duration // HOOKLINE_SESSION_TIMEOUT
	LogLevel        string        // HOOKLINE_LOG_LEVEL
	Kafka           kafkaconf.Config
	Topics          topics.Env
	Retry           retry.Schedule
	Jitter          float64
}

func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	c := config{
		MetricsAddr:   orDefault(get("HOOKLINE_METRICS_ADDR"), ":9101"),
		ProvidersFile: get("HOOKLINE_PROVIDERS"),
		StateDir:      orDefault(get("HOOKLINE_STATE_DIR"), "data/processor"),
		InstanceID:    get("HOOKLINE_INSTANCE_ID"), // empty: the one kept in the state dir
		LogLevel:      get("HOOKLINE_LOG_LEVEL"),
	}
	var errs []string
	num := func(name string, def, lo, hi int) int {
		v := get(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Sprintf("%s=%q: want a whole number from %d to %d", name, v, lo, hi))
		}
		return n
	}
	dur := func(name string, def time.Duration) time.Duration {
		v := get(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("%s=%q: want a positive duration such as 30s", name, v))
		}
		return d
	}
	c.MaxInflight = num("HOOKLINE_MAX_INFLIGHT", 64, 1, 4096)
	c.MaxPending = num("HOOKLINE_MAX_PENDING", 10000, 1, 1000000)
	c.MaxPendingBytes = int64(num("HOOKLINE_MAX_PENDING_BYTES", 256<<20, 1<<20, 1<<40))
	// Badger's memtables and caches, the cache of recent states and the
	// restore budget (state.Split).
	c.StateMemory = sizeOf(get("HOOKLINE_STATE_MEMORY"), state.DefaultMemory, state.MinMemory, 1<<40, "HOOKLINE_STATE_MEMORY", &errs)
	// A crash repeats the calls in flight and at most one transaction's
	// finished calls. 500 bounds the records one transaction carries.
	c.MaxBatch = num("HOOKLINE_BATCH_MAX_RECORDS", 500, 1, 100000)
	c.ShutdownGrace = dur("HOOKLINE_SHUTDOWN_GRACE", 5*time.Second)
	c.StandbyReplicas = num("HOOKLINE_STANDBY_REPLICAS", 0, 0, 16)
	if v := get("HOOKLINE_BATCH_TIMEOUT"); v != "" {
		errs = append(errs, fmt.Sprintf("HOOKLINE_BATCH_TIMEOUT=%q: no longer used; a destination call is bounded by its own destination.timeout in the providers file (default 10s, at most 10m) and never by a batch", v))
	}
	c.BreakerFailures = num("HOOKLINE_BREAKER_FAILURES", 5, -1, 1000000)
	c.BreakerCooldown = dur("HOOKLINE_BREAKER_COOLDOWN", 30*time.Second)
	// How long the group waits for a processor that died (kill -9, lost
	// host) before its partitions go to another member or to its restart:
	// processing of those partitions stops for this long. franz-go's 45s
	// default stalled the kill test 40s per kill; 10s heartbeating every 1s
	// keeps a stall short without expiring a busy member.
	c.SessionTimeout = dur("HOOKLINE_SESSION_TIMEOUT", 10*time.Second)
	if c.SessionTimeout > 0 && (c.SessionTimeout < 6*time.Second || c.SessionTimeout > 5*time.Minute) {
		errs = append(errs, fmt.Sprintf("HOOKLINE_SESSION_TIMEOUT=%s: want 6s to 5m (the broker's group.min/max.session.timeout.ms defaults)", c.SessionTimeout))
	}
	if c.ProvidersFile == "" {
		errs = append(errs, "HOOKLINE_PROVIDERS (or --providers): the providers file is required")
	}
	if strings.ContainsAny(c.InstanceID, " /\\") {
		errs = append(errs, fmt.Sprintf("HOOKLINE_INSTANCE_ID=%q: want a name without spaces or slashes, unique per running processor", c.InstanceID))
	}
	if len(errs) > 0 {
		return config{}, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	var err error
	if c.Kafka, err = kafkaconf.FromEnv(lookupEnv); err != nil {
		return config{}, err
	}
	if c.Topics, err = topics.EnvFrom(lookupEnv); err != nil {
		return config{}, err
	}
	if c.Retry, c.Jitter, err = retry.FromEnv(lookupEnv); err != nil {
		return config{}, err
	}
	return c, nil
}

// sizeOf reads a byte count: a whole number of bytes, or one with a KiB,
// MiB or GiB suffix (as GOMEMLIMIT takes them).
func sizeOf(v string, def, lo, hi int64, name string, errs *[]string) int64 {
	if v == "" {
		return def
	}
	num, unit := v, int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(v, suffix); ok {
			num, unit = n, u
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < lo/unit || n > hi/unit || n*unit < lo {
		*errs = append(*errs, fmt.Sprintf("%s=%q: want bytes from %d MiB to %d GiB, such as 128MiB", name, v, lo>>20, hi>>30))
		return def
	}
	return n * unit
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
