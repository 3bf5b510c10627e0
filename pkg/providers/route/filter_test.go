package route

import (
	"net/http"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// mustFilter parses a filter written as YAML.
func mustFilter(tb testing.TB, src string) *Filter {
	tb.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		tb.Fatalf("%s: %v", src, err)
	}
	f, errs := ParseFilter(&n)
	if len(errs) > 0 {
		tb.Fatalf("%s: %v", src, errs)
	}
	return f
}

// headerFunc reads h as a Request's Header does (case-insensitive).
func headerFunc(h map[string]string) func(string) (string, bool) {
	hh := http.Header{}
	for k, v := range h {
		hh.Set(k, v)
	}
	return func(name string) (string, bool) {
		vs := hh.Values(name)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
}

// TestFilterOperators is one table per operator: the filter, a body (and
// headers), and whether it holds.
func TestFilterOperators(t *testing.T) {
	type tcase struct {
		name, filter, body string
		hdr                map[string]string
		want               bool
	}
	ops := map[string][]tcase{
		"plain value": {
			{"string", `{body: {type: order/created}}`, `{"type":"order/created","id":1}`, nil, true},
			{"other string", `{body: {type: order/created}}`, `{"type":"order/paid"}`, nil, false},
			{"missing field", `{body: {type: x}}`, `{"id":1}`, nil, false},
			{"nested", `{body: {product: {inventory: 0}}}`, `{"product":{"title":"A","inventory":0}}`, nil, true},
			{"number by value", `{body: {n: 1}}`, `{"n":1.0}`, nil, true},
			{"number is not a numeric string", `{body: {n: 1}}`, `{"n":"1"}`, nil, false},
			{"numeric string is not a number", `{body: {n: "1"}}`, `{"n":1}`, nil, false},
			{"null matches null", `{body: {n: null}}`, `{"n":null}`, nil, true},
			{"null does not match missing", `{body: {n: null}}`, `{}`, nil, false},
			{"bool", `{body: {merged: true}}`, `{"merged":true}`, nil, true},
			{"array holds it", `{body: {tags: gift}}`, `{"tags":["gift","x"]}`, nil, true},
			{"array lacks it", `{body: {tags: gift}}`, `{"tags":["x"]}`, nil, false},
			{"object against array: one element", `{body: {items: {id: 456}}}`, `{"items":[{"id":1},{"id":456,"t":"a"}]}`, nil, true},
			{"object against array: fields on one element", `{body: {items: {id: 1, t: a}}}`, `{"items":[{"id":1,"t":"b"},{"id":2,"t":"a"}]}`, nil, false},
			{"root scalar", `{body: false}`, `false`, nil, true},
			{"pointer key", `{body: {"/a/b~1c": 1}}`, `{"a":{"b/c":1}}`, nil, true},
			{"pointer into array", `{body: {"/items/1/id": 2}}`, `{"items":[{"id":1},{"id":2}]}`, nil, true},
			{"body not JSON", `{body: {a: 1}}`, `not json`, nil, false},
		},
		"plain list": {
			{"contains all", `{body: {tags: [gift, something]}}`, `{"tags":["gift","something","another"]}`, nil, true},
			{"misses one", `{body: {tags: [gift, nope]}}`, `{"tags":["gift","something"]}`, nil, false},
			{"not an array", `{body: {tags: [gift]}}`, `{"tags":"gift"}`, nil, false},
			{"missing", `{body: {tags: [gift]}}`, `{}`, nil, false},
		},
		"$eq": {
			{"scalar", `{body: {a: {$eq: 5}}}`, `{"a":5}`, nil, true},
			{"scalar differs", `{body: {a: {$eq: 5}}}`, `{"a":6}`, nil, false},
			{"object deep", `{body: {a: {$eq: {x: 1}}}}`, `{"a":{"x":1}}`, nil, true},
			{"object deep is exact", `{body: {a: {$eq: {x: 1}}}}`, `{"a":{"x":1,"y":2}}`, nil, false},
			{"list deep is exact", `{body: {a: {$eq: [1, 2]}}}`, `{"a":[1,2,3]}`, nil, false},
			{"list deep", `{body: {a: {$eq: [1, 2]}}}`, `{"a":[1,2]}`, nil, true},
			{"missing", `{body: {a: {$eq: 5}}}`, `{}`, nil, false},
			{"null", `{body: {a: {$eq: null}}}`, `{"a":null}`, nil, true},
			{"array element", `{body: {a: {$eq: 5}}}`, `{"a":[4,5]}`, nil, true},
		},
		"$neq": {
			{"differs", `{body: {a: {$neq: created}}}`, `{"a":"paid"}`, nil, true},
			{"equal", `{body: {a: {$neq: created}}}`, `{"a":"created"}`, nil, false},
			{"missing holds", `{body: {a: {$neq: created}}}`, `{}`, nil, true},
			{"null vs value", `{body: {a: {$neq: null}}}`, `{"a":1}`, nil, true},
			{"null vs null", `{body: {a: {$neq: null}}}`, `{"a":null}`, nil, false},
			{"no array element equal", `{body: {a: {$neq: 5}}}`, `{"a":[4,6]}`, nil, true},
			{"an array element equal", `{body: {a: {$neq: 5}}}`, `{"a":[4,5]}`, nil, false},
			{"number vs numeric string", `{body: {a: {$neq: 5}}}`, `{"a":"5"}`, nil, true},
		},
		"$in": {
			{"in list", `{body: {a: {$in: [opened, reopened]}}}`, `{"a":"reopened"}`, nil, true},
			{"not in list", `{body: {a: {$in: [opened, reopened]}}}`, `{"a":"closed"}`, nil, false},
			{"numbers by value", `{body: {a: {$in: [1, 2]}}}`, `{"a":2.0}`, nil, true},
			{"array element in list", `{body: {a: {$in: [x, y]}}}`, `{"a":["z","y"]}`, nil, true},
			{"substring", `{body: {a: {$in: gift}}}`, `{"a":"a gift card"}`, nil, true},
			{"not a substring", `{body: {a: {$in: gift}}}`, `{"a":"card"}`, nil, false},
			{"string among elements", `{body: {a: {$in: gift}}}`, `{"a":["gift","x"]}`, nil, true},
			{"string is not a substring of elements", `{body: {a: {$in: gift}}}`, `{"a":["gifts"]}`, nil, false},
			{"missing", `{body: {a: {$in: [1]}}}`, `{}`, nil, false},
			{"null in list", `{body: {a: {$in: [null, 1]}}}`, `{"a":null}`, nil, true},
		},
		"$nin": {
			{"not in list", `{body: {a: {$nin: [opened]}}}`, `{"a":"closed"}`, nil, true},
			{"in list", `{body: {a: {$nin: [opened]}}}`, `{"a":"opened"}`, nil, false},
			{"missing holds", `{body: {a: {$nin: [opened]}}}`, `{}`, nil, true},
			{"substring", `{body: {a: {$nin: gift}}}`, `{"a":"a gift"}`, nil, false},
			{"array with one in list", `{body: {a: {$nin: [x]}}}`, `{"a":["x","y"]}`, nil, false},
		},
		"$gt": {
			{"greater", `{body: {a: {$gt: 10}}}`, `{"a":11}`, nil, true},
			{"equal", `{body: {a: {$gt: 10}}}`, `{"a":10}`, nil, false},
			{"float", `{body: {a: {$gt: 1.5}}}`, `{"a":1.50001}`, nil, true},
			{"numeric string in body", `{body: {a: {$gt: 10}}}`, `{"a":"11"}`, nil, false},
			{"missing", `{body: {a: {$gt: 10}}}`, `{}`, nil, false},
			{"null", `{body: {a: {$gt: 10}}}`, `{"a":null}`, nil, false},
			{"strings by bytes", `{body: {at: {$gt: "2024-01-01"}}}`, `{"at":"2024-06-01T00:00:00Z"}`, nil, true},
			{"string operand vs number", `{body: {a: {$gt: "1"}}}`, `{"a":2}`, nil, false},
			{"array element", `{body: {a: {$gt: 10}}}`, `{"a":[1,20]}`, nil, true},
		},
		"$gte": {
			{"equal", `{body: {a: {$gte: 10}}}`, `{"a":10.0}`, nil, true},
			{"less", `{body: {a: {$gte: 10}}}`, `{"a":9}`, nil, false},
			{"negative", `{body: {a: {$gte: -1}}}`, `{"a":-0.5}`, nil, true},
		},
		"$lt": {
			{"less", `{body: {a: {$lt: 10}}}`, `{"a":9}`, nil, true},
			{"equal", `{body: {a: {$lt: 10}}}`, `{"a":10}`, nil, false},
			{"bool", `{body: {a: {$lt: 10}}}`, `{"a":false}`, nil, false},
			{"strings", `{body: {a: {$lt: b}}}`, `{"a":"a"}`, nil, true},
		},
		"$lte": {
			{"equal", `{body: {a: {$lte: 10}}}`, `{"a":1e1}`, nil, true},
			{"greater", `{body: {a: {$lte: 10}}}`, `{"a":10.5}`, nil, false},
			{"range", `{body: {a: {$gte: 1, $lte: 2}}}`, `{"a":1.5}`, nil, true},
			{"out of range", `{body: {a: {$gte: 1, $lte: 2}}}`, `{"a":3}`, nil, false},
		},
		"$startsWith": {
			{"prefix", `{body: {ref: {$startsWith: refs/heads/}}}`, `{"ref":"refs/heads/main"}`, nil, true},
			{"not prefix", `{body: {ref: {$startsWith: refs/tags/}}}`, `{"ref":"refs/heads/main"}`, nil, false},
			{"number", `{body: {ref: {$startsWith: "1"}}}`, `{"ref":12}`, nil, false},
			{"missing", `{body: {ref: {$startsWith: a}}}`, `{}`, nil, false},
			{"array element", `{body: {refs: {$startsWith: b}}}`, `{"refs":["a","bc"]}`, nil, true},
		},
		"$endsWith": {
			{"suffix", `{body: {email: {$endsWith: "@example.com"}}}`, `{"email":"a@example.com"}`, nil, true},
			{"not suffix", `{body: {email: {$endsWith: "@example.com"}}}`, `{"email":"a@example.org"}`, nil, false},
			{"null", `{body: {email: {$endsWith: x}}}`, `{"email":null}`, nil, false},
		},
		"$exist": {
			{"present", `{body: {a: {$exist: true}}}`, `{"a":0}`, nil, true},
			{"null is present", `{body: {a: {$exist: true}}}`, `{"a":null}`, nil, true},
			{"absent", `{body: {a: {$exist: true}}}`, `{}`, nil, false},
			{"absent, false", `{body: {a: {$exist: false}}}`, `{}`, nil, true},
			{"present, false", `{body: {a: {$exist: false}}}`, `{"a":false}`, nil, false},
			{"parent missing, false", `{body: {a: {b: {$exist: false}}}}`, `{}`, nil, true},
			{"parent not an object, false", `{body: {a: {b: {$exist: false}}}}`, `{"a":3}`, nil, true},
		},
		"$or": {
			{"second holds", `{body: {$or: [{a: 1}, {b: 2}]}}`, `{"b":2}`, nil, true},
			{"none holds", `{body: {$or: [{a: 1}, {b: 2}]}}`, `{"a":2,"b":1}`, nil, false},
			{"on a field", `{body: {a: {$or: [{$lt: 0}, {$gt: 10}]}}}`, `{"a":11}`, nil, true},
			{"nested $and", `{body: {$or: [{$and: [{a: 1}, {b: 1}]}, {c: 1}]}}`, `{"a":1,"b":1}`, nil, true},
			{"nested $and fails", `{body: {$or: [{$and: [{a: 1}, {b: 1}]}, {c: 1}]}}`, `{"a":1,"b":2}`, nil, false},
		},
		"$and": {
			{"both", `{body: {$and: [{a: 1}, {b: {$gt: 1}}]}}`, `{"a":1,"b":2}`, nil, true},
			{"one fails", `{body: {$and: [{a: 1}, {b: {$gt: 1}}]}}`, `{"a":1,"b":0}`, nil, false},
			{"nested $or and $not", `{body: {$and: [{$or: [{a: 1}, {a: 2}]}, {$not: {b: 3}}]}}`, `{"a":2,"b":4}`, nil, true},
		},
		"$not": {
			{"negates", `{body: {$not: {a: 1}}}`, `{"a":2}`, nil, true},
			{"negated holds", `{body: {$not: {a: 1}}}`, `{"a":1}`, nil, false},
			{"missing", `{body: {a: {$not: {$eq: 1}}}}`, `{}`, nil, true},
			{"double", `{body: {$not: {$not: {a: 1}}}}`, `{"a":1}`, nil, true},
			{"not in $or", `{body: {$not: {$or: [{a: 1}, {a: 2}]}}}`, `{"a":3}`, nil, true},
		},
		"headers": {
			{"case-insensitive name", `{headers: {X-GitHub-Event: push}}`, `{}`, map[string]string{"x-github-event": "push"}, true},
			{"value is case-sensitive", `{headers: {x-github-event: Push}}`, `{}`, map[string]string{"X-Github-Event": "push"}, false},
			{"missing header", `{headers: {x-a: v}}`, `{}`, nil, false},
			{"missing header, $exist false", `{headers: {x-a: {$exist: false}}}`, `{}`, nil, true},
			{"number compares with numeric text", `{headers: {x-retry-num: 2}}`, `{}`, map[string]string{"X-Retry-Num": "2.0"}, true},
			{"number ordering with text", `{headers: {x-retry-num: {$gte: 2}}}`, `{}`, map[string]string{"X-Retry-Num": "10"}, true},
			{"number vs text that is no number", `{headers: {x-retry-num: {$gte: 2}}}`, `{}`, map[string]string{"X-Retry-Num": "many"}, false},
			{"$startsWith", `{headers: {user-agent: {$startsWith: GitHub-Hookshot/}}}`, `{}`, map[string]string{"User-Agent": "GitHub-Hookshot/abc"}, true},
			{"$or of headers", `{headers: {$or: [{x-a: "1"}, {x-b: "1"}]}}`, `{}`, map[string]string{"X-B": "1"}, true},
			{"$not of headers", `{headers: {$not: {x-a: "1"}}}`, `{}`, map[string]string{"X-A": "1"}, false},
			{"body and headers both", `{body: {a: 1}, headers: {x-a: "1"}}`, `{"a":1}`, map[string]string{"X-A": "1"}, true},
			{"body holds, headers fail", `{body: {a: 1}, headers: {x-a: "1"}}`, `{"a":1}`, map[string]string{"X-A": "2"}, false},
		},
	}
	for op, cases := range ops {
		for _, tc := range cases {
			t.Run(op+"/"+tc.name, func(t *testing.T) {
				f := mustFilter(t, tc.filter)
				req := Request{Body: []byte(tc.body), Header: headerFunc(tc.hdr)}
				var doc Doc
				got, at, _ := f.holds(req, &doc)
				if got != tc.want {
					t.Errorf("filter %s on %s %v = %v, want %v (decided at %v)", tc.filter, tc.body, tc.hdr, got, tc.want, at)
				}
			})
		}
	}
}

// TestFilterRefused: each mistake is refused with its line:column.
func TestFilterRefused(t *testing.T) {
	cases := []struct{ name, filter, want string }{
		{"unknown operator", "body:\n  a: {$equals: 1}", `line 2:7: body/a: unknown operator "$equals"`},
		{"unknown part", "query: {a: 1}", `line 1:1: unknown key "query": want body or headers`},
		{"not a mapping", "[1]", `want a mapping with body:, headers: or both`},
		{"$gt of a bool", "body: {a: {$gt: true}}", `line 1:17: body/a: $gt wants a number or a string`},
		{"$gt of a list", "body: {a: {$gt: [1]}}", `$gt wants a number or a string`},
		{"$startsWith of a number", "body: {a: {$startsWith: 1}}", `$startsWith wants a string (quote a number)`},
		{"$endsWith of a mapping", "body: {a: {$endsWith: {x: 1}}}", `$endsWith wants a string`},
		{"$exist of a string", "body: {a: {$exist: yes}}", `$exist wants true or false`},
		{"$in of a number", "body: {a: {$in: 3}}", `$in wants a list of values, or a string`},
		{"$nin of a mapping", "body: {a: {$nin: {x: 1}}}", `$nin wants a list of values, or a string`},
		{"$or of a mapping", "body: {$or: {a: 1}}", `$or wants a non-empty list of conditions`},
		{"$and empty", "body: {$and: []}", `$and wants a non-empty list of conditions`},
		{"bad pointer", "body: {\"/a~2\": 1}", `line 1:8: body: JSON pointer "/a~2": ~ must be followed by 0 or 1`},
		{"empty mapping", "body: {a: {}}", `body/a: empty mapping`},
		{"not JSON", "body: {a: .inf}", `.inf is not a number JSON can hold`},
		{"field below a header", "headers: {x-a: {b: 1}}", `headers/x-a: a header's value is text: no field "b" below it`},
		{"credential header", "headers: {Authorization: x}", `credential headers are never copied`},
		{"operator at the top of headers", "headers: {$eq: x}", `name a header first`},
		{"bad header name", "headers: {\"x a\": x}", `"x a" is not a header name`},
		{"nested unknown in $or", "body:\n  $or:\n    - {a: {$regex: x}}", `line 3:12: body/a: unknown operator "$regex"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tc.filter), &n); err != nil {
				t.Fatal(err)
			}
			f, errs := ParseFilter(&n)
			if f != nil || len(errs) == 0 {
				t.Fatalf("%s was accepted", tc.filter)
			}
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			if all := strings.Join(msgs, "\n"); !strings.Contains(all, tc.want) {
				t.Errorf("errors %q do not contain %q", all, tc.want)
			}
		})
	}
}

// TestFilterHeaderNames: the names a filter reads, lower-case, once each.
func TestFilterHeaderNames(t *testing.T) {
	f := mustFilter(t, `{headers: {X-A: "1", $or: [{x-b: "1"}, {X-A: "2"}]}}`)
	if got := strings.Join(f.HeaderNames(), ","); got != "x-a,x-b" {
		t.Errorf("HeaderNames = %s, want x-a,x-b", got)
	}
}

// TestExplain: the part that decided and, for a filter, the place.
func TestExplain(t *testing.T) {
	m := Matcher{Filter: mustFilter(t, "body:\n  pull_request:\n    merged: true\n    base: {ref: {$eq: main}}\n")}
	for _, g := range []string{"pull_request"} {
		gl, err := ParseEventFilter([]string{g})
		if err != nil {
			t.Fatal(err)
		}
		m.Globs = gl.globs
	}
	cases := []struct {
		name, typ, body string
		matched         bool
		by, at          string
	}{
		{"events refuse", "push", `{}`, false, ByEvents, ""},
		{"filter refuses at base.ref", "pull_request", `{"pull_request":{"merged":true,"base":{"ref":"dev"}}}`, false, ByFilter, "body/pull_request/base/ref $eq (line 4:18)"},
		{"filter refuses at merged", "pull_request", `{"pull_request":{"merged":false}}`, false, ByFilter, "body/pull_request/merged $eq (line 3:13)"},
		{"filter holds", "pull_request", `{"pull_request":{"merged":true,"base":{"ref":"main"}}}`, true, ByFilter, "body/pull_request/base/ref $eq (line 4:18)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var doc Doc
			v := m.Explain(Request{EventType: tc.typ, Body: []byte(tc.body)}, &doc)
			at := ""
			if v.At != nil {
				at = v.At.String()
			}
			if v.Matched != tc.matched || v.By != tc.by || at != tc.at {
				t.Errorf("Explain = %v by %s at %q, want %v by %s at %q", v.Matched, v.By, at, tc.matched, tc.by, tc.at)
			}
			if got := m.Match(Request{EventType: tc.typ, Body: []byte(tc.body)}, &Doc{}); got != v.Matched {
				t.Errorf("Match = %v, Explain %v", got, v.Matched)
			}
		})
	}
}
