package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/schemas"
)

// Ledger is the account of one run: every key ingest answered 202 for,
// against what the system did with it on each of its routes (issue 22: the
// provider's routes its event type matches, or the one route default of a
// provider-level destination). After the run, Settle proves the promises
// hookline makes, for every (key, route):
//
//   - lost = 0: every accepted key has a terminal outcome (done or dead) on
//     each of its routes, or its one unrouted outcome when it matches none;
//   - doubled = 0: no key is done twice on a route, and no delivery of a
//     key ends twice there (a key ends once from ingest or the retry tiers,
//     plus at most once per replay id);
//   - every dead outcome has its one DLQ entry (of its route), and every
//     DLQ entry its dead outcome;
//   - destination calls per key and route stay within one per processed
//     record plus the repeats a crash is allowed;
//   - a topic route's topic holds each of the route's keys exactly once,
//     as it was sent, with its route's header.
//
// It reads webhooks.outcomes, webhooks.dlq and each topic route's topic
// read_committed from the start, as an analyst would, and the
// destination's own log of calls.
type Ledger struct {
	sys *System
	cl  *kgo.Client
	adm *kadm.Client
	// topics maps each topic route's topic to its route.
	topics map[string]string

	mu       sync.Mutex
	accepted map[string]int      // key -> 202 answers naming it
	expect   map[string][]string // key -> the routes it is delivered on
	bodies   map[string][]byte   // key -> body sent, for a system with topic routes (single-key events)
	invalid  map[string]bool     // keys expected dead as invalid_payload (ExpectInvalid)
	keys     map[string]*keyAccount
	dupes    int // duplicate outcomes
	outcomes int // outcome records read
	dlq      int // DLQ records read
}

// keyAccount is what happened to one key: dedup and routing decide once
// per key, the rest per route.
type keyAccount struct {
	duplicate, unrouted, suppressed int
	routes                          map[string]*account
}

// account is what happened to one key on one route.
type account struct {
	done, dead, retrying, parked, held int
	// ends counts terminal outcomes (done, dead) of deliveries from ingest
	// and their retries; replayEnds those of each replay id and its retries.
	ends       int
	replayEnds map[string]int
	last       string // status of the latest terminal outcome
	dlq        int    // DLQ entries
	invalid    int    // dead outcomes for invalid_payload
	// records counts the key's records on a topic route's topic; mangled
	// those that are not the delivery as sent, with the route's header.
	records, mangled int
}

// Ledger returns the system's ledger, started on first use.
func (s *System) Ledger() *Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ledger == nil {
		read := []string{s.Names.Outcomes, s.Names.DLQ}
		for t := range s.topicRoutes() {
			read = append(read, t)
		}
		s.ledger = newLedger(s, s.committedReader(read...))
	}
	return s.ledger
}

// newLedger is an empty ledger of s reading with cl.
func newLedger(s *System, cl *kgo.Client) *Ledger {
	return &Ledger{sys: s, cl: cl, adm: kadm.NewClient(cl), topics: s.topicRoutes(), accepted: map[string]int{},
		expect: map[string][]string{}, bodies: map[string][]byte{}, keys: map[string]*keyAccount{}}
}

// Accept enters keys that ingest answered 202 for, each of the provider's
// event type the kit's events have (NewEvent).
func (l *Ledger) Accept(keys ...string) {
	for _, k := range keys {
		p, id, _ := strings.Cut(k, ":")
		typ := ""
		if slices.Contains(MixedProviders, p) {
			typ = NewEvent(p, id).Type
		}
		l.accept(typ, nil, k)
	}
}

// AcceptEvent enters the keys ingest answered 202 for when ev was sent:
// each is expected on the routes its event type and body match.
func (l *Ledger) AcceptEvent(ev Event, keys []string) { l.acceptEvent(ev, keys) }

// acceptEvent enters the keys ingest answered 202 for when ev was sent.
func (l *Ledger) acceptEvent(ev Event, keys []string) {
	var body []byte
	if len(keys) == 1 {
		body = ev.Body
	}
	l.accept(ev.Type, body, keys...)
}

// ExpectInvalid says keys fail their provider's schema: each must end dead
// for invalid_payload on every route it matches, with its DLQ entry, and
// no call or topic record; every other key must not end so.
func (l *Ledger) ExpectInvalid(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.invalid == nil {
		l.invalid = map[string]bool{}
	}
	for _, k := range keys {
		l.invalid[k] = true
	}
}

