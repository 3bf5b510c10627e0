package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPlacementRecord: a placement round-trips through its record keyed
// placement:<provider>; the other kinds' decoders skip it; a key or value
// that does not agree is an error.
func TestPlacementRecord(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := Placement{Provider: "stripe", By: PlacedByEntity("json /data/object/customer"), Since: now, Acknowledged: &now}
	r, err := PlacementRecord("webhooks.control", p)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != "placement:stripe" {
		t.Fatalf("key %s", r.Key)
	}
	if _, ok, _ := Decode(r); ok {
		t.Error("Decode (the settings reader) took a placement")
	}
	if _, ok, _ := DecodeBreaker(r); ok {
		t.Error("DecodeBreaker took a placement")
	}
	if _, ok, _ := DecodeHeld(r); ok {
		t.Error("DecodeHeld took a placement")
	}
	got, ok, err := DecodePlacement(r)
	if err != nil || !ok || fmt.Sprint(got) != fmt.Sprint(p) || !got.Acknowledged.Equal(now) {
		t.Fatalf("DecodePlacement: %+v %v %v, want %+v", got, ok, err, p)
	}
	if _, ok, _ := DecodePlacement(&kgo.Record{Key: []byte("provider:stripe")}); ok {
		t.Error("DecodePlacement took a setting")
	}
	for _, bad := range []*kgo.Record{
		{Key: []byte("placement:github"), Value: r.Value},
		{Key: []byte("placement:stripe"), Value: []byte("{")},
		{Key: []byte("placement:stripe"), Value: []byte(`{"provider":"stripe","by":"hash"}`)},
	} {
		if _, ok, err := DecodePlacement(bad); !ok || err == nil {
			t.Errorf("DecodePlacement(%s=%s): ok %v err %v, want an error", bad.Key, bad.Value, ok, err)
		}
	}
	if _, err := PlacementRecord("t", Placement{Provider: "a:b", By: PlacedByKey}); err == nil {
		t.Error("a placement of provider a:b was taken")
	}
}

// TestReadPlacements: the last placement per provider up to the end, a
// tombstone forgetting one; an unreadable placement record is an error.
func TestReadPlacements(t *testing.T) {
	newClient, cl, ctx := fakeControl(t, "webhooks.control", "other.control")
	got, err := ReadPlacements(ctx, newClient, "webhooks.control")
	if err != nil || len(got) != 0 {
		t.Fatalf("an empty topic: %v %v, want no placement", got, err)
	}
	at := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	for _, p := range []Placement{
		{Provider: "stripe", By: PlacedByKey, Since: at},
		{Provider: "github", By: PlacedByKey, Since: at},
		{Provider: "stripe", By: PlacedByEntity("json /data/object/customer"), Since: at.Add(time.Hour)},
	} {
		if err := WritePlacement(ctx, cl, "webhooks.control", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(ctx, cl, "webhooks.control", Setting{Provider: "stripe", Paused: true, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "webhooks.control", Key: []byte("placement:github")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, err = ReadPlacements(ctx, newClient, "webhooks.control")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["stripe"].By != PlacedByEntity("json /data/object/customer") || !got["stripe"].Since.Equal(at.Add(time.Hour)) {
		t.Fatalf("placements %+v, want stripe's second only (github's forgotten)", got)
	}

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "other.control", Key: []byte("placement:stripe"), Value: []byte("{")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadPlacements(ctx, newClient, "other.control"); err == nil {
		t.Fatalf("an unreadable placement: %+v, want an error", got)
	}
}
