package consume

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/processor/internal/deliver"
	"github.com/hookline/hookline/processor/internal/state"
)

// counterValue is a counter's value in reg (0 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	return 0
}

// Two processors with a standby each: each owns one of two partitions and
// keeps the other warm. When one stops, the other takes its partition and
// restores only what its last catch-up had not read, not the partition's
// whole changelog.
func TestStandbyTakesOverWarm(t *testing.T) {
	f := newFakeKafkaN(t, 2)
	h := &counter{}
	handlers := map[string]deliver.Handler{"fastpay": h}
	var st1, st2 *state.Store
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	health1, health2 := obs.NewHealth("restore", "control"), obs.NewHealth("restore", "control")
	stop1 := runProcessorWith(t, f, "p1", handlers, procOptions{standbys: 1, standbyEvery: 100 * time.Millisecond, store: &st1, metrics: reg1, health: health1})
	runProcessorWith(t, f, "p2", handlers, procOptions{standbys: 1, standbyEvery: 100 * time.Millisecond, store: &st2, metrics: reg2, health: health2})
	// Every key must be called once, and a partition revoked by a
	// rebalance drops what its owner called and did not commit: its next
	// owner calls it again (processor.md: a call abandoned by a rebalance
	// is made again). So the keys go in once the group is settled: both
	// processors were assigned a partition (both joined: with two
	// partitions nothing moves again until p1 stops) and both restored
	// what they own.
	waitFor(t, "p1 and p2 each assigned a partition and restored", func() bool {
		r1, _ := health1.Ready()
		r2, _ := health2.Ready()
		return r1 && r2 && counterValue(t, reg1, "hookline_processor_partitions_rebalanced_total") > 0 &&
			counterValue(t, reg2, "hookline_processor_partitions_rebalanced_total") > 0
	})

	var keys []string
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	f.produceKeyed(t, "fastpay", keys...)
	waitFor(t, "every key done once", func() bool { return allDoneOnce(f.outcomes(t), keys) })

	adm := kadm.NewClient(f.client(t))
	ends, err := adm.ListEndOffsets(context.Background(), f.names.Changelog)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	if len(want) != 2 || want[0] == 0 || want[1] == 0 {
		t.Fatalf("changelog ends %v, want records in both partitions", want)
	}
	// Both stores hold both partitions up to the changelog's end (committed
	// markers count as offsets, so a checkpoint may stop one short of the
	// end offset but no earlier).
	warm := func(st *state.Store) bool {
		cps, err := st.Checkpoints()
		if err != nil {
			t.Fatal(err)
		}
		for p, end := range want {
			if cps[p] < end-1 {
				return false
			}
		}
		return true
	}
	// p2's own partition restored too: its restore counter is added to
	// before the partition is ready, and its store holds the checkpoint
	// before that, so warm alone could see the counter short by that
	// restore. p2's readiness starts pending, so ready means every
	// partition it was given is restored and counted.
	restored := func() bool {
		ready, _ := health2.Ready()
		return ready
	}
	waitFor(t, "p2 restored what it owns and both stores warm on both partitions", func() bool {
		return restored() && warm(st1) && warm(st2)
	})

	before := counterValue(t, reg2, "hookline_processor_restore_records_total")
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	more := []string{"m1", "m2", "m3", "m4"}
	f.produceKeyed(t, "fastpay", more...)
	waitFor(t, "the new keys done once by p2", func() bool { return allDoneOnce(f.outcomes(t), append(keys, more...)) })
	read := counterValue(t, reg2, "hookline_processor_restore_records_total") - before
	if read > 10 {
		t.Fatalf("p2 read %v changelog records restoring p1's partition, want a few: it was a warm standby", read)
	}
	for _, k := range keys {
		if h.count(k) != 1 {
			t.Fatalf("%s called %d times", k, h.count(k))
		}
	}
}