func (l *Ledger) accept(typ string, body []byte, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.accepted[k] == 0 {
			l.expect[k] = l.sys.routesOf(k, typ, body)
			if body != nil && len(l.topics) > 0 {
				l.bodies[k] = body
			}
		}
		l.accepted[k]++
	}
}

// Accepted is how many distinct keys were accepted so far.
func (l *Ledger) Accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

func (l *Ledger) keyAccount(key string) *keyAccount {
	k := l.keys[key]
	if k == nil {
		k = &keyAccount{routes: map[string]*account{}}
		l.keys[key] = k
	}
	return k
}

// account is key's account on route ("" is the route default: records
// and outcomes written before routes).
func (l *Ledger) account(key, route string) *account {
	if route == "" {
		route = headers.DefaultRoute
	}
	k := l.keyAccount(key)
	a := k.routes[route]
	if a == nil {
		a = &account{}
		k.routes[route] = a
	}
	return a
}

// poll reads what is committed on outcomes, the DLQ and the route topics,
// for at most wait.
func (l *Ledger) poll(tb testing.TB, wait time.Duration) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fs := l.cl.PollFetches(ctx)
	n := 0
	l.mu.Lock()
	defer l.mu.Unlock()
	fs.EachRecord(func(r *kgo.Record) {
		n++
		l.add(tb, r)
	})
	return n
}

// SentBodies are the bodies sent, by key, for a system with topic routes
// (single-key events); a copy.
func (l *Ledger) SentBodies() map[string][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.bodies)
}

// add enters one record of outcomes, the DLQ or a route topic; l.mu is
// held.
func (l *Ledger) add(tb testing.TB, r *kgo.Record) {
	if route, ok := l.topics[r.Topic]; ok {
		a := l.account(string(r.Key), route)
		a.records++
		body, sent := l.bodies[string(r.Key)]
		if sent {
			body = l.sys.Transformed(tb, headers.Value(r, headers.Provider), route, body)
		}
		if headers.Value(r, headers.Route) != route || headers.Value(r, headers.IdempotencyKey) != string(r.Key) ||
			(sent && !bytes.Equal(body, r.Value)) {
			a.mangled++
		}
		return
	}
	if r.Topic == l.sys.Names.DLQ {
		l.dlq++
		l.account(string(r.Key), headers.Value(r, headers.Route)).dlq++
		if o, _ := headers.Get(r, headers.Origin); o == "" {
			tb.Errorf("DLQ record %d:%d of %s has no %s header", r.Partition, r.Offset, r.Key, headers.Origin)
		}
		return
	}
	l.outcomes++
	if err := schemas.Validate(schemas.Outcome, r.Value); err != nil {
		tb.Errorf("outcome at %d:%d fails its schema: %v\n%s", r.Partition, r.Offset, err, r.Value)
		return
	}
	o, err := outcome.Decode(r.Value)
	if err != nil {
		tb.Errorf("outcome at %d:%d: %v", r.Partition, r.Offset, err)
		return
	}
	switch o.Status {
	case outcome.StatusDuplicate:
		l.keyAccount(o.Key).duplicate++
		l.dupes++
		return
	case outcome.StatusUnrouted:
		l.keyAccount(o.Key).unrouted++
		return
	case outcome.StatusSuppressed:
		// Ingest's: the delivery was taken for a replay and never produced.
		l.keyAccount(o.Key).suppressed++
		return
	}
	a := l.account(o.Key, o.Route)
	switch o.Status {
	case outcome.StatusRetrying:
		a.retrying++
		return
	case outcome.StatusParked:
		// Waiting in its destination's lane: its lane copy ends it.
		a.parked++
		return
	case outcome.StatusHeld:
		// Waiting behind its entity's head (issue 24): no call made; its
		// copy in a retry tier ends it.
		a.held++
		return
	case outcome.StatusDone:
		a.done++
	case outcome.StatusDead:
		a.dead++
		if o.DeadReason == headers.DeadInvalidPayload {
			a.invalid++
		}
	}
	a.last = o.Status
	// A replayed delivery keeps its replay id through the retry tiers (its
	// origin is then retry), so the id, not the origin, says which
	// delivery ended.
	if o.ReplayID != "" {
		if a.replayEnds == nil {
			a.replayEnds = map[string]int{}
		}
		a.replayEnds[o.ReplayID]++
	} else {
		a.ends++
	}
}

