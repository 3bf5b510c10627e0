package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/schemas"
)

// appliedStates returns one state of each shape Step produces.
func appliedStates(t *testing.T) map[string]State {
	t.Helper()
	sched := retry.DefaultSchedule()
	boom := errors.New("boom")
	out := map[string]State{}
	pol := Policy{Schedule: sched, TTL: time.Hour}
	out["done"], _ = Step(nil, ingest, Answered(nil, 0), pol)
	out["retrying"], _ = Step(nil, ingest, Answered(boom, 0), pol)
	out["dead"], _ = Step(nil, retryAt(6), Answered(boom, 0), pol)
	dead := out["dead"]
	out["replayed"], _ = Step(&dead, replayOf("dlq:11:40213"), Answered(boom, 0), pol)
	out["parked"], _ = Step(&dead, replayOf("dlq:11:40214"), ParkedFor(boom), pol)
	full := State{Status: StatusDead, Provider: "stripe", FirstSeenAt: t0, UpdatedAt: t0, ExpiresAt: later}
	for i := range MaxReplayIDs {
		full.ReplayIDs = append(full.ReplayIDs, fmt.Sprintf("dlq:%d:%d", i%12, 1000+i))
	}
	out["full replay ids"] = full
	return out
}

// TestEncodeMatchesSchema validates what Encode writes against
// schemas/state.schema.json, and reads it back unchanged.
func TestEncodeMatchesSchema(t *testing.T) {
	for name, st := range appliedStates(t) {
		t.Run(name, func(t *testing.T) {
			b, err := Encode(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.Validate(schemas.State, b); err != nil {
				t.Errorf("%s\n%v", b, err)
			}
			back, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, st) {
				t.Errorf("round trip\n got %+v\nwant %+v", back, st)
			}
		})
	}
}

