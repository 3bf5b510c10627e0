package decide

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestStoredRoundTrip: every state shape Apply produces survives the stored
// form unchanged, is much smaller than its JSON, and StoredFromChangelog
// gives the same bytes from the changelog's JSON (Encode's layout, read
// without encoding/json).
func TestStoredRoundTrip(t *testing.T) {
	for name, st := range appliedStates(t) {
		t.Run(name, func(t *testing.T) {
			b, err := EncodeStored(st)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeStored(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, st) {
				t.Errorf("round trip\n got %+v\nwant %+v", back, st)
			}
			j, err := Encode(st)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := scanEncoded(j); !ok {
				t.Errorf("Encode's output not read by the fast path: %s", j)
			}
			fromJSON, exp, err := StoredFromChangelog(j)
			if err != nil || string(fromJSON) != string(b) || !exp.Equal(st.ExpiresAt) {
				t.Errorf("StoredFromChangelog = %x, %v, %v; want %x, %v", fromJSON, exp, err, b, st.ExpiresAt)
			}
			if name != "full replay ids" && len(b)*4 > len(j) {
				t.Errorf("stored form %d bytes, JSON %d: want under a quarter", len(b), len(j))
			}
			// A store written before the stored form holds the JSON.
			old, err := DecodeStored(j)
			if err != nil || !reflect.DeepEqual(old, st) {
				t.Errorf("DecodeStored(JSON) = %+v, %v; want %+v", old, err, st)
			}
		})
	}
}

// TestStoredFromChangelogAgreesWithDecode: on the schema's examples, on
// values in another layout than Encode's and on every value Decode
// rejects, StoredFromChangelog accepts exactly what Decode accepts and
// stores the state Decode reads.
func TestStoredFromChangelogAgreesWithDecode(t *testing.T) {
	const times = `"first_seen_at":"2026-03-01T12:00:00.000Z","updated_at":"2026-03-01T12:00:00.000Z","expires_at":"2026-03-08T12:00:00.000Z"`
	docs := []string{
		`{"v":1,"status":"done","provider":"p",` + times + `}`,
		`{"status":"done","v":1,"provider":"p",` + times + `}`,                        // another order
		`{"v":1,"status":"done","provider":"p\u00e9",` + times + `}`,                  // an escape
		`{"v":1,"status":"done","provider":"p",` + times + `,"extra":true}`,           // unknown field
		`{"v":1,"status":"retrying","next_attempt":012,"provider":"p",` + times + `}`, // not JSON
		`{"v":1,"status":"retrying","next_attempt":3,"provider":"p",` + times + `}`,
		`{"v":1,"status":"dead","provider":"p",` + times + `,"replay_ids":[]}`,
		`{"v":1,"status":"dead","provider":"p",` + times + `,"replay_ids":["a","b"]}`,
		`{"v":1,"status":"done","provider":"p","first_seen_at":"2026-02-30T12:00:00.000Z","updated_at":"2026-03-01T12:00:00.000Z","expires_at":"2026-03-08T12:00:00.000Z"}`,
		`{"v":1,"status":"done","provider":"p","first_seen_at":"2026-03-01T12:00:00+01:00","updated_at":"2026-03-01T12:00:00.000Z","expires_at":"2026-03-08T12:00:00.000Z"}`,
		`{"v":1,"status":"done","provider":"p","first_seen_at":"2026-03-01T24:00:00.000Z","updated_at":"2026-03-01T12:00:00.000Z","expires_at":"2026-03-08T12:00:00.000Z"}`,
		`{"v":1,"status":"zombie","provider":"p",` + times + `}`,
		`{"v":1,"status":"done","next_attempt":3,"provider":"p",` + times + `}`,
		`{"v":1,"status":"done","provider":"",` + times + `}`,
		`{"v":2,"status":"done","provider":"p",` + times + `}`,
		`{"v":1,"status":"done","provider":"p",` + times,
		`done`,
	}
	files, _ := filepath.Glob("../../../schemas/examples/state/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), `{"v":"holds"`) { // an entity's holds: TestStoredFromChangelogHolds
			docs = append(docs, strings.TrimSpace(string(b)))
		}
	}
	for _, doc := range docs {
		want, werr := Decode([]byte(doc))
		stored, exp, err := StoredFromChangelog([]byte(doc))
		if (werr == nil) != (err == nil) {
			t.Errorf("%s: Decode error %v, StoredFromChangelog error %v", doc, werr, err)
			continue
		}
		if err != nil {
			continue
		}
		got, err := DecodeStored(stored)
		if err != nil {
			t.Errorf("%s: stored form unreadable: %v", doc, err)
			continue
		}
		if len(want.ReplayIDs) == 0 {
			want.ReplayIDs = nil // "replay_ids":[] and none are the same state
		}
		if !reflect.DeepEqual(got, want) || !exp.Equal(want.ExpiresAt) {
			t.Errorf("%s:\n got %+v (expiry %v)\nwant %+v", doc, got, exp, want)
		}
	}
}

func TestDecodeStoredRejects(t *testing.T) {
	good, err := EncodeStored(State{Status: StatusDead, Provider: "stripe", ReplayIDs: []string{"dlq:1:2"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"other version":  append([]byte{2}, good[1:]...),
		"unknown status": append([]byte{storedVersion, 9}, good[2:]...),
		"cut short":      good[:len(good)-1],
		"left over":      append(append([]byte(nil), good...), 0),
		"bad state":      {storedVersion, 2, 0, 1, 'p', 0, 0, 0, 0}, // retrying without next attempt
	} {
		if st, err := DecodeStored(b); err == nil {
			t.Errorf("%s: DecodeStored(%x) = %+v, want an error", name, b, st)
		}
	}
}
