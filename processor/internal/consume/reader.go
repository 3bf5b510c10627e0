package consume

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/fetcherr"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/admission"
	"github.com/hookline/hookline/processor/internal/offsets"
	"github.com/hookline/hookline/processor/internal/txnloop"
)

// paceEvery is how often the reader looks at each destination's room
// to pause or resume reading its lane, while there is anything to pace:
// records held, a lane paused or records gated. With none, pace sleeps
// until records are handed to the chains (kick), or paceIdle.
const paceEvery = 20 * time.Millisecond

// paceIdle bounds pace's sleep while nothing is held, paused or gated: a
// lane is then paused only for an operator's pause (a record parked pauses
// its lane at once, hold), which this bounds. One wake-up a second instead
// of fifty.
const paceIdle = time.Second

// reader fetches every record the session runs: webhooks.raw partition p
// and the lane topics' partition p (webhooks.lane.<provider>, where records
// wait that their destination had no room for) for each raw partition p the
// session owns, from the offsets committed in the group's transactions,
// once the partition is restored. It is a plain assign-mode client beside
// the transactional session, which joins the group and ends transactions
// but never fetches (its partitions stay paused): franz-go forbids polling
// the session during Begin and End, and a record must not wait for a
// transaction to end before it is even read. The offsets of both are
// committed by the session's transactions (package txnloop), so a record's
// effect and its offset commit together.
//
// A lane is read only while its destination has room: a parked record costs
// nothing until then, and a full destination holds back only its own lane.
// Raw is read while the process-wide budget has room (admission.Budget.Full, through session.overBudget).
type reader struct {
	p      *setup
	budget *admission.Budget
	lanes  admission.Admitter
	// room is signalled when a transaction committed; to is where the
	// records go.
	room   <-chan struct{}
	to     recordSink
	cl     *kgo.Client
	mu     sync.Mutex
	paused map[string]bool // lane topic -> reading paused
	topics []string        // raw and the lane topics
	// gapped: every topic is paused for the poll gap (run, startGap);
	// lane pauses and resumes meanwhile are only noted in paused, and
	// endGap applies them.
	gapped bool
	// gated are lane records read while their priority class had no room
	// (admission.Budget.HoldAdmitted), per class in fetch order; they are dispatched as it
	// gets room. Only with several classes.
	gated [providers.NumPriorities][]*kgo.Record
	// kick wakes a sleeping pace: records were handed to the chains
	// (capacity 1).
	kick chan struct{}
	// trials are the lanes read for a trial call (trial.go) by lane
	// topic: resumed by pace while their route is auto-paused and a trial
	// is due, until hand takes the head record.
	trials map[string]*lane
	// empty are the lane partitions not fetched because they hold
	// nothing (partition.emptyLanes), by lane topic: fetched again once
	// this session parks a record there (parked) or, for a record another
	// owner placed there, once watchEmpty sees their end move.
	empty map[string]map[int32]int64 // topic -> partition -> end offset seen
	done  chan struct{}
}

// recordSink is what the reader asks of its session: whether the budget
// is spent, to run records, to stop on an error it cannot read past.
type recordSink interface {
	// overBudget: the process-wide budget is spent; reading waits for room.
	overBudget() bool
	// dispatch hands records to their chains; admitted: they hold their
	// class's admission already (lane records let through by ungate).
	dispatch(recs []*kgo.Record, admitted bool)
	// fail stops the session with err.
	fail(err error)
	// trial runs r, the head record of ln's lane, as the route's trial
	// call (trial.go).
	trial(r *kgo.Record, ln *lane)
}

// newReader builds the reader of a session: what it uses of the session
// are the budget, the lanes' admission, room, and the session as to.
func newReader(p *setup, budget *admission.Budget, lanes admission.Admitter, room <-chan struct{}, to recordSink) (*reader, error) {
	// A direct consumer needs a topic at start; it reads no partition
	// until one is added.
	cl, err := p.cfg.NewClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.cfg.Names.Raw: {}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.FetchMaxBytes(16<<20),
	)
	if err != nil {
		return nil, fmt.Errorf("reader: %w", err)
	}
	return &reader{p: p, budget: budget, lanes: lanes, room: room, to: to,
		cl: cl, paused: map[string]bool{}, topics: append([]string{p.cfg.Names.Raw}, p.laneTopics()...), kick: make(chan struct{}, 1), trials: map[string]*lane{}, empty: map[string]map[int32]int64{}, done: make(chan struct{})}, nil
}

