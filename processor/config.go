package main

import (
	"errors"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/providers/typelabel"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/startup"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/state"
)

// config is everything the processor reads from its environment.
type config struct {
	startup.Common
	Tracing       tracing.Settings // OTEL_* (pkg/tracing)
	MetricsAddr   string           // HOOKLINE_METRICS_ADDR
	ProvidersFile string           // HOOKLINE_PROVIDERS or --providers
	StateDir      string           // HOOKLINE_STATE_DIR
	// InstanceID is HOOKLINE_INSTANCE_ID; empty: the one kept in the state
	// dir, which run reads (or writes) before it starts.
	InstanceID         string
	MaxInflight        int           // HOOKLINE_MAX_INFLIGHT
	MaxPending         int           // HOOKLINE_MAX_PENDING
	MaxPendingBytes    int64         // HOOKLINE_MAX_PENDING_BYTES
	StateMemory        int64         // HOOKLINE_STATE_MEMORY
	MaxBatch           int           // HOOKLINE_BATCH_MAX_RECORDS
	ShutdownGrace      time.Duration // HOOKLINE_SHUTDOWN_GRACE
	StandbyReplicas    int           // HOOKLINE_STANDBY_REPLICAS
	BreakerFailures    int           // HOOKLINE_BREAKER_FAILURES
	BreakerCooldown    time.Duration // HOOKLINE_BREAKER_COOLDOWN
	RetryAfterMax      time.Duration // HOOKLINE_RETRY_AFTER_MAX
	SessionTimeout     time.Duration // HOOKLINE_SESSION_TIMEOUT
	TransactionTimeout time.Duration // HOOKLINE_TRANSACTION_TIMEOUT
	EventTypeLabels    int           // HOOKLINE_EVENT_TYPE_LABELS (package typelabel)
	// TimerSlack is HOOKLINE_TIMER_SLACK: the least timer slack of the
	// process's threads (package timerslack); 0 leaves it as it is.
	TimerSlack time.Duration
	// BatchTimeout is HOOKLINE_BATCH_TIMEOUT, which is no longer used: read
	// only so that a start with it set says what replaced it.
	BatchTimeout string
}

// loadConfig reads the configuration; the error names every wrong variable.
func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	r := envconf.New(lookupEnv)
	c := config{
		Common:        startup.ReadCommon(r),
		MetricsAddr:   r.Addr("HOOKLINE_METRICS_ADDR", ":9101"),
		ProvidersFile: startup.ReadProvidersFile(r),
		StateDir:      r.String("HOOKLINE_STATE_DIR", "data/processor"),
		InstanceID:    r.String("HOOKLINE_INSTANCE_ID", ""),
		MaxInflight:   r.Int("HOOKLINE_MAX_INFLIGHT", 64, 1, 4096),
		MaxPending:    r.Int("HOOKLINE_MAX_PENDING", 10000, 1, 1000000),
		Tracing:       tracing.Read(r),
		// Polling stops at this many body bytes read and not committed.
		MaxPendingBytes: int64(r.Int("HOOKLINE_MAX_PENDING_BYTES", 256<<20, 1<<20, 1<<40)),
		// Badger's memtables and caches, the cache of recent states and the
		// restore budget (state.Split).
		StateMemory: r.Bytes("HOOKLINE_STATE_MEMORY", state.DefaultMemory, state.MinMemory, 1<<40),
		// A crash repeats the calls in flight and at most one transaction's
		// finished calls. 500 bounds the records one transaction carries.
		MaxBatch:        r.Int("HOOKLINE_BATCH_MAX_RECORDS", 500, 1, 100000),
		ShutdownGrace:   r.Duration("HOOKLINE_SHUTDOWN_GRACE", 5*time.Second, time.Nanosecond, 0),
		StandbyReplicas: r.Int("HOOKLINE_STANDBY_REPLICAS", 0, 0, 16),
		// The runtime's monitor thread sleeps 20 µs plus the slack between
		// looks while any goroutine runs: with Linux's 50 µs, 14 % of the
		// processor's CPU at 1,000 events/s.
		TimerSlack:      timerslack.ReadEnv(r),
		EventTypeLabels: typelabel.ReadEnv(r),
		BreakerFailures: r.Int("HOOKLINE_BREAKER_FAILURES", 5, -1, 1000000),
		BreakerCooldown: r.Duration("HOOKLINE_BREAKER_COOLDOWN", 30*time.Second, time.Nanosecond, 0),
		// The longest wait a destination's Retry-After may ask for; a retry
		// tier holds at most a day (retry.MaxTier).
		RetryAfterMax: r.Duration("HOOKLINE_RETRY_AFTER_MAX", deliver.DefaultMaxRetryAfter, time.Second, retry.MaxTier),
		// How long the group waits for a processor that died (kill -9, lost
		// host) before its partitions go to another member or to its
		// restart: processing of those partitions stops for this long.
		// franz-go's 45s default stalled the kill test 40s per kill; 10s
		// heartbeating every 1s keeps a stall short without expiring a busy
		// member.
		SessionTimeout: envconf.Parse(r, "HOOKLINE_SESSION_TIMEOUT", 10*time.Second,
			"a duration from 6s to 5m (the broker's default group.min/max.session.timeout.ms)", func(v string) (time.Duration, error) {
				d, err := time.ParseDuration(v)
				if err != nil || d < 6*time.Second || d > 5*time.Minute {
					return 0, new(envconf.Error)
				}
				return d, nil
			}),
		// After a kill, the partitions the dead processor wrote wait this
		// long (the broker then aborts its open transaction) before anyone
		// reads past it. A transaction is open for one commit cadence, so
		// a minute leaves a slow broker room; a shorter one speeds up a
		// takeover after a kill. 5s to 15m: the broker's default
		// transaction.max.timeout.ms.
		TransactionTimeout: r.Duration("HOOKLINE_TRANSACTION_TIMEOUT", time.Minute, 5*time.Second, 15*time.Minute),
		BatchTimeout:       r.String("HOOKLINE_BATCH_TIMEOUT", ""),
	}
	r.Add(c.validate())
	return c, r.Err()
}

// validate checks what no getter does: an instance id must be usable in a
// transactional id, and the removed batch timeout must not be set.
func (c config) validate() error {
	var errs []error
	if strings.ContainsAny(c.InstanceID, " /\\") {
		errs = append(errs, &envconf.Error{Name: "HOOKLINE_INSTANCE_ID", Value: c.InstanceID, Want: "a name without spaces or slashes, unique per running processor"})
	}
	if c.BatchTimeout != "" {
		errs = append(errs, &envconf.Error{Name: "HOOKLINE_BATCH_TIMEOUT", Value: c.BatchTimeout,
			Why:  "no longer used; a destination call is bounded by its own destination.timeout in the providers file (default 10s, at most 10m) and never by a batch",
			Want: "it unset"})
	}
	return errors.Join(errs...)
}
