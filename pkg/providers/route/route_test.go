package route

import (
	"encoding/json"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/glob"
)

func TestNumberEqual(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"1", "1", true},
		{"1", "1.0", true},
		{"1", "1e0", true},
		{"1", "10e-1", true},
		{"100", "1E2", true},
		{"100", "1e+2", true},
		{"0", "-0", true},
		{"0", "0.000e5", true},
		{"-1.5", "-15e-1", true},
		{"1", "-1", false},
		{"1", "1.0000000000000000000001", false},
		{"9007199254740993", "9007199254740992", false}, // beyond float64
		{"1e400", "10e399", true},
		{"1e99999999999999999999", "1e99999999999999999999", true}, // exponent out of range: by text
		{"1e99999999999999999999", "10e99999999999999999998", false},
	}
	for _, tc := range cases {
		if got := numberEqual(json.Number(tc.a), json.Number(tc.b)); got != tc.want {
			t.Errorf("numberEqual(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := numberEqual(json.Number(tc.b), json.Number(tc.a)); got != tc.want {
			t.Errorf("numberEqual(%s, %s) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestEventFilter(t *testing.T) {
	f, err := ParseEventFilter([]string{"invoice.*", "charge.refunded"})
	if err != nil {
		t.Fatal(err)
	}
	for ev, want := range map[string]bool{"invoice.paid": true, "charge.refunded": true, "charge.failed": false, "": false} {
		if got := f.Match(ev); got != want {
			t.Errorf("Match(%q) = %v, want %v", ev, got, want)
		}
	}
	if all := (EventFilter{}); !all.Match("") || !all.Match("x") {
		t.Error("the zero filter refused an event type")
	}
	if _, err := ParseEventFilter([]string{"a**"}); err == nil {
		t.Error("a** was accepted")
	}
}

// TestMatcher: globs and where must both hold; Unless takes back what any
// of its matchers takes (the otherwise route yields to every other route),
// and a body parsed for one matcher serves the next through the Doc.
func TestMatcher(t *testing.T) {
	globs := func(patterns ...string) []glob.Glob {
		var out []glob.Glob
		for _, p := range patterns {
			g, err := glob.Compile(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, g)
		}
		return out
	}
	where := func(src string) []Condition {
		var m map[string]yaml.Node
		if err := yaml.Unmarshal([]byte(src), &m); err != nil {
			t.Fatal(err)
		}
		conds, errs := ParseWhere(m)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return conds
	}
	invoices := Matcher{Globs: globs("invoice.*")}
	live := Matcher{Where: where(`{"/livemode": true}`)}
	refunds := Matcher{Globs: globs("charge.refunded"), Where: where(`{"/amount": 0}`)}
	otherwise := Matcher{Unless: []Matcher{invoices, live, refunds}}
	cases := []struct {
		name     string
		m        Matcher
		typ      string
		body     string
		want     bool
		wantElse bool // otherwise's answer for the same event
	}{
		{"zero matcher, any event", Matcher{}, "x", `not json`, true, true},
		{"zero matcher, no type", Matcher{}, "", ``, true, true},
		{"globs", invoices, "invoice.paid", `{}`, true, false},
		{"globs, other type", invoices, "charge.captured", `{}`, false, true},
		{"globs, no type", invoices, "", `{}`, false, true},
		{"where", live, "x", `{"livemode":true}`, true, false},
		{"where, not JSON", live, "x", `not json`, false, true},
		{"globs and where", refunds, "charge.refunded", `{"amount":0.0}`, true, false},
		{"globs without where", refunds, "charge.refunded", `{"amount":1}`, false, true},
		{"where without globs", refunds, "charge.captured", `{"amount":0}`, false, true},
		{"two of Unless match", otherwise, "invoice.paid", `{"livemode":true}`, false, false},
		{"Unless empty", Matcher{Unless: []Matcher{}}, "x", `{}`, true, true},
		{"own globs beside Unless", Matcher{Globs: globs("a.*"), Unless: []Matcher{invoices}}, "b.x", `{}`, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var doc Doc
			if got := tc.m.Match(Request{EventType: tc.typ, Body: []byte(tc.body)}, &doc); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
			if got := otherwise.Match(Request{EventType: tc.typ, Body: []byte(tc.body)}, &doc); got != tc.wantElse {
				t.Errorf("otherwise.Match on the same Doc = %v, want %v", got, tc.wantElse)
			}
		})
	}
}