// add starts reading a partition that became ready, raw and lanes, each
// at its window's committed offset; the lanes in empty (holding nothing)
// are added paused until a record is parked there.
func (l *reader) add(part int32, wins map[string]*offsets.Window, empty []string) {
	l.mu.Lock()
	l.forgetEmpty(part)
	pause := map[string][]int32{}
	for _, t := range empty {
		if w := wins[t]; w != nil {
			if l.empty[t] == nil {
				l.empty[t] = map[int32]int64{}
			}
			l.empty[t][part] = w.Base()
			pause[t] = []int32{part}
		}
	}
	if len(pause) > 0 {
		l.cl.PauseFetchPartitions(pause)
	}
	l.mu.Unlock()
	m := map[string]map[int32]kgo.Offset{}
	for topic, w := range wins {
		m[topic] = map[int32]kgo.Offset{part: kgo.NewOffset().At(w.Base())}
	}
	l.cl.AddConsumePartitions(m)
}

// forgetEmpty resumes the empty lanes of part (it went away, or is added
// again with a fresh look); l.mu is held.
func (l *reader) forgetEmpty(part int32) {
	resume := map[string][]int32{}
	for t, ps := range l.empty {
		if _, ok := ps[part]; ok {
			delete(ps, part)
			resume[t] = []int32{part}
		}
	}
	if len(resume) > 0 {
		l.cl.ResumeFetchPartitions(resume)
	}
}

// parked resumes fetching partition part of a lane topic that was not
// fetched for holding nothing: a record is being parked there.
func (l *reader) parked(topic string, part int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.empty[topic][part]; ok {
		delete(l.empty[topic], part)
		l.cl.ResumeFetchPartitions(map[string][]int32{topic: {part}})
	}
}

// emptyEvery is how often watchEmpty compares the end offsets of the lane
// partitions not fetched with those seen when they were found empty: one
// ListOffsets request instead of the fetches of every such partition.
// Only a record placed in a lane partition by another owner (a raw record
// whose key places it elsewhere, written by a hand-made producer) moves
// an end this session did not move itself (parked).
const emptyEvery = time.Second

// watchEmpty resumes, every emptyEvery, the empty lane partitions whose
// end moved, until ctx ends. It asks nothing while there are none.
func (l *reader) watchEmpty(ctx context.Context) {
	adm := kadm.NewClient(l.cl)
	t := time.NewTicker(emptyEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		var ts []string
		for topic, ps := range l.empty {
			if len(ps) > 0 {
				ts = append(ts, topic)
			}
		}
		l.mu.Unlock()
		if len(ts) == 0 {
			continue
		}
		ends, err := adm.ListEndOffsets(ctx, ts...)
		if err != nil {
			continue // the next look asks again
		}
		l.mu.Lock()
		resume := map[string][]int32{}
		for topic, ps := range l.empty {
			for part, seen := range ps {
				if end, ok := ends.Lookup(topic, part); ok && end.Err == nil && end.Offset > seen {
					delete(ps, part)
					resume[topic] = append(resume[topic], part)
				}
			}
		}
		if len(resume) > 0 {
			l.cl.ResumeFetchPartitions(resume)
		}
		l.mu.Unlock()
	}
}

// remove stops reading partitions that went away, raw and lanes.
func (l *reader) remove(parts map[int32]bool) {
	if len(parts) == 0 {
		return
	}
	var ps []int32
	for p := range parts {
		ps = append(ps, p)
	}
	m := map[string][]int32{l.p.cfg.Names.Raw: ps}
	for _, t := range l.p.laneTopics() {
		m[t] = ps
	}
	l.cl.RemoveConsumePartitions(m)
	l.mu.Lock()
	for p := range parts {
		l.forgetEmpty(p)
	}
	l.mu.Unlock()
	// A gated record of a partition that went away is read again from the
	// committed offset by its next owner, this session included.
	l.mu.Lock()
	for c, recs := range l.gated {
		kept := recs[:0]
		for _, r := range recs {
			if !parts[r.Partition] {
				kept = append(kept, r)
			}
		}
		clear(recs[len(kept):])
		l.gated[c] = kept
	}
	l.mu.Unlock()
}

