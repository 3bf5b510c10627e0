// Package control is the operators' hold on deliveries: a provider, or one
// route of it (a named destination of the providers file), paused (its
// records wait, parked in its lane topic, and nothing is refused at ingest)
// or drained at a rate (calls to its destination at most N per second).
// The settings live in the compacted topic webhooks.control, one record per
// provider keyed "provider:<name>" (provider-wide: every route of it) and
// one per route keyed "route:<provider>/<route>", so they survive restarts
// and every processor follows the same ones. Written by the dlq tool
// (`dlq provider|route pause|resume|rate`, and `dlq serve`'s API); read by
// every processor (Follow). A processor of the version before routes reads
// only "provider:" keys, so it skips route settings. The topic also holds
// the processors' breaker and held reports (breaker.go, held.go) and the
// providers' placements ingest records (placement.go); each reader skips
// the kinds it does not read.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Key prefixes of the settings: provider-wide, and one route's.
const (
	keyPrefix   = "provider:"
	routePrefix = "route:"
)

// Setting is one provider's operator setting (Route empty: every route of
// it), or one route's, the value of its record.
type Setting struct {
	// Provider is the provider name.
	Provider string `json:"provider"`
	// Route, when set, is the route the setting holds (headers.DefaultRoute for a
	// provider with a provider-level destination); empty, the setting
	// holds every route of the provider.
	Route string `json:"route,omitempty"`
	// Paused holds its deliveries: no destination call, records parked.
	Paused bool `json:"paused"`
	// Rate, when above 0 and not paused, caps its destination calls per
	// second (a drain); 0 is no cap.
	Rate float64 `json:"rate,omitempty"`
	// By says who set it (a user name, "api", ...); At when.
	By string    `json:"by,omitempty"`
	At time.Time `json:"at"`
	// Why says why, when a processor set it (By AutoPauseBy): since when
	// every call failed and the last error. Empty for an operator's.
	Why string `json:"why,omitempty"`
}

// AutoPauseBy is the By of the pause a processor writes for a route whose
// every call failed for its destination.auto_pause_after.
const AutoPauseBy = "auto-pause"

// String says what the setting does, for logs and the CLI.
func (s Setting) String() string {
	switch {
	case s.Paused:
		return "paused"
	case s.Rate > 0:
		return fmt.Sprintf("draining at %g/s", s.Rate)
	}
	return "running"
}

// Key is the setting's record key: "provider:<provider>", or
// "route:<provider>/<route>" for a route's.
func (s Setting) Key() string {
	if s.Route != "" {
		return routePrefix + s.Provider + "/" + s.Route
	}
	return keyPrefix + s.Provider
}

// Name is what the setting holds, as people write it: "stripe" (every
// route) or "stripe/billing".
func (s Setting) Name() string {
	if s.Route != "" {
		return s.Provider + "/" + s.Route
	}
	return s.Provider
}

// Validate refuses a setting no processor could follow.
func (s Setting) Validate() error {
	var errs []error
	if err := checkProvider(s.Provider); err != nil {
		errs = append(errs, err)
	}
	if s.Route != "" {
		if err := CheckRoute(s.Route); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Rate < 0 || math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate %v: want a positive number of calls per second, or 0 for none", s.Rate))
	}
	return errors.Join(errs...)
}

// Record is the control topic record of s.
func Record(topic string, s Setting) (*kgo.Record, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return jsonRecord(topic, s.Key(), s)
}

// jsonRecord is the control topic record keyed key, v its JSON value.
func jsonRecord(topic, key string, v any) (*kgo.Record, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: b}, nil
}

