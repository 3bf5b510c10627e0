package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/e2e"
)

// restored reads the "partition restored" lines of a processor's log: the
// changelog records each restore read, in log order.
func restored(t *testing.T, log string) []int64 {
	t.Helper()
	var out []int64
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"partition restored"`) {
			continue
		}
		var l struct {
			Records int64 `json:"records"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("restore line %q: %v", line, err)
		}
		out = append(out, l.Records)
	}
	return out
}

// TestStandbyTakesOverAfterSIGKILL: two processors with
// HOOKLINE_STANDBY_REPLICAS=1 share six partitions, each keeping the
// other's warm. One is killed with SIGKILL; the other takes its three
// partitions and restores each from its standby checkpoint: a few records,
// not the ~500 of changelog each holds. Every key ends done once.
func TestStandbyTakesOverAfterSIGKILL(t *testing.T) {
	skipShort(t)
	const n = 3000
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	sys.StartIngest()
	env := map[string]string{"HOOKLINE_STANDBY_REPLICAS": "1", "HOOKLINE_SESSION_TIMEOUT": "6s"}
	p1 := sys.StartProcessor("p1", env)
	p2 := sys.StartProcessor("p2", env)
	outcomes := sys.Read(sys.Names.Outcomes)
	keys := postAll(t, sys, "evt_standby", n, 8)
	outcomes.Until(2*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool { return doneKeys(t, rs) >= n })
	time.Sleep(7 * time.Second) // a standby catch-up (every 5 s) after the last record

	before := len(restored(t, p1.Output()))
	p2.Kill(t)
	more := postAll(t, sys, "evt_standby_after", 300, 4)
	recs := outcomes.Until(2*time.Minute, "a done outcome for every key", func(rs []*kgo.Record) bool { return doneKeys(t, rs) >= n+300 })
	after := restored(t, p1.Output())[before:]
	if len(after) < 3 {
		t.Fatalf("p1 restored %d partitions after p2's kill, want p2's 3 (restores %v)", len(after), after)
	}
	var total int64
	for _, r := range after {
		total += r
	}
	t.Logf("p1's restores of p2's partitions after the kill read %v changelog records (each partition holds about %d)", after, n/6)
	if total > 100 {
		t.Errorf("p1 read %d changelog records taking over p2's partitions, want a few: it kept them warm as their standby", total)
	}
	done, _ := doneCount(t, recs)
	for _, k := range append(keys, more...) {
		if done[k] != 1 {
			t.Fatalf("%s has %d done outcomes, want 1", k, done[k])
		}
	}
}