// KeyOutcomes counts the outcomes read so far for one key, by status.
type KeyOutcomes struct {
	Done, Dead, Retrying, Duplicate, Parked int
}

// Parked counts the parked outcomes read so far, every key and route.
func (l *Ledger) Parked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, k := range l.keys {
		for _, a := range k.routes {
			n += a.parked
		}
	}
	return n
}

// Outcomes returns what the ledger has read for key so far, every route
// added up (call it after Settle for the whole account).
func (l *Ledger) Outcomes(key string) KeyOutcomes {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		return KeyOutcomes{}
	}
	out := KeyOutcomes{Duplicate: k.duplicate}
	for _, a := range k.routes {
		out.Done += a.done
		out.Dead += a.dead
		out.Retrying += a.retrying
		out.Parked += a.parked
	}
	return out
}

// RouteOutcomes returns what the ledger has read for key on route so far
// (Duplicate is the key's: dedup decides once per key).
func (l *Ledger) RouteOutcomes(key, route string) KeyOutcomes {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.keys[key]
	if k == nil {
		return KeyOutcomes{}
	}
	out := KeyOutcomes{Duplicate: k.duplicate}
	if a := k.routes[route]; a != nil {
		out.Done, out.Dead, out.Retrying, out.Parked = a.done, a.dead, a.retrying, a.parked
	}
	return out
}

// Keys returns every accepted key so far, sorted.
func (l *Ledger) Keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.accepted))
}

// Tally is the ledger's verdict. For a system without routes (every
// provider with its provider-level destination, the route default) it is
// the one route's. With routes, Routes holds each route's tally, and the
// system's counts are theirs added up, per (key, route), except Accepted,
// Duplicates, Unrouted and Unasked, which count keys.
type Tally struct {
	// Route names the route of a tally of Routes; "" for the system's.
	Route      string
	Accepted   int // distinct keys answered 202 (on a route: those it matches)
	Done       int // accepted keys whose latest end is done
	Dead       int // accepted keys whose latest end is dead
	Duplicates int // duplicate outcomes: deliveries dropped by the dedup table
	Lost       int // accepted keys with no end
	Doubled    int // keys done twice, or a delivery that ended twice
	DLQ        int // DLQ entries
	DLQWrong   int // keys whose DLQ entries do not match their dead outcomes one to one
	Calls      int // destination calls
	ExtraCalls int // calls beyond one per processed record (done, dead, retrying)
	Uncalled   int // keys done with a destination that was never called
	Unasked    int // keys with outcomes that no 202 named (a 503'd request that still got written)
	// Unrouted counts the accepted keys matching no route that ended with
	// their unrouted outcome; Stray the (key, route) pairs with an
	// outcome, call or record on a route the key does not match; Misrouted
	// the calls whose X-Hookline-Route is not the route of the URL they
	// reached. Printed with routes only.
	Unrouted, Stray, Misrouted int
	// Invalid counts the keys dead for invalid_payload (on a route: those
	// it matches); InvalidWrong the keys that ExpectInvalid named and did
	// not end so, called or written nonetheless, or that it did not name
	// and did. Printed when a key was expected invalid.
	Invalid, InvalidWrong int
	// Topic is a topic route's topic; Records counts the records read
	// there, Missing the route's accepted keys without one, Twice those
	// with more than one, Mangled the records that are not the delivery as
	// sent (body, key, hookline.route).
	Topic                            string
	Records, Missing, Twice, Mangled int
	// Routes are the tallies of each route, by name, when the harness gave
	// some provider routes; nil otherwise.
	Routes []Tally
	// Examples name a few keys of each kind of failure.
	Examples []string
	// Settled is when Settle first saw every accepted key ended and raw
	// consumed (to within its one-second polls); zero when it never did.
	Settled time.Time
}

