package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHeldReport: a report round-trips through its record keyed
// held:<partition>; one without routes is a tombstone and forgets the
// partition; the settings and breaker decoders skip it; a key or value
// that does not agree is an error.
func TestHeldReport(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	h := HeldReport{Partition: 7, Instance: "p1", At: now, Routes: []HeldRoute{{Provider: "acme", Route: "crm", Entities: 1, Waiting: 3,
		Oldest: []HeldEntity{{Entity: "cus_1", Head: "acme:1", Since: now.Add(-time.Hour), Waiting: 3, Tier: "1h"}}}}}
	r, err := HeldRecord("webhooks.control", h)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != "held:7" {
		t.Fatalf("key %s", r.Key)
	}
	if _, ok, _ := Decode(r); ok {
		t.Fatal("Decode (the settings reader) took a held report")
	}
	if _, ok, _ := DecodeBreaker(r); ok {
		t.Fatal("DecodeBreaker took a held report")
	}
	got, ok, err := DecodeHeld(r)
	if err != nil || !ok || fmt.Sprint(got) != fmt.Sprint(h) {
		t.Fatalf("DecodeHeld: %+v %v %v, want %+v", got, ok, err, h)
	}
	if _, ok, _ := DecodeHeld(&kgo.Record{Key: []byte("breaker:acme:p1")}); ok {
		t.Fatal("DecodeHeld took a breaker report")
	}
	for _, bad := range []*kgo.Record{
		{Key: []byte("held:x")},
		{Key: []byte("held:-1")},
		{Key: []byte("held:8"), Value: r.Value},
		{Key: []byte("held:7"), Value: []byte("{")},
	} {
		if _, ok, err := DecodeHeld(bad); !ok || err == nil {
			t.Errorf("DecodeHeld(%s=%s): ok %v err %v, want an error", bad.Key, bad.Value, ok, err)
		}
	}
	if _, err := HeldRecord("t", HeldReport{Partition: 1}); err == nil {
		t.Error("a report without an instance was taken")
	}

	hs := HeldReports{}
	hs.Apply(got)
	snap := hs.Clone()
	tomb, err := HeldRecord("webhooks.control", HeldReport{Partition: 7, Instance: "p2", At: now})
	if err != nil || tomb.Value != nil {
		t.Fatalf("a report without routes: %v, value %q, want a tombstone", err, tomb.Value)
	}
	tomb.Timestamp = now
	empty, ok, err := DecodeHeld(tomb)
	if err != nil || !ok || empty.Partition != 7 || len(empty.Routes) != 0 {
		t.Fatalf("tombstone: %+v %v %v", empty, ok, err)
	}
	hs.Apply(empty)
	if len(hs) != 0 || len(snap) != 1 {
		t.Fatalf("after the tombstone: %v (the clone %v), want none (the clone unchanged)", hs, snap)
	}
}

// TestHeldRoutes: the fresh reports of several partitions add up per
// provider and route (a route left empty is the route default), the
// oldest of all first, at most HeldTop; a stale report does not count.
func TestHeldRoutes(t *testing.T) {
	now := time.Now()
	ent := func(name string, age time.Duration) HeldEntity {
		return HeldEntity{Entity: name, Head: "k-" + name, Since: now.Add(-age), Waiting: 1}
	}
	hs := HeldReports{}
	hs.Apply(HeldReport{Partition: 0, Instance: "p1", At: now, Routes: []HeldRoute{
		{Provider: "acme", Route: "crm", Entities: 4, Waiting: 9, Oldest: []HeldEntity{ent("a", 50*time.Minute), ent("b", 40*time.Minute), ent("c", 3*time.Minute), ent("d", time.Minute)}},
		{Provider: "acme", Entities: 1, Waiting: 1, Oldest: []HeldEntity{ent("x", time.Minute)}},
	}})
	hs.Apply(HeldReport{Partition: 1, Instance: "p2", At: now.Add(-time.Minute), Routes: []HeldRoute{
		{Provider: "acme", Route: "crm", Entities: 3, Waiting: 3, Oldest: []HeldEntity{ent("e", time.Hour), ent("f", 45*time.Minute), ent("g", 2*time.Minute)}},
		{Provider: "acme", Route: "default", Entities: 1, Waiting: 2, Oldest: []HeldEntity{ent("y", 2*time.Minute)}},
	}})
	hs.Apply(HeldReport{Partition: 2, Instance: "p3", At: now.Add(-HeldStale), Routes: []HeldRoute{
		{Provider: "acme", Route: "crm", Entities: 1, Waiting: 1, Oldest: []HeldEntity{ent("stale", 2*time.Hour)}},
	}})
	rs := hs.Routes(now)
	var got []string
	for _, r := range rs {
		s := fmt.Sprintf("%s/%s %d %d", r.Provider, r.Route, r.Entities, r.Waiting)
		for _, e := range r.Oldest {
			s += " " + e.Entity
		}
		got = append(got, s)
	}
	if want := []string{"acme/crm 7 12 e a f b c", "acme/default 2 3 y x"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("routes %q, want %q", got, want)
	}
}
