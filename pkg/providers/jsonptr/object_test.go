package jsonptr

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// objectSeeds are bodies ParseObject must read as encoding/json does.
var objectSeeds = []string{
	`{"id":"evt_1","type":"invoice.paid"}`,
	` { "id" : "a" , "n" : -1.5e3 , "o" : {"x":[1,{"y":"}"}]} , "t":true, "f":false, "z":null } `,
	`{"a\"b":"c\\"d","\u0069d":"x","id":"last wins","id":"really"}`,
	`{"s":"with \"quotes\" and \\ and \n","arr":[[],{}],"e":{}}`,
	`{}`, `[]`, `null`, `"id"`, `1`, ``, `{`, `{"a":1,}`, `{"a" 1}`, `{"a":1} {}`, "{\"a\":\"\xff\"}",
}

// TestParseObject: ParseObject reads each seed as encoding/json does (the
// same members and values, or both refuse it); FuzzParseObject goes on
// from the seeds.
func TestParseObject(t *testing.T) {
	for _, s := range objectSeeds {
		checkObject(t, []byte(s))
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range objectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkObject(t, b) })
}

func checkObject(t *testing.T, b []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	wantOK := utf8.Valid(b) && json.Unmarshal(b, &want) == nil && want != nil
	got, err := ParseObject(b)
	if (err == nil) != wantOK {
		t.Fatalf("%q: ParseObject error %v; encoding/json ok %v", b, err, wantOK)
	}
	if !wantOK {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%q: %d members, encoding/json %d", b, len(got), len(want))
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("%q: member %q = %q, encoding/json %q", b, k, got[k], v)
		}
	}
}
