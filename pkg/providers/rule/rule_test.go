package rule

import (
	"net/http"
	"testing"
)

func TestValue(t *testing.T) {
	ptr := MustJSON("/a/b")
	for _, tc := range []struct {
		name   string
		r      *Rule
		h      http.Header
		body   string
		strict bool
		want   string
		err    bool
	}{
		{"string", ptr, nil, `{"a":{"b":"x"}}`, true, "x", false},
		{"number", ptr, nil, `{"a":{"b":1.50}}`, true, "1.50", false},
		{"absent", ptr, nil, `{"a":{}}`, true, "", false},
		{"null", ptr, nil, `{"a":{"b":null}}`, true, "", false},
		{"object, strict", ptr, nil, `{"a":{"b":{}}}`, true, "", true},
		{"object, not strict", ptr, nil, `{"a":{"b":{}}}`, false, "", false},
		{"not JSON", ptr, nil, `a=b`, false, "", true},
		{"header", Header("x-id"), http.Header{"X-Id": {"7"}}, `a=b`, true, "7", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Value(tc.h, []byte(tc.body), tc.strict)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("Value = %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestNames(t *testing.T) {
	h, j := Header("x-id"), MustJSON("/a~1b")
	if h.String() != "header X-Id" || h.YAML() != "header: X-Id" || h.HeaderName() != "X-Id" {
		t.Errorf("header rule: %q %q %q", h.String(), h.YAML(), h.HeaderName())
	}
	if j.String() != "json /a~1b" || j.YAML() != "json: /a~1b" || j.HeaderName() != "" {
		t.Errorf("json rule: %q %q %q", j.String(), j.YAML(), j.HeaderName())
	}
	if _, err := JSON("a"); err == nil {
		t.Error("JSON(\"a\") succeeded")
	}
}
