package decide

import (
	"reflect"
	"testing"
)

// TestHoldsSequence follows one entity on the route crm through a head
// that fails twice: its later records are numbered as they are held and
// delivered in number order once it is done, whatever order their copies
// come back in; a record arriving while they drain is held behind them;
// the hold ends when the last is delivered.
func TestHoldsSequence(t *testing.T) {
	now := t0
	var h Holds
	// step checks one record and applies its result; it returns the
	// number it was held as (0: delivered).
	step := func(name, key string, seq int, wantHeld bool, w Where) int {
		t.Helper()
		e := h.Check("crm", key, seq)
		if (e != nil) != wantHeld {
			t.Fatalf("%s: Check(%s, seq %d) = %v, want held %v (holds %+v)", name, key, seq, e, wantHeld, h)
		}
		h = h.After("crm", key, seq, e != nil, w, now)
		if e != nil {
			return e.Seq
		}
		return 0
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
	step("e1 done", "k1", 0, false, Where{Ended: true})
	want("nothing held")
	step("e2 fails: the head", "k2", 0, false, Where{Tier: 1})
	want("head k2", Hold{Route: "crm", Head: "k2", Next: 1, Deliver: 1, Tier: 1, Since: now})
	s3 := step("e3 held", "k3", 0, true, Where{})
	s4 := step("e4 held", "k4", 0, true, Where{})
	if s3 != 1 || s4 != 2 {
		t.Fatalf("numbers %d, %d; want 1, 2", s3, s4)
	}
	want("two behind k2", Hold{Route: "crm", Head: "k2", Next: 3, Deliver: 1, Tier: 1, Since: now})
	step("k2 fails again", "k2", 0, false, Where{Tier: 2})
	if e := h.Check("crm", "k9", 0); e.Tier != 2 || e.Seq != 3 {
		t.Fatalf("a new record now: %+v, want number 3 in the head's tier 2", e)
	}
	step("k4 comes back first, k2 still waits: held again, same number", "k4", s4, true, Where{})
	want("not counted twice", Hold{Route: "crm", Head: "k2", Next: 3, Deliver: 1, Tier: 2, Since: now})
	step("k2 done", "k2", 0, false, Where{Ended: true})
	want("draining", Hold{Route: "crm", Next: 3, Deliver: 1, Tier: 2, Since: now})
	s5 := step("e5 new while draining: held as 3", "k5", 0, true, Where{})
	step("k4 back before k3: not its turn", "k4", s4, true, Where{})
	step("k3 back: its turn, done", "k3", s3, false, Where{Ended: true})
	step("k5 back before k4: not its turn", "k5", s5, true, Where{})
	step("k4 back: delivered, fails: the head", "k4", s4, false, Where{Tier: 1})
	want("k4 heads, k5 behind", Hold{Route: "crm", Head: "k4", Next: 4, Deliver: 3, Tier: 1, Since: now})
	step("k5 back before k4 ends: held", "k5", s5, true, Where{})
	step("k4 (its retry, no number) done", "k4", 0, false, Where{Ended: true})
	step("k5 back: delivered, done", "k5", s5, false, Where{Ended: true})
	want("free")
	// A dead head held by on_dead: hold, then replayed and done.
	step("k6 dead, held", "k6", 0, false, Where{Dead: true, Tier: 2})
	if e := h.Check("crm", "k7", 0); e.Tier != 1 {
		t.Fatalf("behind a dead head: %+v, want the first tier (look again soon)", e)
	}
	s7 := step("k7 held behind a dead head", "k7", 0, true, Where{})
	step("k7 comes back: still held", "k7", s7, true, Where{})
	step("k6 replayed, done", "k6", 0, false, Where{Ended: true})
	step("k7 delivered", "k7", s7, false, Where{Ended: true})
	want("free again")
}

// Holds of two routes are apart: a route free of holds delivers.
func TestHoldsPerRoute(t *testing.T) {
	h := Holds{}.After("crm", "k1", 0, false, Where{Tier: 1}, t0)
	if e := h.Check("billing", "k2", 0); e != nil {
		t.Fatalf("billing held by crm's hold: %v", e)
	}
	if e := h.Check("crm", "k2", 0); e == nil || e.Head != "k1" {
		t.Fatalf("crm: %v, want held behind k1", e)
	}
	h = h.After("billing", "k2", 0, false, Where{}, t0)
	if len(h) != 2 || h[0].Route != "billing" || h[1].Route != "crm" {
		t.Fatalf("holds %+v, want billing's and crm's in name order", h)
	}
}

func TestHoldsCodec(t *testing.T) {
	h := Holds{{Route: "crm", Head: "stripe:evt_3", Next: 18, Deliver: 1, Tier: 2, Since: t0}}
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

// A held record waits in a retry tier with its number, no attempt used;
// its outcome says held.
func TestStepHeld(t *testing.T) {
	pol := Policy{Schedule: mustSchedule(t, "1s,2s")}
	next, effects := Step(nil, retryAt(3), HeldBehind(&HeldError{Head: "k2", Seq: 4, Tier: 2}), pol)
	if next.Status != StatusRetrying || next.NextAttempt != 3 {
		t.Fatalf("held: state %s expecting %d, want retrying expecting 3 (no attempt used)", next.Status, next.NextAttempt)
	}
	want := []Effect{{Kind: ToChangelog}, {Kind: ToTier, Tier: 2, Attempt: 3, Held: 4}, {Kind: ToOutcomes, Status: StatusHeld, Tier: 2}}
	if !reflect.DeepEqual(effects, want) {
		t.Fatalf("effects %+v, want %+v", effects, want)
	}
	if ok, why := Admit(&next, retryAt(3)); !ok || why != WhyNextAttempt {
		t.Fatalf("the held copy back from its tier: Admit %v %s, want processed", ok, why)
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

// TestSplitEntityKey: an EntityKey splits back into its provider and
// entity (an entity may hold ':' and '/'); any other key does not.
func TestSplitEntityKey(t *testing.T) {
	if p, e, ok := SplitEntityKey(EntityKey("stripe", "cus_1:a/b")); !ok || p != "stripe" || e != "cus_1:a/b" {
		t.Errorf("split: %q %q %v", p, e, ok)
	}
	for _, k := range []string{"stripe:evt_1", "\x00e\x00stripe", "\x00e\x00\x00cus_1", ""} {
		if _, _, ok := SplitEntityKey(k); ok {
			t.Errorf("%q split as an entity key", k)
		}
	}
}
