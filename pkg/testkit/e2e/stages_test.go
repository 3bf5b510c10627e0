package e2e_test

import (
	"flag"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The scenarios run in three stages (make test gives go test -parallel 32,
// E2E_FLAGS in the Makefile: more than the scenarios of stages 2 and 3):
//
//  1. Alone: a scenario that calls neither besideParallel nor quietParallel
//     runs by itself, in turn, before the others. The ones whose claims are
//     latencies under a load they make themselves stay here (the isolation,
//     priority and sibling-routes scenarios, the alert), and so does
//     TestIsolationKilledWithSlowCallsInFlight, whose two kills must fall
//     within a 30 s flow, each once a restarted processor has calls in
//     flight again.
//  2. Beside (besideParallel): scenarios whose claims are counts (lost 0,
//     doubled 0, calls per key, order per entity), bounds a kill, a
//     rebalance or a restart sets (calls in flight, one batch: not a time),
//     or waits of a minute or more, and which already allow for a loaded
//     machine (flows capped at four times their plan so that every kill
//     falls under flow however long a restart takes; settling for minutes),
//     each on its own topics, groups and services (the two on private
//     brokers on their own brokers too): at most besideSlots at once,
//     slowest first (besideOrder). Most of their time is spent waiting
//     (for a broker, a retry tier, a rate): the heaviest, every service
//     killed under 1,000 deliveries/s, used about 110 CPU seconds (its
//     processes and the shared broker) in a run of two minutes.
//  3. Quiet (quietParallel): the two scenarios whose claims are to the
//     second (a pause followed within a second, a drain within 10 % of its
//     rate, one probe per cool-down) run beside each other only, after
//     every scenario of stage 2 has ended and its brokers are gone.
//
// With fewer parallel slots than the stages need (plain go test gives
// GOMAXPROCS), a scenario of stage 2 runs in turn, as those of stage 1 do.

// besideSlots is how many stage-2 scenarios run at once.
const besideSlots = 3

// besideOrder is the order stage 2 starts its scenarios in, slowest first
// (bin/test-times), so that none is left running alone at the end; one not
// listed comes after these, in the order go test runs them.
var besideOrder = []string{
	"TestSIGKILLEveryService",
	"TestBrokerRestartsUnderFlow",
	"TestBrokerKilledInCluster",
	"TestDestinationMovedToRoutes",
	"TestMembersJoinAndLeaveUnderFlow",
	"TestRoutesUnderChaos",
	"TestRetriesDeadLettersAndReplay",
	"TestOrderedEntitiesKilled",
	"TestOrderingAddedUnderFlow",
	"TestTransformsUnderKills",
	"TestSteadyFlowSecureBroker",
	"TestSteadyFlowWithDuplicates",
	"TestGitHubCorpus",
	"TestOrderedEntities",
	"TestOrderedOnDead",
	"TestSecureWrongPasswordProcessorRetrier",
}

// quietScenarios counts the scenarios that called quietParallel: they hold
// a parallel slot while stage 2 runs.
var quietScenarios int

// beside admits stage 2's scenarios to its slots.
var beside = struct {
	mu         sync.Mutex
	cond       *sync.Cond
	registered []string        // every stage-2 scenario, in the order it called besideParallel
	waiting    map[string]bool // waiting for a slot
	admitted   map[string]bool // started (or ended)
	running    int
	ended      sync.WaitGroup // stage 2 over: quietParallel waits on it
}{waiting: map[string]bool{}, admitted: map[string]bool{}}

func init() { beside.cond = sync.NewCond(&beside.mu) }

// besideParallel puts the calling scenario in stage 2: it returns once the
// scenario has a slot beside at most besideSlots-1 others, all the
// scenarios ahead of it in besideOrder having started.
func besideParallel(t *testing.T) {
	t.Helper()
	if parallelSlots(t) < besideSlots+2 {
		return
	}
	name := t.Name()
	beside.mu.Lock()
	beside.registered = append(beside.registered, name)
	beside.mu.Unlock()
	beside.ended.Add(1)
	t.Cleanup(beside.ended.Done) // registered first, so run last: after the scenario's services and brokers are gone
	t.Parallel()

	start := time.Now()
	beside.mu.Lock()
	// Every scenario registered before any of them gets here (go test
	// starts the parallel ones once the others have ended). With a go test
	// slot for each, every one of them gets here and besideOrder holds.
	// With fewer, one waiting for go test's slot could hold up the rest:
	// then the first in besideOrder of those here goes first.
	all := parallelSlots(t) >= len(beside.registered)+quietScenarios
	beside.waiting[name] = true
	for beside.running >= besideSlots || !nextBeside(name, all) {
		beside.cond.Wait()
	}
	delete(beside.waiting, name)
	beside.running++
	beside.admitted[name] = true
	beside.cond.Broadcast()
	beside.mu.Unlock()
	t.Cleanup(func() { // before the one above, after the scenario's own
		beside.mu.Lock()
		beside.running--
		beside.cond.Broadcast()
		beside.mu.Unlock()
	})
	if waited := time.Since(start); waited > time.Second {
		// Part of this test's time in the report, not of its scenario.
		t.Logf("waited %s for a slot beside the other scenarios of its stage", waited.Round(100*time.Millisecond))
	}
}

// nextBeside reports whether name comes first, in besideOrder, of the
// stage-2 scenarios not yet admitted (all), or of those waiting for a slot
// (!all). beside.mu is held.
func nextBeside(name string, all bool) bool {
	rank := func(n string) int {
		if i := slices.Index(besideOrder, n); i >= 0 {
			return i
		}
		return len(besideOrder) + slices.Index(beside.registered, n)
	}
	for _, n := range beside.registered {
		ahead := !beside.admitted[n]
		if !all {
			ahead = beside.waiting[n]
		}
		if ahead && rank(n) < rank(name) {
			return false
		}
	}
	return true
}

// quietParallel is t.Parallel for a quiet scenario: it runs after every
// scenario of stage 2 (besideParallel) has ended, beside the other quiet
// one.
func quietParallel(t *testing.T) {
	t.Helper()
	beside.mu.Lock()
	quietScenarios++
	beside.mu.Unlock()
	t.Parallel()
	start := time.Now()
	beside.ended.Wait()
	if waited := time.Since(start); waited > time.Second {
		// Part of this test's time in the report, not of its scenario.
		t.Logf("waited %s for the scenarios beside each other", waited.Round(100*time.Millisecond))
	}
}

// parallelSlots is go test's -parallel (GOMAXPROCS by default).
func parallelSlots(t *testing.T) int {
	t.Helper()
	f := flag.Lookup("test.parallel")
	if f == nil {
		t.Fatal("no -test.parallel flag")
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil {
		t.Fatalf("-test.parallel=%s: %v", f.Value, err)
	}
	return n
}
