package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/providers"
)

func testBudget(records int64, classes bool) *Budget {
	b := &Budget{records: records, bytes: 1 << 20, classes: classes}
	for c := range b.gauge {
		b.gauge[c] = prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	}
	return b
}

// admitN holds and admits n records of class c, as a raw record the
// processor calls.
func admitN(t *testing.T, b *Budget, c providers.Priority, n int) {
	t.Helper()
	for range n {
		b.Hold(c, 10)
		if !b.Admit(c) {
			t.Fatalf("class %v refused at %d admitted", c, b.admitted[c])
		}
	}
}

func TestBudgetOneClassWaitsAtTheBound(t *testing.T) {
	b := testBudget(100, false)
	admitN(t, b, providers.PriorityLow, 99)
	if b.Full(0) {
		t.Fatal("full at 99 of 100")
	}
	admitN(t, b, providers.PriorityLow, 1)
	if !b.Full(0) {
		t.Fatal("not full at 100 of 100")
	}
	// One class: a record is never parked for its class's share.
	admitN(t, b, providers.PriorityLow, 50)
	b.Release(providers.PriorityLow, 10, true)
	if b.held[providers.PriorityLow] != 149 || b.body != 1490 {
		t.Fatalf("held %d bytes %d after a release, want 149 and 1490", b.held[providers.PriorityLow], b.body)
	}
}

func TestBudgetBounds(t *testing.T) {
	b := testBudget(100, true)
	for range 199 {
		b.Hold(providers.PriorityLow, 10)
	}
	if b.Full(0) {
		t.Fatal("several classes: full at 199 records, want the reader to read on to 200")
	}
	b.Hold(providers.PriorityCritical, 10)
	if !b.Full(0) {
		t.Fatal("not full at twice the budget")
	}
	b = testBudget(100, true)
	if !b.Full(SpanPerRecord * 100) {
		t.Fatal("not full at the span bound")
	}
	b.Hold(providers.PriorityNormal, 1<<20)
	if !b.Full(0) {
		t.Fatal("not full at the bytes bound")
	}
}

func TestBudgetShares(t *testing.T) {
	low, crit := providers.PriorityLow, providers.PriorityCritical

	// A class alone may use the whole budget, and no more.
	b := testBudget(100, true)
	admitN(t, b, low, 100)
	b.Hold(low, 10)
	if b.Admit(low) || b.Room(low) {
		t.Fatal("a class alone admitted past the budget")
	}
	if b.admitted[low] != 100 || b.held[low] != 101 {
		t.Fatalf("admitted %d held %d, want 100 and 101 (a refused record stays held until parked)", b.admitted[low], b.held[low])
	}

	// A critical record arrives while low has the budget: critical asks
	// 2×1+16 and gets it at once; low's share shrinks to the rest.
	admitN(t, b, crit, 1)
	if got := b.shares(); got[crit] != 18 || got[low] != 82 {
		t.Fatalf("shares %v, want critical 18 and low 82", got)
	}
	if b.Room(low) || !b.Room(crit) {
		t.Fatal("want low without room and critical with room")
	}
	// Low's admissions end as its calls return; at 81 it has room again.
	for range 19 {
		b.Release(low, 10, true)
	}
	if !b.Room(low) {
		t.Fatalf("low without room at %d admitted, share %d", b.admitted[low], b.shares()[low])
	}

	// Both flood: the budget is split 8:1, so low still moves.
	b = testBudget(90, true)
	b.admitted[low], b.admitted[crit] = 500, 500
	if got := b.shares(); got[crit] != 80 || got[low] != 10 {
		t.Fatalf("shares %v, want critical 80 and low 10", got)
	}

	// Three classes: normal asks little and gets it; high and low share
	// the rest 4:1.
	b = testBudget(120, true)
	b.admitted[providers.PriorityNormal], b.admitted[providers.PriorityHigh], b.admitted[low] = 2, 300, 300
	if got := b.shares(); got[providers.PriorityNormal] != 20 || got[providers.PriorityHigh] != 80 || got[low] != 20 {
		t.Fatalf("shares %v, want normal 20, high 80, low 20", got)
	}

	// A gated lane record is held and admitted together, or neither.
	b = testBudget(10, true)
	for range 10 {
		if !b.HoldAdmitted(low, 10) {
			t.Fatal("lane record refused under the budget")
		}
	}
	if b.HoldAdmitted(low, 10) || b.held[low] != 10 {
		t.Fatalf("lane record admitted past the budget (held %d)", b.held[low])
	}
}

// Held counts every class's records until each is released: the reader's
// pace sleeps only at zero.
func TestBudgetHeld(t *testing.T) {
	b := testBudget(100, true)
	if n := b.Held(); n != 0 {
		t.Fatalf("new budget holds %d", n)
	}
	b.Hold(providers.PriorityLow, 10)
	if !b.HoldAdmitted(providers.PriorityCritical, 10) {
		t.Fatal("critical refused in an empty budget")
	}
	if n := b.Held(); n != 2 {
		t.Fatalf("held %d after two holds, want 2", n)
	}
	b.Release(providers.PriorityLow, 10, false)
	b.Release(providers.PriorityCritical, 10, true)
	if n := b.Held(); n != 0 {
		t.Fatalf("held %d after releasing both, want 0", n)
	}
}
