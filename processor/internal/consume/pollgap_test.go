package consume

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/topics"
)

// During a poll gap every topic is paused; a lane paused or resumed
// meanwhile (pace, hold, a trial) keeps that state once the gap ends, and
// raw is read again. Outside a gap a lane's pause takes effect at once.
func TestPollGapKeepsLanePauses(t *testing.T) {
	names := topics.NewNames("t.", nil)
	a, b, c := names.Lane("a"), names.Lane("b"), names.Lane("c")
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{names.Raw: {}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := &setup{cfg: Config{Names: names}, laneNames: []string{a, b, c}}
	l := &reader{p: p, cl: cl, paused: map[string]bool{}, topics: append([]string{names.Raw}, p.laneTopics()...)}
	paused := func() []string {
		ts := cl.PauseFetchTopics() // no topic: only reports
		slices.Sort(ts)
		return ts
	}
	want := func(step string, ts ...string) {
		t.Helper()
		slices.Sort(ts)
		if got := paused(); !slices.Equal(got, ts) {
			t.Fatalf("%s: paused topics %v, want %v", step, got, ts)
		}
	}

	l.mu.Lock()
	l.pauseLane(a, true) // paused before the gap
	l.mu.Unlock()
	want("lane a paused", a)

	l.startGap()
	want("in the gap", names.Raw, a, b, c)
	l.mu.Lock()
	l.pauseLane(b, true)  // paused in the gap
	l.pauseLane(a, false) // resumed in the gap
	l.mu.Unlock()
	want("lanes paused and resumed in the gap", names.Raw, a, b, c)

	l.endGap()
	want("after the gap", b)
	l.endGap() // no gap: nothing changes
	want("a second endGap", b)

	l.mu.Lock()
	l.pauseLane(b, false)
	l.mu.Unlock()
	want("lane b resumed outside a gap")
}