// String is the ledger's one line; a route's line names its route.
func (t Tally) String() string {
	if t.Route != "" {
		s := fmt.Sprintf("ledger route %s: accepted=%d done=%d dead=%d lost=%d doubled=%d | dlq=%d dlq-mismatch=%d",
			t.Route, t.Accepted, t.Done, t.Dead, t.Lost, t.Doubled, t.DLQ, t.DLQWrong)
		if t.Topic != "" {
			return s + fmt.Sprintf(" | topic %s: records=%d missing=%d twice=%d mangled=%d stray=%d",
				t.Topic, t.Records, t.Missing, t.Twice, t.Mangled, t.Stray) + t.invalidString()
		}
		return s + fmt.Sprintf(" calls=%d extra-calls=%d uncalled=%d stray=%d misrouted=%d",
			t.Calls, t.ExtraCalls, t.Uncalled, t.Stray, t.Misrouted) + t.invalidString()
	}
	s := fmt.Sprintf("ledger: accepted=%d done=%d dead=%d duplicates=%d lost=%d doubled=%d | dlq=%d dlq-mismatch=%d calls=%d extra-calls=%d uncalled=%d unasked=%d",
		t.Accepted, t.Done, t.Dead, t.Duplicates, t.Lost, t.Doubled, t.DLQ, t.DLQWrong, t.Calls, t.ExtraCalls, t.Uncalled, t.Unasked)
	if t.Routes != nil {
		s += fmt.Sprintf(" | routes=%d unrouted=%d stray=%d misrouted=%d topic-missing=%d topic-twice=%d topic-mangled=%d",
			len(t.Routes), t.Unrouted, t.Stray, t.Misrouted, t.Missing, t.Twice, t.Mangled)
	}
	return s + t.invalidString()
}

// invalidString is the invalid_payload part of the line: empty unless a
// key was expected or found invalid.
func (t Tally) invalidString() string {
	if t.Invalid == 0 && t.InvalidWrong == 0 {
		return ""
	}
	return fmt.Sprintf(" | invalid=%d invalid-wrong=%d", t.Invalid, t.InvalidWrong)
}

// broken says whether t breaks a promise, given the extra calls allowed.
func (t Tally) broken(extraCalls int) bool {
	return t.Lost > 0 || t.Doubled > 0 || t.DLQWrong > 0 || t.Uncalled > 0 || t.ExtraCalls > extraCalls ||
		t.Stray > 0 || t.Misrouted > 0 || t.Missing > 0 || t.Twice > 0 || t.Mangled > 0 || t.InvalidWrong > 0
}

// SettleOptions say how long to wait and what a run may allow itself.
type SettleOptions struct {
	// Timeout bounds the wait for every accepted key to end (default 3m).
	Timeout time.Duration
	// ExtraCalls is how many destination calls beyond one per processed
	// record the run may make, every route: a processor killed mid-batch
	// repeats the calls of its open transaction (HOOKLINE_BATCH_MAX_RECORDS
	// per kill).
	ExtraCalls int
	// AllDone requires every accepted key to end done on every route
	// (after a replay fixed what was dead).
	AllDone bool
}

// Settle waits until every accepted key has ended on each of its routes
// and the processor has consumed all of webhooks.raw, then checks the
// ledger, logs its line (and one per route, with routes) and fails the
// test on any loss, double, DLQ mismatch, call over the bound or topic
// record missing, repeated or mangled.
func (l *Ledger) Settle(tb testing.TB, o SettleOptions) Tally {
	tb.Helper()
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	start := time.Now()
	deadline, report := start.Add(o.Timeout), start.Add(10*time.Second)
	settled, at := false, time.Time{}
	for !settled && time.Now().Before(deadline) {
		l.poll(tb, time.Second)
		pending, lag := l.pending(o.AllDone), l.rawLag()
		settled = pending == 0 && lag == 0
		if settled {
			at = time.Now()
		}
		if !settled && time.Now().After(report) {
			tb.Logf("ledger: %s: %d of %d accepted keys not ended yet, raw lag %d, %d outcomes read",
				time.Since(start).Round(time.Second), pending, l.Accepted(), lag, l.outcomeCount())
			report = time.Now().Add(10 * time.Second)
		}
	}
	if settled {
		// The processor commits its offsets in the transaction that writes
		// the outcomes: with no lag, everything is committed. Read on until
		// a poll brings nothing new.
		for l.poll(tb, time.Second) > 0 {
		}
	}
	t := l.tally(o)
	t.Settled = at
	tb.Log(t.String())
	for _, r := range t.Routes {
		tb.Log(r.String())
	}
	if !settled {
		tb.Errorf("ledger: not settled within %s (raw lag %d)", o.Timeout, l.rawLag())
	}
	if t.broken(o.ExtraCalls) {
		tb.Errorf("ledger: lost=%d doubled=%d dlq-mismatch=%d uncalled=%d extra-calls=%d (bound %d) invalid-wrong=%d; want 0 and within the bound; e.g. %s",
			t.Lost, t.Doubled, t.DLQWrong, t.Uncalled, t.ExtraCalls, o.ExtraCalls, t.InvalidWrong, strings.Join(t.Examples, ", "))
		if t.Routes != nil {
			tb.Errorf("ledger: stray=%d misrouted=%d topic-missing=%d topic-twice=%d topic-mangled=%d; want 0",
				t.Stray, t.Misrouted, t.Missing, t.Twice, t.Mangled)
		}
	}
	return t
}

