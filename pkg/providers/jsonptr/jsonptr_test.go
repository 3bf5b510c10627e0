package jsonptr

import "testing"

func TestJSONPointer(t *testing.T) {
	doc := []byte(`{"a/b":{"c~d":"escaped","~1":"tilde-one"},"":{"":"empty"},"items":[{"id":"i0"},{"id":"i1"}],"n":-1.5e3,"m~n":"x","01":"zero-one"}`)
	cases := []struct {
		ptr   string
		want  string
		found bool
	}{
		{"/a~1b/c~0d", "escaped", true},
		{"/a~1b/~01", "tilde-one", true}, // ~01 is ~1, not /
		{"/m~0n", "x", true},
		{"//", "empty", true},
		{"/items/1/id", "i1", true},
		{"/items/0/id", "i0", true},
		{"/items/2/id", "", false},
		{"/items/-", "", false},
		{"/items/01", "", false}, // leading zero is not an index
		{"/01", "zero-one", true},
		{"/n", "-1.5e3", true},
		{"/n/x", "", false},
		{"/missing", "", false},
		{"/a~1b/missing", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.ptr, func(t *testing.T) {
			p, err := Parse(tc.ptr)
			if err != nil {
				t.Fatal(err)
			}
			raw, found, err := p.Lookup(doc)
			if err != nil {
				t.Fatal(err)
			}
			got, _, _ := Scalar(raw)
			if found != tc.found || got != tc.want {
				t.Fatalf("lookup = %q, %v; want %q, %v", got, found, tc.want, tc.found)
			}
		})
	}
	t.Run("empty pointer is the whole document", func(t *testing.T) {
		raw, found, err := Pointer{}.Lookup([]byte(` "whole" `))
		if s, _, _ := Scalar(raw); err != nil || !found || s != "whole" {
			t.Fatalf("got %q %v %v", s, found, err)
		}
	})
	for _, bad := range []string{"a", "/~", "/~2", "/a~"} {
		t.Run("invalid "+bad, func(t *testing.T) {
			if _, err := Parse(bad); err == nil {
				t.Fatalf("Parse(%q) succeeded", bad)
			}
		})
	}
	for _, bad := range []string{``, `{`, `[1,`, `nul`, `{"a":1}x`} {
		t.Run("invalid document "+bad, func(t *testing.T) {
			for _, ptr := range []Pointer{{}, {"a"}} {
				if _, _, err := ptr.Lookup([]byte(bad)); err == nil {
					t.Fatalf("lookup(%v) over %q succeeded", ptr, bad)
				}
			}
		})
	}
}
