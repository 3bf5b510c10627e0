package consume

import (
	"cmp"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/typelabel"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/pkg/tracing"
	"github.com/hookline/hookline/processor/internal/decide"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/restore"
	"github.com/hookline/hookline/processor/internal/state"
)

// Config is what the processor needs; every field is required unless noted.
type Config struct {
	Names     topics.Names
	Schedule  retry.Schedule
	Jitter    float64
	Providers *providers.Registry
	Router    *deliver.Router
	Store     *state.Store
	// RetryPolicies are the routes' own retry policies (retry.tiers
	// in the providers file: Schedule restricted with Only), by
	// route.Key(provider, route); a route not in it uses
	// Schedule. Optional.
	RetryPolicies map[string]retry.Schedule
	// StandbyReplicas is how many standbys the group's balancer names per
	// partition (HOOKLINE_STANDBY_REPLICAS): members that keep its state
	// warm, so a new owner restores seconds of changelog, not all of it.
	// 0: none, and franz-go's cooperative-sticky balancer.
	StandbyReplicas int
	// StandbyEvery is how often a standby partition is caught up with its
	// changelog: at most this much of it is read again when the partition
	// becomes this processor's. Optional: DefaultStandbyEvery.
	StandbyEvery time.Duration
	// MaxInflight is a destination's in-flight bound when its providers
	// entry sets no destination.max_inflight (HOOKLINE_MAX_INFLIGHT).
	MaxInflight int
	// MaxPending bounds, process-wide, the records read and not yet
	// committed or dropped (HOOKLINE_MAX_PENDING): reading stops while it is
	// reached (twice it with several priority classes, which then compete
	// for admission: package admission), and while the partitions' windows span
	// admission.SpanPerRecord times as many offsets.
	MaxPending int
	// MaxPendingBytes bounds the body bytes of records read and not yet
	// committed (HOOKLINE_MAX_PENDING_BYTES).
	MaxPendingBytes int64
	// MaxBatch bounds the finished destination calls not yet committed,
	// process-wide: a crash repeats at most these and the calls in flight
	// (HOOKLINE_BATCH_MAX_RECORDS).
	MaxBatch int
	// ShutdownGrace is how long a stop lets calls in flight finish before
	// it cancels them (cancelled ones are read again by the next owner).
	ShutdownGrace time.Duration
	// EventTypeLabels is how many event types per provider that the
	// providers file does not name get an event_type label of their own
	// (HOOKLINE_EVENT_TYPE_LABELS; package typelabel). Optional: 0, the
	// file's names only.
	EventTypeLabels int
	// MaxRecordBytes is the largest record the topics take (their
	// max.message.bytes: topics.Env.MaxRecordBytes). Every record is made
	// to fit it before it is produced (headers.Fit). Optional: the
	// default body limit plus topics.HeaderRoom.
	MaxRecordBytes int
	// ChainKey names the chain a record runs in: records with one chain key
	// run one at a time, in offset order. Optional: EntityChain.
	ChainKey func(*kgo.Record) string
	// HoldsEvery is how often the entities held in the partitions owned
	// are counted, for the gauges and the control topic's held reports
	// (held.go); only when some provider is ordered. Optional:
	// DefaultHoldsEvery.
	HoldsEvery time.Duration
	// TransactionTimeout is how long the broker lets a transaction of
	// this processor stay open before it aborts it
	// (HOOKLINE_TRANSACTION_TIMEOUT): after a kill, the partitions it wrote
	// are read by nobody (read_committed) until then. Optional: 1 minute.
	TransactionTimeout time.Duration
	// SessionOpts build the transactional session: connection options plus
	// anything a test adds. The loop adds group, topic, transactional id and
	// callbacks.
	SessionOpts []kgo.Opt
	// NewClient builds plain clients (restore readers) with the same
	// connection options.
	NewClient func(opts ...kgo.Opt) (*kgo.Client, error)
	// TransactionalID must be unique per running instance and stable
	// across its restarts, so a restarted instance fences its zombie.
	TransactionalID string
	// InstanceID names the instance in errors (HOOKLINE_INSTANCE_ID).
	InstanceID string
	Logger     *slog.Logger
	// Tracer traces each record's decision and calls (trace.go); nil: off.
	Tracer   *tracing.Tracer
	Registry prometheus.Registerer
	Health   *obs.Health
	Now      func() time.Time
}

// setup is the processor as New built it: its configuration, metrics and
// routes. Nothing changes it after New; every session, and the ownership
// and reader of each, reads it and holds nothing else of the Processor.
type setup struct {
	cfg    Config
	routes routing
	// The series of each component (metrics.go).
	mOutcomes *outcomeMetrics
	mTxn      *txnMetrics
	mParts    *partitionMetrics
	mHolds    *holdMetrics
	mHanging  *hangingMetrics
	mLanes    *laneMetrics
	mLag      *lagMetrics
	mBudget   *budgetMetrics
	// types bounds the event_type label of mOutcomes and mLanes.
	types *typelabel.Labeller
	// laneNames are the lanes' topics, sorted.
	laneNames []string
	// staleLimits are the limit reports to delete (limits.go).
	staleLimits staleLimits
}

// eventTypeLabel is the event_type label of a record of provider
// (typelabel.Labeller.Label of its hookline.event-type).
func (p *setup) eventTypeLabel(provider string, r *kgo.Record) string {
	return p.types.Label(provider, headers.Value(r, headers.EventType))
}

// providerLabel bounds metric label values to configured providers.
func (p *setup) providerLabel(name string) string {
	if _, ok := p.cfg.Providers.Get(name); ok {
		return name
	}
	return "unknown"
}

// restoreConfig is the restore configuration for this processor.
func (p *setup) restoreConfig() restore.Config {
	return restore.Config{
		Topic:     p.cfg.Names.Changelog,
		NewClient: p.cfg.NewClient,
		Decode:    decide.StoredFromChangelog,
		Now:       p.cfg.Now,
		Logger:    p.cfg.Logger,
	}
}

// EntityChain is the default chain key: the provider and the entity of an
// ordered provider's record (hookline.entity), so that one entity's
// records are decided and called one at a time in the order ingest
// accepted them; else the record key (the idempotency key). A key keeps
// its entity through retries, lanes and replays (the header travels with
// the record), so its records stay in one chain. The "\x00" cannot occur
// in a key (ingest refuses control characters) nor in a provider's name.
func EntityChain(r *kgo.Record) string {
	if e, ok := headers.Get(r, headers.Entity); ok && e != "" {
		return headers.Value(r, headers.Provider) + "\x00" + e
	}
	return string(r.Key)
}

// laneTopics lists the lane topics of the routes with an HTTP destination
// and the route default's of the providers with routes but none named
// default (routing.moved), sorted.
func (p *setup) laneTopics() []string { return p.laneNames }

// orderedRoutes lists the routes of the ordered providers, sorted.
func (p *setup) orderedRoutes() [][2]string {
	var out [][2]string
	for _, t := range p.routes.byKey {
		if pr, ok := p.cfg.Providers.Get(t.provider); ok && pr.Ordered() {
			out = append(out, [2]string{t.provider, t.route})
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	return out
}
