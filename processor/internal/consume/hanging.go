package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/hanging"
)

// How often the processor looks for its hanging transactions, and how long
// an assignment waits for a check that keeps failing.
const (
	hangingInterval = 10 * time.Second
	hangingGateWait = 30 * time.Second
)

// hangingConfig is the check's configuration for this processor.
func (p *setup) hangingConfig() hanging.Config {
	return hanging.Config{
		TransactionalID: p.cfg.TransactionalID,
		Topics:          p.outputTopics(),
		NewClient:       p.cfg.NewClient,
	}
}

// outputTopics are the topics this processor's transactions write:
// changelog, outcomes, DLQ, retry tiers, lanes and routes' topic
// destinations.
func (p *setup) outputTopics() []string {
	out := append([]string{p.cfg.Names.Changelog, p.cfg.Names.Outcomes, p.cfg.Names.DLQ}, p.cfg.Names.Retry...)
	out = append(out, p.laneTopics()...)
	seen := map[string]bool{}
	for _, t := range p.routes.byKey {
		if t.topic != "" && !seen[t.topic] {
			seen[t.topic] = true
			out = append(out, t.topic)
		}
	}
	return out
}

// hangingCheck runs the checks for hanging transactions of this processor
// (see package hanging): after each assignment (completeHanging, the
// ownership's hangingGate) and periodically (watch).
type hangingCheck struct {
	p *setup
	// mu serializes the checks, so no marker is written twice.
	mu sync.Mutex
}

var _ hangingGate = (*hangingCheck)(nil)

// check runs one check, completes what it can, and reports. clean is true
// when nothing is left open: no error, nothing undecided or failed.
func (h *hangingCheck) check(ctx context.Context, adm *kadm.Client) (clean bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.p
	repairs, err := hanging.Check(ctx, adm, p.hangingConfig())
	if err != nil {
		return false, err
	}
	log := p.cfg.Logger
	var left []string
	for _, r := range repairs {
		switch {
		case !r.Decided:
			p.mHanging.hanging.WithLabelValues("undecided").Inc()
			left = append(left, r.String())
			log.Error("hanging transaction: the coordinator finished it but its marker never reached this partition, and its decision is no longer in __transaction_state; processing waits until an operator ends it (docs/operating.md: Hanging transactions)",
				"topic", r.Topic, "partition", r.Partition, "producer_id", r.ProducerID, "epoch", r.Epoch, "start_offset", r.StartOffset)
		case r.Err != nil:
			p.mHanging.hanging.WithLabelValues("failed").Inc()
			left = append(left, r.String())
			log.Warn("hanging transaction: writing its marker failed; trying again", "repair", r.String(), "err", r.Err)
		default:
			action := map[bool]string{true: "commit", false: "abort"}[r.Commit]
			p.mHanging.hanging.WithLabelValues(action).Inc()
			log.Warn("hanging transaction completed: its coordinator had finished it but the marker never reached this partition (lost in a broker shutdown); wrote the coordinator's decision",
				"topic", r.Topic, "partition", r.Partition, "producer_id", r.ProducerID, "epoch", r.Epoch, "start_offset", r.StartOffset, "marker", action)
		}
	}
	if len(left) > 0 {
		p.cfg.Health.Set("transactions", errors.New(fmt.Sprint("hanging transactions not completed: ", left)))
		return false, nil
	}
	p.cfg.Health.Set("transactions", nil)
	return true, nil
}

// notAuthorized reports whether err says the cluster does not let this
// processor run the check (DescribeProducers needs Read on the topics and
// __consumer_offsets, WriteTxnMarkers ClusterAction).
func notAuthorized(err error) bool {
	var ae *kadm.AuthError
	return errors.As(err, &ae) || errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// completeHanging runs checks after an assignment until one leaves nothing
// open, then closes clean: partitions resume only then, so no new
// transaction writes to a partition holding a hanging one (the broker would
// merge them, and the new transaction's end would decide the old one's
// records). A check that cannot run (an error for hangingGateWait, or not
// authorized) opens the gate with a warning; an undecided hang keeps it
// shut until an operator ends it.
func (h *hangingCheck) completeHanging(ctx context.Context, cl *kgo.Client, clean chan struct{}) {
	defer close(clean)
	adm := kadm.NewClient(cl)
	start := time.Now()
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, hangingInterval) {
		ok, err := h.check(ctx, adm)
		switch {
		case ok:
			return
		case err != nil && notAuthorized(err):
			h.p.cfg.Logger.Warn("cannot check for hanging transactions: not authorized; processing without the check", "err", err)
			return
		case err != nil && time.Since(start) > hangingGateWait:
			h.p.cfg.Logger.Warn("hanging transaction check still failing; processing without it", "err", err, "since", time.Since(start).Round(time.Second).String())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// watch checks every hangingInterval until ctx ends: a hang can also
// appear without this processor losing its partitions.
func (h *hangingCheck) watch(ctx context.Context, cl *kgo.Client) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(hangingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := h.check(ctx, adm); err != nil && ctx.Err() == nil {
			h.p.cfg.Logger.Debug("hanging transaction check failed; trying again later", "err", err)
		}
	}
}
