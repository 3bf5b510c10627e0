package transform

import (
	"testing"

	"github.com/dop251/goja"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

// TestBodyAsJSONParse holds the request's body (jsTree) to what goja's
// JSON.parse makes of the same text: the same JSON.stringify output (so
// member order, numbers and strings), and members named __proto__ kept as
// own properties. Over GitHub's published examples and edge cases.
func TestBodyAsJSONParse(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `null`, `true`, `"x"`, `0`, `-0`, `1.5e-7`, `12345678901234567890`,
		` {"a" : [1, 2.50, {"b": null}], "c": "\u00e9\ud83d\ude00\n\"q\""} `,
		`{"b": 1, "a": 2, "1": 3, "0": 4, "b": 5}`,
		`{"__proto__": {"polluted": true}, "x": 1}`,
		`[[[[]]], {"": ""}, "\/", false]`,
	}
	for _, ex := range corpus.GitHub(t) {
		docs = append(docs, string(ex.Body))
	}
	vm := goja.New()
	tree := jsTree(vm)
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	check, err := vm.RunString(`(function(a, b){
		const s = JSON.stringify;
		if (s(a) !== s(b)) return "JSON.stringify differs: " + s(a) + " against " + s(b);
		if (a !== null && typeof a === "object" && Object.prototype.hasOwnProperty.call(b, "__proto__") !== Object.prototype.hasOwnProperty.call(a, "__proto__")) return "__proto__ differs";
		if (a !== null && typeof a === "object" && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return "prototype differs";
		return "";
	})`)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := goja.AssertFunction(check)
	for i, doc := range docs {
		want, err := parse(goja.Undefined(), vm.ToValue(doc))
		if err != nil {
			t.Fatalf("doc %d: JSON.parse: %v", i, err)
		}
		got, ok := jsonptr.DecodeWith([]byte(doc), tree)
		if !ok {
			t.Fatalf("doc %d: not decoded: %.80s", i, doc)
		}
		why, err := same(goja.Undefined(), got, want)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if s := why.String(); s != "" {
			t.Errorf("doc %d (%.60s): %s", i, doc, s)
		}
	}
	// Past a double's range JSON.parse gives Infinity (ECMA-262); goja's
	// refuses it, so it is checked against the spec's value.
	if v, ok := jsonptr.DecodeWith([]byte(`[1e400, -1e400]`), tree); !ok || v.String() != "Infinity,-Infinity" {
		t.Errorf("[1e400, -1e400]: got %v (%v), want Infinity,-Infinity", v, ok)
	}
	if _, ok := jsonptr.DecodeWith([]byte(`{"a":`), tree); ok {
		t.Error(`{"a": decoded: want not JSON`)
	}
	t.Logf("%d documents built as JSON.parse builds them", len(docs))
}