// Decode reads a control record, provider-wide ("provider:<name>") or a
// route's ("route:<provider>/<route>"); ok is false for a record of another
// kind (a breaker report), which readers skip. A tombstone (nil value) is
// the provider or route running.
func Decode(r *kgo.Record) (s Setting, ok bool, err error) {
	var want Setting
	if name, found := strings.CutPrefix(string(r.Key), keyPrefix); found {
		want.Provider = name
	} else if name, found := strings.CutPrefix(string(r.Key), routePrefix); found {
		var cut bool
		if want.Provider, want.Route, cut = strings.Cut(name, "/"); !cut || want.Route == "" {
			return Setting{}, true, fmt.Errorf("control record %s: want route:<provider>/<route>", r.Key)
		}
	} else {
		return Setting{}, false, nil
	}
	if r.Value == nil {
		want.At = r.Timestamp
		if err := want.Validate(); err != nil {
			return Setting{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
		}
		return want, true, nil
	}
	if err := json.Unmarshal(r.Value, &s); err != nil {
		return Setting{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if s.Provider != want.Provider || s.Route != want.Route {
		return Setting{}, true, fmt.Errorf("control record %s names provider %q, route %q", r.Key, s.Provider, s.Route)
	}
	if err := s.Validate(); err != nil {
		return Setting{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	return s, true, nil
}

// Write produces s to the control topic with cl and waits for the
// acknowledgement.
func Write(ctx context.Context, cl *kgo.Client, topic string, s Setting) error {
	r, err := Record(topic, s)
	if err != nil {
		return err
	}
	return produceSync(ctx, cl, r, fmt.Sprintf("%s setting of %s", s, s.Name()))
}

// produceSync writes r with cl and waits for the acknowledgement; what
// names the record in the error.
func produceSync(ctx context.Context, cl *kgo.Client, r *kgo.Record, what string) error {
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// Follow reads the control topic from its start with newClient's client
// and calls apply for every setting, in order, until ctx ends: first the
// whole topic (caught up once it reached the end it saw at start, then
// caughtUp is called), then each new record as it comes. A record it cannot
// read is reported to bad and skipped (the setting stays as it was).
func Follow(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string,
	apply func(Setting), caughtUp func(), bad func(error)) error {
	return FollowAll(ctx, newClient, topic, Appliers{Setting: apply}, caughtUp, bad)
}

// Appliers are what FollowAll does with each kind of record of the
// control topic; a nil one skips that kind.
type Appliers struct {
	Setting func(Setting)
	Breaker func(Breaker)
	Held    func(HeldReport)
	Trial   func(Trial)
	Limit   func(Limit)
}

// FollowAll is Follow that also reads the processors' reports, in one
// reading of the topic: every setting and every processor's report
// (breaker, held, trial, limit) goes to its applier in to (a nil one
// skips that kind).
// Cost: one consumer.
func FollowAll(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string,
	to Appliers, caughtUp func(), bad func(error)) error {
	return follow(ctx, newClient, topic, func(r *kgo.Record) {
		if s, ok, err := Decode(r); ok {
			applyOr(to.Setting, s, err, bad)
		} else if b, ok, err := DecodeBreaker(r); ok {
			applyOr(to.Breaker, b, err, bad)
		} else if h, ok, err := DecodeHeld(r); ok {
			applyOr(to.Held, h, err, bad)
		} else if t, ok, err := DecodeTrial(r); ok {
			applyOr(to.Trial, t, err, bad)
		} else if l, ok, err := DecodeLimit(r); ok {
			applyOr(to.Limit, l, err, bad)
		}
	}, caughtUp, bad)
}

// applyOr hands a decoded record to apply (when set), or its error to bad.
func applyOr[T any](apply func(T), v T, err error, bad func(error)) {
	switch {
	case err != nil:
		bad(err)
	case apply != nil:
		apply(v)
	}
}

// followWait is how long the broker holds a follower's empty fetch.
const followWait = 5 * time.Second

// follow reads the control topic from its start and hands every record to
// record, in order, until ctx ends; caughtUp (optional) is called once the
// end seen at start is reached. Fetch errors go to bad.
func follow(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), topic string,
	record func(*kgo.Record), caughtUp func(), bad func(error)) error {
	cl, err := newClient(
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A fetch returns as soon as a record arrives: the wait only sets
		// how often an idle follower asks (its partitions never change).
		kgo.FetchMaxWait(followWait),
	)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	defer cl.Close()
	if caughtUp == nil {
		caughtUp = func() {}
	}
	end, err := endOffsets(ctx, cl, topic)
	if err != nil {
		return err
	}
	seen := map[int32]int64{}
	reached := func() bool {
		for p, e := range end {
			if seen[p] < e {
				return false
			}
		}
		return true
	}
	signalled := false
	if reached() {
		caughtUp()
		signalled = true
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				bad(fmt.Errorf("control: fetch %s[%d]: %w", t, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			seen[r.Partition] = r.Offset + 1
			record(r)
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 && p.Err == nil { // at the end: compaction may have left a gap before it
				seen[p.Partition] = max(seen[p.Partition], p.LastStableOffset)
			}
		})
		if !signalled && reached() {
			caughtUp()
			signalled = true
		}
	}
	return nil
}

// endOffsetsAttempts bounds endOffsets' tries: with its waits (50 ms
// doubling to 1 s) about 3.5 s, time for a topic just created to reach
// every broker of a cluster or a moving leader to settle.
const endOffsetsAttempts = 8

// endOffsets lists the topic's end offsets. A partition whose answer is
// retriable (UNKNOWN_TOPIC_OR_PARTITION from a broker that does not host a
// topic created a moment ago, a leader moving) is asked again, up to
// endOffsetsAttempts times; any other error ends it at once.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("control: end offsets of %s: %w", topic, err)
		}
		end := map[int32]int64{}
		var errs []error
		retriable := true
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				errs = append(errs, o.Err)
				retriable = retriable && kerr.IsRetriable(o.Err)
				return
			}
			end[o.Partition] = o.Offset
		})
		if len(errs) == 0 {
			return end, nil
		}
		err = fmt.Errorf("control: end offsets of %s: %w", topic, errors.Join(errs...))
		if !retriable || attempt == endOffsetsAttempts {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