// TestDecodeExamples decodes every valid example of the state schema and
// encodes it again: Decode accepts what the schema accepts, and the result
// still validates.
func TestDecodeExamples(t *testing.T) {
	files, err := filepath.Glob("../../../schemas/examples/state/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no state examples found (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(string(b), `{"v":"holds"`) { // an entity's holds (holds.go)
				h, err := DecodeHolds(b)
				if err != nil {
					t.Fatal(err)
				}
				out, err := EncodeHolds(h)
				if err != nil {
					t.Fatal(err)
				}
				if err := schemas.Validate(schemas.State, out); err != nil {
					t.Error(err)
				}
				return
			}
			st, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Encode(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.Validate(schemas.State, out); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestEncodeGolden(t *testing.T) {
	st := State{
		Status: StatusRetrying, NextAttempt: 2, Provider: "stripe",
		FirstSeenAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		UpdatedAt:   time.Date(2026, 3, 1, 13, 0, 0, 5e6, time.FixedZone("CET", 3600)),
		ExpiresAt:   time.Date(2026, 3, 8, 12, 0, 0, 5e6+999, time.UTC),
		ReplayIDs:   []string{"dlq:0:7"},
	}
	const want = `{"v":1,"status":"retrying","next_attempt":2,"provider":"stripe","first_seen_at":"2026-03-01T12:00:00.000Z","updated_at":"2026-03-01T12:00:00.005Z","expires_at":"2026-03-08T12:00:00.005Z","replay_ids":["dlq:0:7"]}`
	b, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("Encode\n got %s\nwant %s", b, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	const times = `"first_seen_at":"2026-03-01T12:00:00.000Z","updated_at":"2026-03-01T12:00:00.000Z","expires_at":"2026-03-08T12:00:00.000Z"`
	tests := []struct {
		name, doc, want string
	}{
		{"unknown status", `{"v":1,"status":"zombie","provider":"p",` + times + `}`, `unknown status "zombie" (want done, retrying, parked or dead)`},
		{"missing status", `{"v":1,"provider":"p",` + times + `}`, `unknown status ""`},
		{"other version", `{"v":3,"status":"done","provider":"p",` + times + `}`, "version 3, want 1 or 2"},
		{"no version", `{"status":"done","provider":"p",` + times + `}`, "version 0, want 1 or 2"},
		{"version 2 without routes", `{"v":2,"status":"done","provider":"p",` + times + `}`, "version 2 without routes"},
		{"version 1 with routes", `{"v":1,"status":"done","provider":"p",` + times + `,"routes":[]}`, "version 1 with routes"},
		{"routes out of order", `{"v":2,"status":"done","provider":"p",` + times + `,"routes":[{"name":"b","status":"done","expires_at":"2026-03-01T12:00:00.000Z"},{"name":"a","status":"done","expires_at":"2026-03-01T12:00:00.000Z"}]}`, `"a" after "b"`},
		{"summary wrong", `{"v":2,"status":"done","provider":"p",` + times + `,"routes":[{"name":"a","status":"retrying","next_attempt":2,"expires_at":"2026-03-01T12:00:00.000Z"}]}`, "has status retrying"},
		{"bad route name", `{"v":2,"status":"done","provider":"p",` + times + `,"routes":[{"name":"A b","status":"done","expires_at":"2026-03-01T12:00:00.000Z"}]}`, "not a route name"},
		{"route retrying without attempt", `{"v":2,"status":"retrying","provider":"p",` + times + `,"routes":[{"name":"a","status":"retrying","expires_at":"2026-03-01T12:00:00.000Z"}]}`, "routes[0] (a): status retrying with next_attempt 0"},
		{"retrying without next attempt", `{"v":1,"status":"retrying","provider":"p",` + times + `}`, "status retrying with next_attempt 0"},
		{"done with next attempt", `{"v":1,"status":"done","next_attempt":3,"provider":"p",` + times + `}`, "status done with next_attempt 3"},
		{"empty provider", `{"v":1,"status":"done","provider":"",` + times + `}`, "provider is empty"},
		{"bad time", `{"v":1,"status":"done","provider":"p","first_seen_at":"yesterday","updated_at":"2026-03-01T12:00:00.000Z","expires_at":"2026-03-08T12:00:00.000Z"}`, "first_seen_at: parse time"},
		{"missing time", `{"v":1,"status":"done","provider":"p","first_seen_at":"2026-03-01T12:00:00.000Z","updated_at":"2026-03-01T12:00:00.000Z"}`, "expires_at: parse time"},
		{"wrong type", `{"v":1,"status":"done","provider":"p","next_attempt":"2",` + times + `}`, "decode state: json"},
		{"not JSON", `done`, "decode state:"},
		{"tombstone", ``, "decode state:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, st := range []State{
		{Status: "zombie", Provider: "p"},
		{Status: StatusRetrying, NextAttempt: 0, Provider: "p"},
		{Status: StatusDone, Provider: ""},
		{Status: StatusDead, Provider: "p", ReplayIDs: make([]string, MaxReplayIDs+1)},
	} {
		if b, err := Encode(st); err == nil {
			t.Errorf("Encode(%+v) = %s, want an error", st, b)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	now := time.Now()
	v, _ := Encode(State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: now, UpdatedAt: now, ExpiresAt: now, ReplayIDs: []string{"dlq:1:2"}})
	b.Run("Decode", func(b *testing.B) {
		for b.Loop() {
			_, _ = Decode(v)
		}
	})
	s, _ := EncodeStored(State{Status: StatusRetrying, NextAttempt: 2, Provider: "stripe", FirstSeenAt: now, UpdatedAt: now, ExpiresAt: now, ReplayIDs: []string{"dlq:1:2"}})
	b.Run("DecodeStored", func(b *testing.B) {
		for b.Loop() {
			_, _ = DecodeStored(s)
		}
	})
	b.Run("StoredFromChangelog", func(b *testing.B) {
		for b.Loop() {
			_, _, _ = StoredFromChangelog(v)
		}
	})
}

// marshalled is what json.Marshal writes for st: the form Encode appends
// without reflection.
func marshalled(t *testing.T, st State) []byte {
	t.Helper()
	j := stateJSON{V: stateVersion, Status: st.Status, NextAttempt: st.NextAttempt, Provider: st.Provider,
		FirstSeenAt: headers.FormatTime(st.FirstSeenAt), UpdatedAt: headers.FormatTime(st.UpdatedAt),
		ExpiresAt: headers.FormatTime(st.ExpiresAt), ReplayIDs: st.ReplayIDs}
	if st.Routes != nil {
		j.V = stateVersionRoutes
		routes := make([]routeJSON, len(st.Routes))
		for i, r := range st.Routes {
			routes[i] = routeJSON{Name: r.Name, Status: r.Status, NextAttempt: r.NextAttempt, ExpiresAt: headers.FormatTime(r.ExpiresAt), ReplayIDs: r.ReplayIDs}
		}
		j.Routes = &routes
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEncodeMatchesMarshal: Encode writes what json.Marshal writes of the
// changelog value, byte for byte: each applied state, states with routes
// (none, one, three, retrying and parked ones with replay ids), and
// strings that need escaping.
func TestEncodeMatchesMarshal(t *testing.T) {
	states := appliedStates(t)
	cet := time.FixedZone("CET", 3600)
	states["no routes"] = State{Status: StatusDone, Provider: "gen", FirstSeenAt: t0, UpdatedAt: t0, ExpiresAt: later, Routes: []RouteState{}}
	states["one route"] = State{Status: StatusDone, Provider: "gen", FirstSeenAt: t0, UpdatedAt: t0.In(cet), ExpiresAt: later,
		Routes: []RouteState{{Name: "r1", Status: StatusDone, ExpiresAt: later}}}
	states["three routes"] = State{Status: StatusParked, Provider: "gen", FirstSeenAt: t0, UpdatedAt: t0, ExpiresAt: later,
		Routes: []RouteState{
			{Name: "billing", Status: StatusDone, ExpiresAt: later, ReplayIDs: []string{"dlq:0:1"}},
			{Name: "crm", Status: StatusRetrying, NextAttempt: 3, ExpiresAt: later.In(cet)},
			{Name: "slack", Status: StatusParked, NextAttempt: 1, ExpiresAt: later, ReplayIDs: []string{"dlq:1:2", "dlq:<3>&\"4\"\\"}},
		}}
	states["escaped strings"] = State{Status: StatusDead, Provider: "p<&>\"ü\u2028\xff", FirstSeenAt: t0, UpdatedAt: t0, ExpiresAt: later,
		ReplayIDs: []string{"dlq:\n\t\x01", "ok"}}
	for name, st := range states {
		t.Run(name, func(t *testing.T) {
			got, err := Encode(st)
			if err != nil {
				t.Fatal(err)
			}
			if want := marshalled(t, st); string(got) != string(want) {
				t.Errorf("Encode\n got %s\nwant %s", got, want)
			}
		})
	}
}