// pending counts the accepted keys without a terminal outcome on one of
// their routes (without done, when allDone), or without their unrouted
// outcome when they match no route.
func (l *Ledger) pending(allDone bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k := range l.accepted {
		ka := l.keys[k]
		if len(l.expect[k]) == 0 {
			if ka == nil || ka.unrouted == 0 {
				n++
			}
			continue
		}
		for _, r := range l.expect[k] {
			var a *account
			if ka != nil {
				a = ka.routes[r]
			}
			if a == nil || a.last == "" || (allDone && a.last != outcome.StatusDone) {
				n++
				break
			}
		}
	}
	return n
}

func (l *Ledger) outcomeCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcomes
}

// rawLag is what the processor group has yet to commit on webhooks.raw
// (-1 when it cannot be read).
func (l *Ledger) rawLag() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw := l.sys.Names.Raw
	l.cl.PurgeTopicsFromClient(raw)
	ends, err := l.adm.ListEndOffsets(ctx, raw)
	if err != nil || ends.Error() != nil {
		return -1
	}
	commits, err := l.adm.FetchOffsets(ctx, l.sys.Names.Group(topics.GroupProcessor))
	if err != nil {
		return -1
	}
	var lag int64
	ends.Each(func(e kadm.ListedOffset) {
		c, ok := commits.Lookup(raw, e.Partition)
		if !ok || c.Err != nil {
			lag += e.Offset
			return
		}
		lag += max(0, e.Offset-c.At)
	})
	return lag
}

// tally takes the verdict over what was read. Without routes it is the
// route default's tally; with them, each route's and their sum.
func (l *Ledger) tally(o SettleOptions) Tally {
	misrouted := l.sys.Dest.Misrouted()
	l.mu.Lock()
	defer l.mu.Unlock()
	var examples []string
	example := func(kind, key string) {
		if len(examples) < 8 {
			examples = append(examples, kind+" "+key)
		}
	}
	// Every key read or accepted, and every route of the providers file
	// or named by either. (Routes of one name on two providers are tallied
	// as one.)
	keys := slices.Sorted(maps.Keys(l.keys))
	routes := map[string]bool{}
	for _, rs := range l.sys.routes {
		for _, r := range rs {
			routes[r.Name] = true
		}
	}
	for k := range l.accepted {
		if l.keys[k] == nil {
			keys = append(keys, k)
		}
		for _, r := range l.expect[k] {
			routes[r] = true
		}
	}
	sort.Strings(keys)
	for _, ka := range l.keys {
		for r := range ka.routes {
			routes[r] = true
		}
	}
	sum := Tally{Accepted: len(l.accepted), Duplicates: l.dupes, Misrouted: len(misrouted)}
	for _, m := range misrouted {
		example("misrouted", m)
	}
	for _, k := range keys {
		ka := l.keys[k]
		if ka == nil {
			ka = &keyAccount{}
		}
		switch {
		case l.accepted[k] == 0 && ka.suppressed > 0 && len(ka.routes) == 0 && ka.duplicate+ka.unrouted == 0:
			// Ingest's answer was replay: the key was never produced,
			// only its suppressed outcome written.
		case l.accepted[k] == 0:
			sum.Unasked++
		case len(l.expect[k]) == 0 && ka.unrouted == 0:
			sum.Lost++
			example("lost (unrouted)", k)
		case len(l.expect[k]) == 0:
			sum.Unrouted++
		}
		if ka.unrouted > 1 || (ka.unrouted > 0 && len(l.expect[k]) > 0) {
			sum.Doubled++
			example(fmt.Sprintf("unrouted %d times (%d routes match)", ka.unrouted, len(l.expect[k])), k)
		}
	}
	var perRoute []Tally
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		t := l.tallyRoute(r, keys, example)
		perRoute = append(perRoute, t)
		sum.Done += t.Done
		sum.Dead += t.Dead
		sum.Lost += t.Lost
		sum.Doubled += t.Doubled
		sum.DLQ += t.DLQ
		sum.DLQWrong += t.DLQWrong
		sum.Calls += t.Calls
		sum.ExtraCalls += t.ExtraCalls
		sum.Uncalled += t.Uncalled
		sum.Stray += t.Stray
		sum.Records += t.Records
		sum.Missing += t.Missing
		sum.Twice += t.Twice
		sum.Mangled += t.Mangled
	}
	for _, k := range keys {
		if l.accepted[k] > 0 && l.invalidWrong(k, example) {
			sum.InvalidWrong++
		}
		if ka := l.keys[k]; ka != nil && slices.ContainsFunc(slices.Collect(maps.Values(ka.routes)), func(a *account) bool { return a.invalid > 0 }) {
			sum.Invalid++
		}
	}
	if len(l.sys.routes) > 0 {
		sum.Routes = perRoute
	}
	sum.Examples = examples
	return sum
}

