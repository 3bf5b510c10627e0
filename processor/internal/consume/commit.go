package consume

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/processor/internal/state"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// The session is the transaction loop's txnloop.Results: the results
// waiting, and what becomes of them once their transaction ends.
var _ txnloop.Results[*result] = (*session)(nil)

// Record is the record read whose result this is.
func (res *result) Record() *kgo.Record { return res.r }

// Produced is the result's records and their produce answers.
func (res *result) Produced() *txnloop.Produced { return &res.out }

// Waiting is how many results wait for a transaction, and the error that
// stops the processor, if any.
func (s *session) Waiting() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.results), s.err
}

// Take removes and returns up to n results waiting, oldest first.
func (s *session) Take(n int) []*result {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(len(s.results), n)
	batch := append([]*result(nil), s.results[:n]...)
	clear(s.results[:n])
	s.results = s.results[n:]
	return batch
}

// Requeue puts an aborted transaction's results back in front of those
// waiting.
func (s *session) Requeue(batch []*result) {
	s.mu.Lock()
	s.results = append(batch, s.results...)
	s.mu.Unlock()
}

// Drop forgets a result whose partition went away.
func (s *session) Drop(res *result) { s.dropResult(res) }

// Apply gives the store the states of a committed transaction, with the
// changelog offsets they reached.
func (s *session) Apply(batch []*result, checkpoint map[int32]int64) error {
	var changes []state.Change
	for _, res := range batch {
		if res.change != nil {
			changes = append(changes, *res.change)
		}
		if res.holdChange != nil {
			changes = append(changes, *res.holdChange)
		}
	}
	if err := s.p.cfg.Store.Apply(changes, checkpoint); err != nil {
		// Badger is only a cache of the changelog: without this write it is
		// behind, never ahead, and restore catches it up. Stop so the
		// partitions are restored before anything else is decided.
		return fmt.Errorf("apply committed states to the store: %w", err)
	}
	for _, res := range batch {
		if res.holdChange != nil {
			s.own.owner(res.holdChange.Partition).heldKeys().set(res.holdChange.Key, res.holdChange.Value)
		}
	}
	return nil
}

// Committed forgets the results of a committed transaction (their budget,
// tokens and overlay entries) and counts their outcomes.
func (s *session) Committed(batch []*result) {
	p := s.p
	s.mu.Lock()
	for _, res := range batch {
		s.drop(res.item)
		s.release(res)
		res.settled.close()
		endSpan(res.span, nil)
		if res.change != nil {
			if o, ok := s.overlay[res.change.Key]; ok && o.seq == res.seq {
				delete(s.overlay, res.change.Key)
			}
		}
		if res.holdChange != nil {
			if o, ok := s.overlay[res.holdChange.Key]; ok && o.seq == res.holdSeq {
				delete(s.overlay, res.holdChange.Key)
			}
		}
	}
	s.mu.Unlock()
	p.countOutcomes(batch)
}

// countedOutcome is one set of labels of the outcome metrics: an outcome's
// stat, with the attempt that succeeded for a done one.
type countedOutcome struct {
	stat
	attempt string
}

// countOutcomes adds a committed batch's outcomes to the outcome metrics,
// once per set of labels with its count: a batch holds hundreds of
// outcomes under a few sets of labels, and a label lookup (validating and
// hashing the values, under the vector's lock) was a cost per delivery,
// three of them for an event of three routes.
func (p *setup) countOutcomes(batch []*result) {
	counts := map[countedOutcome]float64{}
	for _, res := range batch {
		for _, st := range res.stats {
			k := countedOutcome{stat: st}
			if st.status == outcome.StatusDone {
				k.attempt = succeededAttempt(res.r, st.origin, p.cfg.Schedule.Len()+1)
			}
			counts[k]++
		}
	}
	for k, n := range counts {
		p.mOutcomes.records.WithLabelValues(k.provider, k.route, k.status, k.eventType).Add(n)
		switch k.status {
		case outcome.StatusDuplicate:
			p.mOutcomes.duplicates.WithLabelValues(k.origin).Add(n)
		case outcome.StatusDone:
			p.mOutcomes.succeeded.WithLabelValues(k.provider, k.route, k.attempt).Add(n)
		}
	}
}

// succeededAttempt is the attempt label of a done result: the record's
// hookline.attempt (a replay's or backfill's outcome says 1, as decide counts it),
// folded into last above it so the label stays bounded by the tiers.
func succeededAttempt(r *kgo.Record, origin string, last int) string {
	n, err := headers.GetAttempt(r)
	if err != nil || origin == headers.OriginReplay || origin == headers.OriginBackfill {
		n = 1
	}
	return strconv.Itoa(min(n, last))
}
