package api

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the ingest service's own series; the Kafka client's come from
// kprom. Provider labels only ever hold configured provider names (or
// "unknown"), and event_type labels are bounded by the providers file and
// HOOKLINE_EVENT_TYPE_LABELS (package typelabel: a type the file names,
// one of the first N others per provider, the file's glob it matches, or
// "other").
type metrics struct {
	requests     *prometheus.CounterVec
	ackSeconds   *prometheus.HistogramVec
	produceFails *prometheus.CounterVec
	sigFails     *prometheus.CounterVec
	bodyBytes    *prometheus.HistogramVec
	records      *prometheus.CounterVec
	ipLimited    prometheus.Counter
	replays      *prometheus.CounterVec
	suppressed   *prometheus.CounterVec
	inFlight     prometheus.Gauge
	invalid      *prometheus.CounterVec
}

// Values of hookline_ingest_invalid_payloads_total's action label. The
// series had a second action, dlq, while ingest checked bodies for
// on_invalid: dlq; the processor checks those now, and they are its dead
// records with reason invalid_payload.
const (
	invalidRejected = "rejected" // on_invalid: reject: answered 422
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_ingest_requests_total",
			Help: "Webhook requests answered, by provider and HTTP status code.",
		}, []string{"provider", "code"}),
		ackSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_ingest_ack_seconds",
			Help:    "Time from handing records to the producer until Kafka acknowledged them all (acks=all).",
			Buckets: []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1, 2, 5},
		}, []string{"provider"}),
		produceFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_ingest_produce_failures_total",
			Help: "Deliveries answered 503 because Kafka did not acknowledge them in time.",
		}, []string{"provider"}),
		sigFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_ingest_signature_failures_total",
			Help: "Requests refused with 401, by provider and reason (missing, malformed, mismatch, stale).",
		}, []string{"provider", "reason"}),
		bodyBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_ingest_body_bytes",
			Help:    "Size of accepted request bodies.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 8), // 256 B .. 4 MiB
		}, []string{"provider"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_ingest_records_total",
			Help: "Records acknowledged by Kafka: events accepted (a batch request gives several), by provider and event type (a type the providers file names, or one of the first HOOKLINE_EVENT_TYPE_LABELS other types of the provider; else the file's first glob it matches, else other).",
		}, []string{"provider", "event_type"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_ingest_requests_in_flight",
			Help: "Webhook requests (POST /webhooks/{provider}) being served now: read, verified, or waiting for Kafka's ack.",
		}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_ingest_invalid_payloads_total",
			Help: "Events whose body failed their provider's schema (providers file schema:), by provider and action: rejected (on_invalid: reject, answered 422). Ingest checks no body of an on_invalid: dlq provider: the processor does, and dead-letters an invalid one as invalid_payload.",
		}, []string{"provider", "action"}),
	}
	reg.MustRegister(m.requests, m.ackSeconds, m.produceFails, m.sigFails, m.bodyBytes, m.records, m.inFlight, m.invalid)
	return m
}

// registerIPLimit adds the per-IP limit's series (only when it is on).
func (m *metrics) registerIPLimit(reg prometheus.Registerer, l *ipLimiter) {
	m.ipLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookline_ingest_ip_rate_limited_total",
		Help: "Webhook requests answered 429 by the per-client-address limit (HOOKLINE_IP_RATE_LIMIT).",
	})
	reg.MustRegister(m.ipLimited, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_ingest_ip_addresses",
		Help: "Client addresses the per-IP limit keeps a bucket for (at most its table bound).",
	}, func() float64 { return float64(l.len()) }))
}

// registerReplays adds replay recognition's series (only when it is on).
func (m *metrics) registerReplays(reg prometheus.Registerer, c *replayCache) {
	m.replays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookline_ingest_replays_total",
		Help: "Deliveries answered 202 without producing because their signed content was accepted before within the provider's replay_window: duplicate (under the same key: the provider sending it again) or replay (under another key: suppressed, also counted by hookline_ingest_replays_suppressed_total).",
	}, []string{"provider"})
	m.suppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookline_ingest_replays_suppressed_total",
		Help: "Deliveries answered 202 replay and suppressed: their signed content was accepted before under another key within the provider's replay_window (a replay of a captured delivery, or a second real event with identical bytes); each has an outcome suppressed (dlq trace KEY), the first 16 per accepted delivery.",
	}, []string{"provider"})
	reg.MustRegister(m.replays, m.suppressed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookline_ingest_replay_cache_entries",
			Help: "Signatures of accepted deliveries remembered to recognise replays (at most HOOKLINE_REPLAY_CACHE_ENTRIES; expired ones until dropped).",
		}, func() float64 { return float64(c.len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hookline_ingest_replay_cache_evictions_total",
			Help: "Remembered signatures forgotten before their replay_window ran out, to make room for newer ones (HOOKLINE_REPLAY_CACHE_ENTRIES reached).",
		}, func() float64 { return float64(c.evictions()) }))
}

// acceptedSeries are one provider's series of an accepted delivery, looked
// up once on its first one instead of by label values on every request
// (WithLabelValues hashes the values and takes a read lock each time).
// They are created on the first accepted delivery, so /metrics lists a
// provider's series only once it had one, as before.
type acceptedSeries struct {
	once     sync.Once
	accepted prometheus.Counter  // requests_total{code="202"}
	ack      prometheus.Observer // ack_seconds
	body     prometheus.Observer // body_bytes
	records  sync.Map            // event_type label -> prometheus.Counter (records_total)
}

// accepted returns provider's series, creating them on first use.
func (m *metrics) accepted(provider string, a *acceptedSeries) *acceptedSeries {
	a.once.Do(func() {
		a.accepted = m.requests.WithLabelValues(provider, "202")
		a.ack = m.ackSeconds.WithLabelValues(provider)
		a.body = m.bodyBytes.WithLabelValues(provider)
	})
	return a
}

// record counts one accepted record of the event_type label typ (bounded
// by package typelabel, so the cache is too).
func (m *metrics) record(provider, typ string, a *acceptedSeries) {
	if c, ok := a.records.Load(typ); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c, _ := a.records.LoadOrStore(typ, m.records.WithLabelValues(provider, typ))
	c.(prometheus.Counter).Inc()
}
