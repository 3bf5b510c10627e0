package control

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTrialReports: a trial report round-trips through its record; a
// reader counts it only while the route's setting is the auto-pause it was
// made under and its last trial answered.
func TestTrialReports(t *testing.T) {
	pause := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	answered := pause.Add(time.Minute)
	tr := Trial{Provider: "github", Route: "main", Pause: pause, Answering: true, Instance: "p1", At: answered}
	r, err := TrialRecord("webhooks.control", tr)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := DecodeTrial(r)
	if err != nil || !ok || got.Provider != tr.Provider || got.Route != tr.Route || !got.Pause.Equal(pause) || !got.Answering || !got.At.Equal(answered) {
		t.Fatalf("decoded %+v, %v, %v; want %+v", got, ok, err, tr)
	}
	if _, ok, _ := DecodeTrial(&kgo.Record{Key: []byte("route:github/main")}); ok {
		t.Fatal("a setting decoded as a trial report")
	}
	if _, ok, err := DecodeTrial(&kgo.Record{Key: []byte("trial:github")}); !ok || err == nil {
		t.Fatalf("trial:github: ok %v, err %v; want an error naming the key's form", ok, err)
	}
	if _, err := TrialRecord("webhooks.control", Trial{Provider: "github", Route: "main"}); err == nil {
		t.Fatal("a trial report without an instance was written")
	}
	ts := Trials{}
	ts.Apply(got)
	auto := Setting{Provider: "github", Route: "main", Paused: true, By: AutoPauseBy, At: pause}
	for _, tc := range []struct {
		what string
		s    Setting
		want bool
	}{
		{"the pause it was made under", auto, true},
		{"a later auto-pause", Setting{Provider: "github", Route: "main", Paused: true, By: AutoPauseBy, At: pause.Add(time.Hour)}, false},
		{"resumed", Setting{Provider: "github", Route: "main", At: pause.Add(time.Hour)}, false},
		{"an operator's pause", Setting{Provider: "github", Route: "main", Paused: true, By: "ops", At: pause}, false},
		{"another route", Setting{Provider: "github", Route: "other", Paused: true, By: AutoPauseBy, At: pause}, false},
	} {
		at, ok := ts.Answering(tc.s)
		if ok != tc.want || ok && !at.Equal(answered) {
			t.Errorf("%s: answering %v at %v, want %v at %v", tc.what, ok, at, tc.want, answered)
		}
	}
	failed := tr
	failed.Answering = false
	ts.Apply(failed)
	if _, ok := ts.Answering(auto); ok {
		t.Error("answering after a later trial failed")
	}
}
