// Package jsonptr reads JSON documents the way a providers file points into
// them: RFC 6901 JSON pointers (Parse, Pointer.Lookup over raw bytes,
// Pointer.Find over a Decode tree), a body's top-level members (Object) and
// the scalar text of a value (Scalar).
package jsonptr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pointer is an RFC 6901 JSON pointer as its unescaped reference tokens; the
// empty pointer refers to the whole document.
type Pointer []string

// Parse parses "" or "/a/b~1c/~0d": each token after a "/", with "~1"
// read as "/" and "~0" as "~" (in that order, so "~01" is "~1"). A "~" not
// followed by 0 or 1 is an error.
func Parse(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q must be empty or start with /", s)
	}
	tokens := strings.Split(s[1:], "/")
	for i, tok := range tokens {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", s)
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return Pointer(tokens), nil
}

// Lookup returns the raw JSON value p refers to in doc, and whether it
// exists. The error is for a doc that is not valid JSON. Cost: one parse of
// the document, then one of each nested value on the way down.
func (p Pointer) Lookup(doc []byte) (json.RawMessage, bool, error) {
	if !utf8.Valid(doc) {
		return nil, false, fmt.Errorf("body is not valid UTF-8 (JSON must be)")
	}
	cur := json.RawMessage(bytes.TrimSpace(doc))
	if len(p) == 0 || len(cur) == 0 || (cur[0] != '{' && cur[0] != '[') {
		// The first Unmarshal below validates an object or array; anything
		// else is checked here.
		if !json.Valid(cur) {
			return nil, false, fmt.Errorf("body is not valid JSON")
		}
	}
	for _, tok := range p {
		var (
			next  json.RawMessage
			found bool
		)
		switch {
		case len(cur) > 0 && cur[0] == '{':
			var m map[string]json.RawMessage
			if err := json.Unmarshal(cur, &m); err != nil {
				return nil, false, fmt.Errorf("body is not valid JSON")
			}
			next, found = m[tok]
		case len(cur) > 0 && cur[0] == '[':
			var a []json.RawMessage
			if err := json.Unmarshal(cur, &a); err != nil {
				return nil, false, fmt.Errorf("body is not valid JSON")
			}
			if i, ok := arrayIndex(tok); ok && i < len(a) {
				next, found = a[i], true
			}
		}
		if !found {
			return nil, false, nil
		}
		cur = next
	}
	return cur, true, nil
}

// arrayIndex reads an RFC 6901 array index: "0", or digits without a leading
// zero. "-" (past the end) is never found.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}

// plainString says whether raw is a JSON string literal whose value is its
// bytes between the quotes: no escape, no control character, valid UTF-8.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(raw)
}

// Scalar returns a JSON string's value or a number's literal text. ok is
// false for null, booleans, objects and arrays; isNull tells null apart.
//
// The results are not named: a result whose address is taken (the
// Unmarshal of an escaped string) is on the heap on every call, the plain
// string's too; 2 of the 8 allocations of a Stripe body's key and type.
func Scalar(raw json.RawMessage) (string, bool, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false, false
	}
	switch c := raw[0]; {
	case c == '"':
		if plainString(raw) {
			return string(raw[1 : len(raw)-1]), true, false
		}
		return unmarshalString(raw)
	case c == '-' || ('0' <= c && c <= '9'):
		return string(raw), true, false
	case c == 'n':
		return "", false, true
	}
	return "", false, false
}

// unmarshalString is Scalar of a string with escapes: encoding/json's
// unquoting.
func unmarshalString(raw json.RawMessage) (string, bool, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, false
	}
	return s, true, false
}

// Object is a JSON object's members, parsed once so that the presets can
// read several fields of a body for the price of one parse.
type Object map[string]json.RawMessage

// ParseObject parses body as a JSON object. A member named twice is the
// last one, as encoding/json has it. Each member's value is a slice of
// body, not a copy: body must not change while the Object is used. Cost:
// one validating pass over the body without allocation (valid.go) that
// also takes the top level's members, a map entry per top-level member
// (a second pass to find where each member ends was a third of the
// parse's CPU on a 1 KiB Stripe body).
func ParseObject(body []byte) (Object, error) {
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("body is not valid UTF-8 (JSON must be)")
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, errNotObject
	}
	v := validator{b: body, top: Object{}}
	if i, ok := v.value(i, 0); !ok || skipSpace(body, i) != len(body) {
		return nil, errNotObject
	}
	return v.top, nil
}

