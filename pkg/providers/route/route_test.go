package route

import (
	"encoding/json"
	"testing"
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
