package glob

import "testing"

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		glob, typ string
		want      bool
	}{
		{"invoice.paid", "invoice.paid", true},
		{"invoice.paid", "invoice.paid2", false},
		{"invoice.paid", "Invoice.paid", false},
		{"invoice.*", "invoice.paid", true},
		{"invoice.*", "invoice.", true},
		{"invoice.*", "invoice.payment.failed", true}, // dots included
		{"invoice.*", "invoice", false},
		{"invoice.*", "xinvoice.paid", false},
		{"*", "anything", true},
		{"*.succeeded", "payment_intent.succeeded", true},
		{"*.succeeded", "payment_intent.succeeded.x", false},
		{"*order*", "order.created", true},
		{"*order*", "app.order", true},
		{"*order*", "orde", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abcbc", true},
		{"a*b*c", "acb", false},
		{"a*a", "a", false}, // the two a's cannot be the same character
		{"a*a", "aa", true},
		{"ab*ba", "aba", false},
		{"BOOKING_*", "BOOKING_CREATED", true},
		{"a?c", "abc", false}, // only '*' is special
		{"a?c", "a?c", true},
		{"a.c", "abc", false},
	}
	for _, tc := range cases {
		g, err := Compile(tc.glob)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.glob, err)
		}
		if got := g.Match(tc.typ); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.glob, tc.typ, got, tc.want)
		}
	}
}

func TestMostSpecific(t *testing.T) {
	globs := []Glob{MustCompile("*"), MustCompile("orders/*"), MustCompile("orders/paid"), MustCompile("orders/p*"), MustCompile("o*s/*")}
	for _, tc := range []struct {
		eventType string
		want      int
	}{
		{"orders/paid", 2},    // literal
		{"orders/pending", 3}, // most characters besides '*'
		{"orders/create", 1},  // "orders/*": more characters than "o*s/*"
		{"items/x", 0},
		{"", 0}, // "*" alone
	} {
		if got := MostSpecific(globs, tc.eventType); got != tc.want {
			t.Errorf("MostSpecific(%q) = %d, want %d", tc.eventType, got, tc.want)
		}
	}
	if got := MostSpecific(globs[1:], "items/x"); got != -1 {
		t.Errorf("no match: %d, want -1", got)
	}
	if got := MostSpecific(globs[1:], ""); got != -1 {
		t.Errorf("empty type without *: %d, want -1", got)
	}
}
