package decide

import (
	"reflect"
	"testing"
	"time"
)

// TestHoldsSequence follows one entity on the route crm through a head
// that fails twice: its later records are held behind it, where it waits,
// and delivered in order once it is done; a new record arriving while
// they drain is held behind them; the hold ends when the last is done.
func TestHoldsSequence(t *testing.T) {
	now := t0
	due1, due2 := t0.Add(time.Second), t0.Add(3*time.Second)
	var h Holds
	step := func(name, key string, copy bool, wantHeld bool, w Where) {
		t.Helper()
		e := h.Check("crm", key, copy)
		if (e != nil) != wantHeld {
			t.Fatalf("%s: Check(%s, copy %v) = %v, want held %v (holds %+v)", name, key, copy, e, wantHeld, h)
		}
		h = h.After("crm", key, copy, e != nil, w, now)
	}
	want := func(name string, x ...Hold) {
		t.Helper()
		if len(x) == 0 && h == nil {
			return
		}
		if !reflect.DeepEqual(h, Holds(x)) {
			t.Fatalf("%s: holds %+v, want %+v", name, h, x)
		}
	}
	step("e1 done", "k1", false, false, Where{Ended: true})
	want("nothing held")
	step("e2 fails: the head", "k2", false, false, Where{Tier: 1, DueAt: due1})
	want("head k2", Hold{Route: "crm", Head: "k2", Tier: 1, DueAt: due1, Since: now})
	step("e3 held", "k3", false, true, Where{})
	step("e4 held", "k4", false, true, Where{})
	want("two behind k2", Hold{Route: "crm", Head: "k2", Outstanding: 2, Tier: 1, DueAt: due1, Since: now})
	step("k2 fails again", "k2", false, false, Where{Tier: 2, DueAt: due2})
	step("k3 comes back, k2 still waits: held again", "k3", true, true, Where{})
	want("k3 not counted twice", Hold{Route: "crm", Head: "k2", Outstanding: 2, Tier: 2, DueAt: due2, Since: now})
	step("k2 done", "k2", false, false, Where{Ended: true})
	want("draining", Hold{Route: "crm", Outstanding: 2, Tier: 2, DueAt: due2, Since: now})
	step("e5 new while draining: held", "k5", false, true, Where{})
	step("k3 back: delivered, done", "k3", true, false, Where{Ended: true})
	step("k4 back: delivered, fails: the head", "k4", true, false, Where{Tier: 1, DueAt: due1})
	want("k4 heads, k5 behind", Hold{Route: "crm", Head: "k4", Outstanding: 1, Tier: 1, DueAt: due1, Since: now})
	step("k5 back before k4 ends: held", "k5", true, true, Where{})
	step("k4 done", "k4", false, false, Where{Ended: true})
	step("k5 back: delivered, done", "k5", true, false, Where{Ended: true})
	want("free")
	// A dead head held by on_dead: hold, then replayed and done.
	step("k6 dead, held", "k6", false, false, Where{Dead: true, Tier: 2})
	step("k7 held behind a dead head", "k7", false, true, Where{})
	step("k7 comes back: still held", "k7", true, true, Where{})
	step("k6 replayed, done", "k6", false, false, Where{Ended: true})
	step("k7 delivered", "k7", true, false, Where{Ended: true})
	want("free again")
}

// Holds of two routes are apart: a route free of holds delivers.
func TestHoldsPerRoute(t *testing.T) {
	h := Holds{}.After("crm", "k1", false, false, Where{Tier: 1, DueAt: t0}, t0)
	if e := h.Check("billing", "k2", false); e != nil {
		t.Fatalf("billing held by crm's hold: %v", e)
	}
	if e := h.Check("crm", "k2", false); e == nil || e.Head != "k1" {
		t.Fatalf("crm: %v, want held behind k1", e)
	}
	h = h.After("billing", "k2", false, false, Where{}, t0)
	if len(h) != 2 || h[0].Route != "billing" || h[1].Route != "crm" {
		t.Fatalf("holds %+v, want billing's and crm's in name order", h)
	}
}

