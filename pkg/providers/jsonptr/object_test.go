package jsonptr

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
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
	// Strings longer than the scan's eight-byte steps: escapes, a quote
	// and a control character past the first step, strings cut short.
	`{"pad":"xxxxxxxxxxxxxxxx\"yyyyyyy\\zzzzzzzzz\u0041wwwwwwwwwwww","id":"é long enough"}`,
	"{\"pad\":\"xxxxxxxxxxx\tyyyyyyyy\"}", "{\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxx", "{\"pad\":\"xxxxxxxxxxxxxxx\\",
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

// validSeeds are documents valid must judge as json.Valid does.
var validSeeds = []string{
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-1.25e10`, `.5`, `+1`,
	`"a"`, `"\u00e9\n\/"`, `"\x"`, `"\u12g4"`, "\"\x01\"", "\"\xff\"", `"unterminated`,
	`true`, `tru`, `false`, `null`, `nul`, `[]`, `[1,]`, `[,1]`, `[1 2]`, `{"a":}`, `{"a":1,"b":[true,{"c":null}]}`,
	` {} `, "\t[\n]\r", `{}x`, `{} {}`, `{"a" : 1 }`, `{1:2}`, `[[[[]]]]`, ``, ` `,
}

// TestValid: valid judges the seeds, and documents nested at and past
// encoding/json's bound, as json.Valid does.
func TestValid(t *testing.T) {
	seeds := append(append([]string(nil), validSeeds...), objectSeeds...)
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		seeds = append(seeds, strings.Repeat("[", depth)+strings.Repeat("]", depth))
	}
	for _, s := range seeds {
		if got, want := valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("valid(%.40q) = %v, json.Valid %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range append(append([]string(nil), validSeeds...), objectSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := valid(b), json.Valid(b); got != want {
			t.Fatalf("valid(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}

// decodeRef is Decode as encoding/json's Decoder reads a document.
func decodeRef(doc []byte) (v any, ok bool) {
	if !utf8.Valid(doc) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// TestDecode: Decode reads each seed as encoding/json's Decoder does;
// FuzzDecode goes on from them.
func TestDecode(t *testing.T) {
	for _, s := range append(append([]string(nil), validSeeds...), objectSeeds...) {
		checkDecode(t, []byte(s))
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range append(append([]string(nil), validSeeds...), objectSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, b) })
}

func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	got, ok := Decode(b)
	want, wantOK := decodeRef(b)
	if ok != wantOK || !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) = %#v, %v; encoding/json %#v, %v", b, got, ok, want, wantOK)
	}
}