// invalidWrong says whether accepted key k broke what ExpectInvalid
// says: expected invalid and not dead for invalid_payload on each of its
// routes, or called or written to a topic there; or not expected and dead
// for invalid_payload on a route. l.mu is held.
func (l *Ledger) invalidWrong(k string, example func(kind, key string)) bool {
	ka := l.keys[k]
	if ka == nil {
		ka = &keyAccount{}
	}
	if !l.invalid[k] {
		for r, a := range ka.routes {
			if a.invalid > 0 {
				example("invalid_payload unexpected on "+r, k)
				return true
			}
		}
		return false
	}
	for _, r := range l.expect[k] {
		a := ka.routes[r]
		if a == nil || a.invalid == 0 || a.records > 0 || l.sys.Dest.RouteCalls(r)[k] > 0 {
			example("not dead as invalid_payload on "+r, k)
			return true
		}
	}
	return false
}

// tallyRoute is route's tally over keys; l.mu is held.
func (l *Ledger) tallyRoute(route string, keys []string, example func(kind, key string)) Tally {
	t := Tally{Route: route}
	for topic, r := range l.topics {
		if r == route {
			t.Topic = topic
		}
	}
	calls := l.sys.Dest.RouteCalls(route)
	for _, k := range keys {
		var a *account
		if ka := l.keys[k]; ka != nil {
			a = ka.routes[route]
		}
		accepted := l.accepted[k] > 0
		expected := accepted && slices.Contains(l.expect[k], route)
		if !expected {
			if accepted && (a != nil || calls[k] > 0) && !l.sys.waitedBeforeMove(k, route, a) {
				t.Stray++
				example("stray on "+route, k)
			}
			if a == nil {
				continue
			}
		}
		if a == nil {
			a = &account{}
		}
		if expected {
			t.Accepted++
		}
		if a.invalid > 0 && expected {
			t.Invalid++
		}
		switch {
		case a.last == "" && expected:
			t.Lost++
			example("lost on "+route, k)
		case a.last == outcome.StatusDone && expected:
			t.Done++
		case a.last == outcome.StatusDead && expected:
			t.Dead++
		}
		doubled := a.done > 1 || a.ends > 1
		for _, n := range a.replayEnds {
			doubled = doubled || n > 1
		}
		if doubled {
			t.Doubled++
			example("doubled on "+route, k)
		}
		t.DLQ += a.dlq
		if a.dlq != a.dead {
			t.DLQWrong++
			example(fmt.Sprintf("dlq-mismatch on %s (%d entries, %d dead)", route, a.dlq, a.dead), k)
		}
		if t.Topic != "" {
			t.Records += a.records
			t.Mangled += a.mangled
			switch {
			case a.records == 0 && expected && !l.invalid[k]:
				t.Missing++
				example("missing from "+t.Topic, k)
			case a.records > 1:
				t.Twice++
				example(fmt.Sprintf("%d times in %s", a.records, t.Topic), k)
			}
			continue
		}
		c := calls[k]
		t.Calls += c
		t.ExtraCalls += max(0, c-(a.done+a.dead+a.retrying))
		if a.done > 0 && c == 0 && !strings.HasPrefix(k, "outcomes:") {
			t.Uncalled++
			example("uncalled on "+route, k)
		}
	}
	return t
}

// waitedBeforeMove says that key's account on route is what its route
// default left waiting before its provider moved to routes (Options.Moved):
// calls and retrying, parked or held outcomes, none of which ends it.
func (s *System) waitedBeforeMove(key, route string, a *account) bool {
	p, _, _ := strings.Cut(key, ":")
	return route == headers.DefaultRoute && slices.Contains(s.moved, p) && (a == nil || a.done+a.dead+a.dlq == 0)
}