func TestHoldsCodec(t *testing.T) {
	h := Holds{{Route: "crm", Head: "stripe:evt_3", Outstanding: 17, Tier: 2, DueAt: t0, Since: t0}}
	b, err := EncodeHolds(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeHolds(b)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip: %+v %v, want %+v (%s)", got, err, h, b)
	}
	if b, _ := EncodeHolds(nil); b != nil {
		t.Fatalf("no holds encode as %q, want a tombstone", b)
	}
	if _, err := DecodeHolds([]byte(`{"v":2}`)); err == nil {
		t.Fatal("a key's state read as holds")
	}
	if !IsEntityKey(EntityKey("stripe", "cus_1")) || IsEntityKey("stripe:evt_1") {
		t.Fatal("IsEntityKey")
	}
}

// A held record waits where its head waits, with no attempt used: in the
// head's tier until the head's due time, or in the lane behind a parked
// head; its outcome says held.
func TestStepHeld(t *testing.T) {
	pol := Policy{Schedule: mustSchedule(t, "1s,2s")}
	due := t0.Add(2 * time.Second)
	behindTier := Held(&HeldError{Head: "k2", Hold: Hold{Route: "crm", Head: "k2", Tier: 2, DueAt: due}})
	next, effects := Step(nil, retryAt(3), behindTier, pol)
	if next.Status != StatusRetrying || next.NextAttempt != 3 {
		t.Fatalf("held in a tier: state %s expecting %d, want retrying expecting 3 (no attempt used)", next.Status, next.NextAttempt)
	}
	want := []Effect{{Kind: ToChangelog}, {Kind: ToTier, Tier: 2, Attempt: 3, DueAt: due, Held: true}, {Kind: ToOutcomes, Status: StatusHeld, Tier: 2}}
	if !reflect.DeepEqual(effects, want) {
		t.Fatalf("effects %+v, want %+v", effects, want)
	}
	if ok, why := Admit(&next, retryAt(3)); !ok || why != WhyNextAttempt {
		t.Fatalf("the held copy back from its tier: Admit %v %s, want processed", ok, why)
	}
	behindLane := Held(&HeldError{Head: "k2", Hold: Hold{Route: "crm", Head: "k2"}})
	next, effects = Step(nil, ingest, behindLane, pol)
	want = []Effect{{Kind: ToChangelog}, {Kind: ToLane, Held: true}, {Kind: ToOutcomes, Status: StatusHeld}}
	if next.Status != StatusParked || next.NextAttempt != 1 || !reflect.DeepEqual(effects, want) {
		t.Fatalf("held in the lane: %s expecting %d, %+v; want parked expecting 1, %+v", next.Status, next.NextAttempt, effects, want)
	}
	behindDead := Held(&HeldError{Head: "k2", Hold: Hold{Route: "crm", Head: "k2", Tier: 2, Dead: true}})
	if _, effects = Step(nil, ingest, behindDead, pol); effects[1].Kind != ToTier || effects[1].Tier != 2 || !effects[1].DueAt.IsZero() {
		t.Fatalf("held behind a dead head: %+v, want the last tier at its own delay", effects)
	}
}

// The restore takes an entity's holds from the changelog as they are.
func TestStoredFromChangelogHolds(t *testing.T) {
	v, _ := EncodeHolds(Holds{{Route: "crm", Head: "k2", Since: t0}})
	stored, exp, err := StoredFromChangelog(v)
	if err != nil || string(stored) != string(v) || !exp.IsZero() {
		t.Fatalf("StoredFromChangelog = %q, %v, %v; want the value, never expiring", stored, exp, err)
	}
	if _, _, err := StoredFromChangelog([]byte(`{"v":"holds","holds":7}`)); err == nil {
		t.Fatal("garbled holds restored")
	}
}
