package keys

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/rule"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"p:1", true},
		{strings.Repeat("a", MaxLen), true},
		{"", false},
		{strings.Repeat("a", MaxLen+1), false},
		{"p:\xff", false},
		{"p:a\nb", false},
	} {
		if err := Check(tc.key); (err == nil) != tc.ok {
			t.Errorf("Check(%.20q) = %v, want ok %v", tc.key, err, tc.ok)
		}
	}
}

// TestCompose: values percent-encoded, a part for other event types left
// out, an optional part kept empty, a body-hash fallback, and every
// missing required part named.
func TestCompose(t *testing.T) {
	id := Part{Alts: []*rule.Rule{rule.MustJSON("/id")}}
	note := Part{Alts: []*rule.Rule{rule.Header("X-Note")}, Optional: true}
	end := Part{Alts: []*rule.Rule{rule.MustJSON("/end")}, Events: []glob.Glob{glob.MustCompile("call_ended")}}
	call := Part{Alts: []*rule.Rule{rule.MustJSON("/call")}, BodyHash: true}
	body := []byte(`{"id":"a:b%c","end":"9"}`)
	for _, tc := range []struct {
		name  string
		parts []Part
		typ   string
		h     http.Header
		want  string
		err   string
	}{
		{"escaped", []Part{id}, "", nil, "p:a%3Ab%25c", ""},
		{"optional absent keeps its place", []Part{id, note}, "", http.Header{}, "p:a%3Ab%25c:", ""},
		{"optional present", []Part{id, note}, "", http.Header{"X-Note": {"n"}}, "p:a%3Ab%25c:n", ""},
		{"part for other types left out", []Part{id, end}, "call_started", nil, "p:a%3Ab%25c", ""},
		{"part for this type", []Part{id, end}, "call_ended", nil, "p:a%3Ab%25c:9", ""},
		{"body hash fallback", []Part{call}, "", nil, "p:" + strings.ReplaceAll(BodyHash(body), ":", "%3A"), ""},
		{"missing parts named", []Part{call, {Alts: []*rule.Rule{rule.MustJSON("/x")}}, {Alts: []*rule.Rule{rule.MustJSON("/y")}}}, "", nil, "", "json /x, json /y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compose("p", tc.parts, tc.typ, tc.h, body)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Compose = %q, %v; want an error naming %s", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Compose = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCheckParts(t *testing.T) {
	typ := rule.MustJSON("/event")
	typePart := Part{Alts: []*rule.Rule{typ}}
	optional := Part{Alts: []*rule.Rule{rule.MustJSON("/a")}, Optional: true}
	byEvent := Part{Alts: []*rule.Rule{rule.MustJSON("/b")}, Events: []glob.Glob{glob.MustCompile("x")}}
	hashed := Part{Alts: []*rule.Rule{rule.MustJSON("/c")}, BodyHash: true}
	for _, tc := range []struct {
		name     string
		parts    []Part
		typeRule *rule.Rule
		ok       bool
	}{
		{"optional beside the type", []Part{typePart, optional}, typ, true},
		{"optional beside a body hash", []Part{hashed, optional}, nil, true},
		{"optional alone", []Part{optional}, nil, false},
		{"by event without event_type", []Part{byEvent}, nil, false},
		{"by event without the type as a part", []Part{hashed, byEvent}, typ, false},
		{"by event beside the type", []Part{typePart, byEvent}, typ, true},
		{"the same part twice", []Part{hashed, hashed}, nil, false},
	} {
		if err := CheckParts(tc.parts, tc.typeRule); (err == nil) != tc.ok {
			t.Errorf("%s: CheckParts = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