// pollGap is how long the reader fetches nothing after a poll that
// returned records within pollGap. franz-go sends a broker the next fetch
// as soon as the last one's records are polled, and the broker answers it
// on the first record to arrive: at 1,000 events/s the reader fetched
// 400-800 times a second, one or two records a fetch, and those requests,
// not the records, were most of the processor's CPU (issue 36). Every
// topic is paused for the gap instead, and the fetch sent when it ends
// brings what arrived meanwhile: at most 200 fetches a second, and a
// record arriving in a gap waits 2.5 ms on average. Pausing, not sleeping
// before the poll: the fetch sent at the poll would be answered at once
// with one record and wait out the gap in franz-go's buffer, and the
// records after it a second gap. Only a poll answered within the gap is
// followed by one: at 100 events/s a poll waits 10 ms for its record, a
// gap would batch nothing, and its pause and resume cost the processor
// 20-30 % more CPU per event in bench-e2e -cost. An idle reader's fetch
// waits in the broker and is answered on the first record.
const pollGap = 5 * time.Millisecond

// run polls and hands the records to the chains, and paces the lanes,
// until ctx ends. While the budget is spent it waits for a transaction to
// commit (franz-go buffers at most one fetch meanwhile). After a poll
// that returned records within pollGap, nothing is fetched for pollGap.
func (l *reader) run(ctx context.Context) {
	defer close(l.done)
	go l.pace(ctx)
	go l.watchEmpty(ctx)
	gap := time.NewTimer(0)
	defer gap.Stop()
	for ctx.Err() == nil {
		if l.to.overBudget() {
			select {
			case <-ctx.Done():
			case <-l.room:
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
		l.endGap()
		polled := time.Now()
		fs := l.cl.PollRecords(ctx, txnloop.MaxResults)
		if ctx.Err() != nil {
			return
		}
		if err := fetcherr.Fatal(fs, l.p.cfg.Logger); err != nil {
			l.to.fail(fmt.Errorf("%w: %w", txnloop.ErrSessionBroken, err))
			return
		}
		recs := fs.Records()
		wait := time.Duration(0)
		if len(recs) > 0 && time.Since(polled) < pollGap {
			l.startGap()
			wait = pollGap
		}
		gap.Reset(wait) // no stale tick after Reset (Go 1.23 timers)
		l.hand(recs)
	}
}

// startGap pauses fetching every topic, raw and every lane (run): all at
// once, or a fetch sent between two pauses could wait in the broker for
// the lanes' records while raw's arrive.
func (l *reader) startGap() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gapped = true
	l.cl.PauseFetchTopics(l.topics...) // one step: no fetch of some of them
}

// endGap resumes fetching raw and every lane not paused meanwhile or
// before (paused), in one step: one fetch asks for all of them.
func (l *reader) endGap() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.gapped {
		return
	}
	l.gapped = false
	resume := make([]string, 0, len(l.topics))
	for _, t := range l.topics {
		if !l.paused[t] { // raw is never in paused
			resume = append(resume, t)
		}
	}
	l.cl.ResumeFetchTopics(resume...)
}

// pauseLane pauses or resumes reading a lane topic; during a poll gap it
// only notes it, and endGap applies it. l.mu is held.
func (l *reader) pauseLane(topic string, paused bool) {
	l.paused[topic] = paused
	switch {
	case l.gapped:
	case paused:
		l.cl.PauseFetchTopics(topic)
	default:
		l.cl.ResumeFetchTopics(topic)
	}
}

// hand dispatches what a poll returned. With several priority classes a
// lane record waits in gated until its class has room (a lane is read only
// while it has, but one fetch may bring more than the room); raw records
// go at once, their class checked when they run (session.run parks those
// over their class's share).
func (l *reader) hand(recs []*kgo.Record) {
	recs = l.takeTrials(recs)
	if len(recs) > 0 {
		defer l.wake() // after dispatch held them: pace sees them held
	}
	if !l.budget.Classes() {
		l.to.dispatch(recs, false)
		return
	}
	raw := recs[:0:0]
	l.mu.Lock()
	for _, r := range recs {
		if r.Topic == l.p.cfg.Names.Raw {
			raw = append(raw, r)
			continue
		}
		c := l.p.classOf(r)
		l.gated[c] = append(l.gated[c], r)
	}
	l.mu.Unlock()
	l.to.dispatch(raw, false)
	l.ungate()
}

