package consume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// paceEvery is how often the lane reader looks at each destination's room
// to pause or resume reading its lane.
const paceEvery = 20 * time.Millisecond

// laneReader reads the lane topics (webhooks.lane.<provider>) where records
// wait that their destination had no room for. Lane partition p is read by
// the owner of raw partition p, from the offsets committed in the group's
// transactions, and only while the destination has room: a parked record
// costs nothing until then, and a full destination holds back only its own
// lane. It is a plain assign-mode client beside the transactional session;
// its offsets are committed by the session's transactions
// (rewriteOffsets), so a lane record's effect and its offset commit
// together.
type laneReader struct {
	s      *session
	cl     *kgo.Client
	mu     sync.Mutex
	paused map[string]bool // lane topic -> reading paused
	done   chan struct{}
}

// newLaneReader builds the reader; nil when no provider has a destination.
func newLaneReader(s *session) (*laneReader, error) {
	ts := s.p.laneTopics()
	if len(ts) == 0 {
		return nil, nil
	}
	// A direct consumer needs a topic at start; it reads no partition
	// until one is added.
	cl, err := s.p.cfg.NewClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{ts[0]: {}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.FetchMaxBytes(8<<20),
		kgo.FetchMaxPartitionBytes(1<<20),
	)
	if err != nil {
		return nil, fmt.Errorf("lane reader: %w", err)
	}
	return &laneReader{s: s, cl: cl, paused: map[string]bool{}, done: make(chan struct{})}, nil
}

// add starts reading the lanes of a partition that became ready, each at
// its window's committed offset.
func (l *laneReader) add(part int32, wins map[string]*window) {
	if l == nil {
		return
	}
	m := map[string]map[int32]kgo.Offset{}
	for topic, w := range wins {
		if topic == l.s.p.cfg.Names.Raw {
			continue
		}
		m[topic] = map[int32]kgo.Offset{part: kgo.NewOffset().At(w.base)}
	}
	l.cl.AddConsumePartitions(m)
}

// remove stops reading the lanes of partitions that went away.
func (l *laneReader) remove(parts map[int32]bool) {
	if l == nil || len(parts) == 0 {
		return
	}
	var ps []int32
	for p := range parts {
		ps = append(ps, p)
	}
	m := map[string][]int32{}
	for _, t := range l.s.p.laneTopics() {
		m[t] = ps
	}
	l.cl.RemoveConsumePartitions(m)
}

// run polls the lanes and hands their records to the chains, and paces the
// lanes, until ctx ends.
func (l *laneReader) run(ctx context.Context) {
	if l == nil {
		return
	}
	defer close(l.done)
	go l.pace(ctx)
	for ctx.Err() == nil {
		fs := l.cl.PollRecords(ctx, 256)
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				l.s.p.cfg.Logger.Warn("lane fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if err := l.s.dispatch(fs.Records()); err != nil {
			l.s.fail(err)
			return
		}
	}
}

// pace pauses a lane while its destination has no room (as many records
// wait as it has slots, or it is closed: paused, or its breaker refuses
// calls) and resumes it when it has.
func (l *laneReader) pace(ctx context.Context) {
	t := time.NewTicker(paceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, ln := range l.s.p.lanes {
			full := !ln.room()
			l.mu.Lock()
			changed := l.paused[ln.topic] != full
			l.paused[ln.topic] = full
			l.mu.Unlock()
			if !changed {
				continue
			}
			if full {
				l.cl.PauseFetchTopics(ln.topic)
			} else {
				l.cl.ResumeFetchTopics(ln.topic)
			}
		}
	}
}

// closeUnstarted closes the client of a reader whose run never started.
func (l *laneReader) closeUnstarted() {
	if l != nil {
		l.cl.Close()
	}
}

// close waits for run to end (its ctx must be done) and closes the client.
func (l *laneReader) close() {
	if l == nil {
		return
	}
	<-l.done
	l.cl.Close()
}

// laneTopics lists the lane topics of the providers with a destination,
// sorted.
func (p *Processor) laneTopics() []string {
	var ts []string
	for _, ln := range p.lanes {
		ts = append(ts, ln.topic)
	}
	sort.Strings(ts)
	return ts
}
