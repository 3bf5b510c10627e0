package route

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Condition is one entry of a route's where: the value the JSON pointer
// refers to in the body must equal want (JSON equality).
type Condition struct {
	path    string // as written, for messages
	pointer jsonptr.Pointer
	want    any // a tree of jsonptr.Decode's shape
}

// Holds reports whether doc (jsonptr.Decode's tree of the body) has want at the
// pointer. A pointer that resolves to nothing does not hold. Cost: the
// pointer's walk and one comparison.
func (c Condition) Holds(doc any) bool {
	got, ok := c.pointer.Find(doc)
	return ok && jsonEqual(got, c.want)
}

// ParseWhere checks a route's where (JSON pointer -> YAML value) and turns
// it into conditions, in pointer order. Errors name the pointer.
func ParseWhere(where map[string]yaml.Node) ([]Condition, []error) {
	paths := make([]string, 0, len(where))
	for path := range where {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	var (
		conds []Condition
		errs  []error
	)
	for _, path := range paths {
		ptr, err := jsonptr.Parse(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("where: %w", err))
			continue
		}
		n := where[path]
		want, err := jsonValue(&n)
		if err != nil {
			errs = append(errs, fmt.Errorf("where: %q: %w", path, err))
			continue
		}
		conds = append(conds, Condition{path: path, pointer: ptr, want: want})
	}
	return conds, errs
}

// jsonValue turns a YAML value into the JSON value it writes, as a tree of
// jsonptr.Decode's shape: a number keeps its text when it is a JSON number
// (1.0 stays 1.0; jsonEqual compares by value), a timestamp or any other
// tagged scalar is its text as a string. What JSON cannot hold (.inf,
// .nan, a non-scalar mapping key, a key given twice) is an error.
func jsonValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return jsonValue(n.Content[0])
	case yaml.AliasNode:
		return jsonValue(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := jsonValue(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.AliasNode {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a mapping key must be a plain value (JSON object keys are strings)", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q given twice", k.Line, k.Value)
			}
			v, err := jsonValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, err
		}
		return b, nil
	case "!!int", "!!float":
		if isJSONNumber(n.Value) {
			return json.Number(n.Value), nil
		}
		var i int64
		if n.Decode(&i) == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%s is not a number JSON can hold", n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return n.Value, nil
}

// isJSONNumber reports whether s is a number as JSON writes it.
func isJSONNumber(s string) bool {
	return s != "" && (s[0] == '-' || ('0' <= s[0] && s[0] <= '9')) && json.Valid([]byte(s))
}

// jsonEqual is JSON equality of two trees of jsonptr.Decode's shape: numbers
// by value (1, 1.0 and 1e0 are equal), objects by their members whatever
// their order, arrays element by element. Cost: a walk of the smaller tree.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && numberEqual(a, bn)
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	}
	return false
}

// numberEqual compares two JSON numbers by value, exactly: each is brought
// to sign, significant digits and exponent, so neither precision nor a huge
// exponent is a problem.
func numberEqual(a, b json.Number) bool {
	an, ad, ae, aok := decimal(string(a))
	bn, bd, be, bok := decimal(string(b))
	if !aok || !bok {
		return a == b
	}
	return an == bn && ad == bd && ae == be
}

// decimal reads a JSON number as neg, digits (no leading or trailing zero)
// and exp, its value being ±digits×10^exp; zero is "" with neg false. ok is
// false for an exponent out of range.
func decimal(s string) (neg bool, digits string, exp int64, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 64)
		if err != nil || e > math.MaxInt64/2 || e < math.MinInt64/2 {
			return false, "", 0, false
		}
		mant, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	exp -= int64(len(frac))
	digits = strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return false, "", 0, true
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	return neg, trimmed, exp, true
}