// takeTrials takes a trial call's record out of what a poll returned: the
// first record of a lane read for a trial (pace) is the route's trial, the
// lane is paused again at once, and its partitions are rewound to the
// first record of each not taken (the trial's: to the record after it), so
// nothing else of the lane is run and its head stays where it was. The
// other records are returned.
func (l *reader) takeTrials(recs []*kgo.Record) []*kgo.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.trials) == 0 {
		return recs
	}
	now := l.p.cfg.Now()
	kept := recs[:0:0]
	back := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range recs {
		ln, ok := l.trials[r.Topic]
		if !ok {
			kept = append(kept, r)
			continue
		}
		ps := back[r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			back[r.Topic] = ps
		}
		if _, seen := ps[r.Partition]; seen {
			continue
		}
		ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		if ln.trial.start(now) {
			ps[r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset + 1}
			l.to.trial(r, ln)
		}
	}
	for topic := range back {
		delete(l.trials, topic)
		l.pauseLane(topic, true)
	}
	l.cl.SetOffsets(back)
	return kept
}

// unread rewinds the fetch of a lane's partition to a trial's record that
// goes back to the head of the lane (its window took it back first); the
// lane stays paused until pace resumes it.
func (l *reader) unread(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.Topic: {r.Partition: {Epoch: -1, Offset: r.Offset}}})
}

// ungate dispatches the gated lane records their classes have room for,
// in order.
func (l *reader) ungate() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c, recs := range l.gated {
		n := 0
		for n < len(recs) && l.budget.HoldAdmitted(providers.Priority(c), len(recs[n].Value)) {
			n++
		}
		if n == 0 {
			continue
		}
		l.to.dispatch(recs[:n], true)
		l.gated[c] = append(recs[:0], recs[n:]...)
	}
}

// pace pauses a lane while its destination has no room (as many records
// wait as it has slots, or it is closed: paused, or its breaker refuses
// calls) or its priority class holds more than its share of the budget,
// and resumes it when not. It looks every paceEvery while there is
// anything to pace (idle is false); otherwise it sleeps until records are
// handed to the chains or paceIdle passed: a lane fills, a class runs out
// of share or a breaker opens only with records held, and a paused lane or
// gated records keep it looking.
func (l *reader) pace(ctx context.Context) {
	t := time.NewTimer(paceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		if l.budget.Classes() {
			l.ungate()
		}
		for _, t := range l.p.routes.byLane {
			l.pace1(t.lane)
		}
		wait := paceEvery
		if l.idle() {
			wait = paceIdle
		}
		t.Reset(wait) // no stale tick after Reset (Go 1.23 timers)
	}
}

// wake wakes pace if it sleeps.
func (l *reader) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// idle reports that pace has nothing to look after: no record held in the
// budget, no lane paused, no lane record gated.
func (l *reader) idle() bool {
	if l.budget.Held() > 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.paused {
		if p {
			return false
		}
	}
	for _, recs := range l.gated {
		if len(recs) > 0 {
			return false
		}
	}
	return true
}

// pace1 pauses or resumes one lane. The look at its room and the pause
// or resume are one step under l.mu, so a hold in between is not undone by
// a look taken before it.
func (l *reader) pace1(ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	full := len(l.gated[ln.adm.Class()]) > 0 || !l.lanes.ReadBack(ln.adm)
	if ln.trial != nil {
		switch {
		case ln.trial.busy():
			full = true // its record may go back to the head of the lane
		case full && l.trialOpen(ln):
			full = false // read the head record for the trial (takeTrials)
			l.trials[ln.topic] = ln
		default:
			delete(l.trials, ln.topic)
		}
	}
	if l.paused[ln.topic] == full {
		return
	}
	l.pauseLane(ln.topic, full)
}

// trialOpen says whether ln's lane may be read for a trial call now: the
// route is paused (by auto-pause: trial.due), its breaker does not refuse
// calls, its class has room and holds no gated record, and a trial is due.
// l.mu is held.
func (l *reader) trialOpen(ln *lane) bool {
	c := ln.adm.Class()
	return ln.adm.Paused() && !ln.adm.Refusing() && len(l.gated[c]) == 0 && l.budget.Room(c) && ln.trial.due(l.p.cfg.Now())
}

// hold pauses a lane at once, without waiting for pace: a record is being
// parked in it because its destination has no room, and reading it back
// before the destination has room would only park it again. franz-go drops
// what it buffered of a paused topic at the next poll, so nothing parked
// from now on is read before pace resumes the lane.
func (l *reader) hold(ln *lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.paused[ln.topic] {
		l.pauseLane(ln.topic, true)
	}
}

// closeUnstarted closes the client of a reader whose run never started.
func (l *reader) closeUnstarted() { l.cl.Close() }

// close waits for run to end (its ctx must be done) and closes the client.
func (l *reader) close() {
	<-l.done
	l.cl.Close()
}