var errNotObject = fmt.Errorf("body is not a JSON object")

// skipSpace is the index of the first byte at or after i that is not JSON
// whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the value that starts at b[i], in valid
// JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// unquote is a JSON string's value; q is a whole string literal, quotes
// included, from valid JSON.
func unquote(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// Str follows member names down nested objects and returns the string or
// number found there, "" when absent or of another type.
//
// A top-level name is read without decoding anything: the nested walk
// (nested) decodes into a map whose address is taken, which put it on the
// heap on every call, top level or not.
func (o Object) Str(path ...string) string {
	if len(path) == 1 {
		s, _, _ := Scalar(o[path[0]])
		return s
	}
	return o.nested(path)
}

func (o Object) nested(path []string) string {
	cur := o
	for i, name := range path {
		raw, ok := cur[name]
		if !ok {
			return ""
		}
		if i == len(path)-1 {
			s, _, _ := Scalar(raw)
			return s
		}
		cur = nil
		if err := json.Unmarshal(raw, &cur); err != nil {
			return ""
		}
	}
	return ""
}

// Decode parses doc as one JSON value into a tree of map[string]any,
// []any, json.Number, string, bool and nil (numbers kept as written, so no
// precision is lost), as encoding/json's Decoder with UseNumber does (a
// member named twice is the last one). ok is false for a doc that is not
// valid UTF-8 or not exactly one JSON value. Cost: one validating pass
// (valid.go) and one pass building the tree; encoding/json's decode into
// any took about three times as long, and it is most of a schema check.
func Decode(doc []byte) (v any, ok bool) {
	return DecodeWith(doc, &anyTree)
}

// anyTree is Decode's Builder.
var anyTree = Builder[any]{
	Object: func() any { return map[string]any{} },
	Set:    func(obj any, k string, v any) { obj.(map[string]any)[k] = v },
	Array: func(items []any) any {
		if items == nil {
			return []any{}
		}
		return items
	},
	String: func(s string) any { return s },
	Number: func(raw []byte) any { return json.Number(raw) },
	Bool:   func(b bool) any { return b },
	Null:   func() any { return nil },
}

// A Builder makes a tree of values of its own kind from a JSON document
// as DecodeWith walks it: each object's members are Set in the document's
// order (a member named twice is Set twice), an array's items are given
// at once, a number as written.
type Builder[T any] struct {
	Object func() T
	Set    func(obj T, key string, v T)
	Array  func(items []T) T
	String func(s string) T
	Number func(raw []byte) T
	Bool   func(b bool) T
	Null   func() T
}

// DecodeWith is Decode with a tree of the Builder's own values; ok is
// false for a doc that is not valid UTF-8 or not exactly one JSON value.
func DecodeWith[T any](doc []byte, bd *Builder[T]) (v T, ok bool) {
	if !utf8.Valid(doc) || !valid(doc) {
		return v, false
	}
	v, _ = decodeValid(doc, skipSpace(doc, 0), bd)
	return v, true
}

// decodeValid decodes the value at b[i] of a valid document and returns
// the index just past it.
func decodeValid[T any](b []byte, i int, bd *Builder[T]) (T, int) {
	switch b[i] {
	case '{':
		m := bd.Object()
		for i = skipSpace(b, i+1); b[i] != '}'; {
			end := stringEnd(b, i)
			k, _ := unquote(b[i:end]) // valid: it unquotes
			var v T
			v, i = decodeValid(b, skipSpace(b, skipSpace(b, end)+1), bd)
			bd.Set(m, k, v)
			if i = skipSpace(b, i); b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return m, i + 1
	case '[':
		var a []T
		for i = skipSpace(b, i+1); b[i] != ']'; {
			var v T
			v, i = decodeValid(b, i, bd)
			a = append(a, v)
			if i = skipSpace(b, i); b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return bd.Array(a), i + 1
	case '"':
		end := stringEnd(b, i)
		s, _ := unquote(b[i:end])
		return bd.String(s), end
	case 't':
		return bd.Bool(true), i + 4
	case 'f':
		return bd.Bool(false), i + 5
	case 'n':
		return bd.Null(), i + 4
	}
	end := valueEnd(b, i)
	return bd.Number(b[i:end]), end
}

// Find returns the value p refers to in a tree Decode made, and whether
// it exists. Cost: one map lookup or slice index per token.
func (p Pointer) Find(v any) (any, bool) {
	for _, tok := range p {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}
