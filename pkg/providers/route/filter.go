package route

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Filter is a route's filter: conditions on the JSON body and on the
// request headers in the operator syntax of Hookdeck's and Outpost's
// filters ($eq, $neq, $in, $nin, $gt, $gte, $lt, $lte, $startsWith,
// $endsWith, $exist, $or, $and, $not). docs/providers.md states the
// semantics. A Filter is never changed once parsed, so it is safe for
// concurrent use.
type Filter struct {
	body    *cond // nil: no condition on the body
	headers *cond // nil: none on the headers
	names   []string
}

// HeaderNames are the lower-case names of the request headers the filter
// reads: ingest must copy them with the record for the processor to see
// them. Cost: none; never modify the slice.
func (f *Filter) HeaderNames() []string { return f.names }

// Place is where a filter's condition sits: in the body or the headers,
// at which JSON pointer (a header's name for the headers), which operator
// ("$eq" for a plain value, "contains" for a plain list, "{}" for an
// object of fields) and its line and column in the providers file.
type Place struct {
	Part   string `json:"part"` // "body" or "headers"
	Path   string `json:"path"` // a JSON pointer into the body, or "/" + a header's name; "" for the whole body
	Op     string `json:"op"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// String is "body/pull_request/merged $eq (line 14:22)".
func (p Place) String() string {
	return fmt.Sprintf("%s%s %s (line %d:%d)", p.Part, p.Path, p.Op, p.Line, p.Column)
}

// kind is a condition's operator.
type kind uint8

const (
	kValue   kind = iota // a plain scalar, or $eq of one: equal, or an array with an equal element
	kDeep                // $eq of an object or a list: deep equality
	kNeq                 // $neq: not subs[0] ($eq)
	kContain             // a plain list: an array holding a match for every element
	kObject              // a mapping: every field's condition and every operator hold
	kIn                  // $in of a list (membership) or of a string (substring, or an element)
	kNin                 // $nin: not subs[0] ($in)
	kGt
	kGte
	kLt
	kLte
	kStarts
	kEnds
	kExist
	kOr
	kAnd
	kNot
)

// cond is one compiled condition, applied to the value at its place.
type cond struct {
	Place
	kind   kind
	text   bool // a header's value: a number operand compares with numeric text
	want   any  // kValue, kDeep, kIn (list), kExist (bool)
	num    float64
	isNum  bool   // ordering: compare as numbers, else as strings
	str    string // ordering, $startsWith, $endsWith, $in of a string
	fields []field
	subs   []*cond
}

// field is one field of a mapping: its pointer from the mapping's place,
// and the condition on what it finds.
type field struct {
	name string // a header's lower-case name (headers), else the key as written
	ptr  jsonptr.Pointer
	c    *cond
}

// headerDoc is the document a headers filter reads: its fields are looked
// up among the request's headers.
type headerDoc struct{}

// holds reports whether the filter holds for the request, and the
// condition that decided: the first that failed, or the last that held.
// doc parses the body at most once for every route. Cost: one parse of
// the body per doc when the filter has a body part; a walk of the filter.
func (f *Filter) holds(req Request, doc *Doc) (bool, *Place, bool) {
	var at *Place
	if f.body != nil {
		v, ok := doc.get(req.Body)
		if !ok {
			return false, &f.body.Place, false
		}
		h, c := f.body.eval(v, true, req.Header)
		if at = &c.Place; !h {
			return false, at, true
		}
	}
	if f.headers != nil {
		h, c := f.headers.eval(headerDoc{}, true, req.Header)
		if at = &c.Place; !h {
			return false, at, true
		}
	}
	return true, at, true
}

// eval applies c to v (ok false: there is no value at c's place). It
// returns whether c holds and the condition that decided.
func (c *cond) eval(v any, ok bool, hdr func(string) (string, bool)) (bool, *cond) {
	switch c.kind {
	case kObject:
		if arr, isArr := v.([]any); ok && isArr && len(c.fields) > 0 {
			at := c
			for i, e := range arr { // a mapping of fields matches any one element
				h, a := c.evalObject(e, true, hdr)
				if h {
					return true, a
				}
				if i == 0 {
					at = a
				}
			}
			return false, at
		}
		return c.evalObject(v, ok, hdr)
	case kDeep:
		return ok && jsonEqual(v, c.want), c
	case kNeq, kNin:
		h, _ := c.subs[0].eval(v, ok, hdr)
		return !h, c
	case kNot:
		h, at := c.subs[0].eval(v, ok, hdr)
		return !h, at
	case kExist:
		return ok == c.want.(bool), c
	case kContain:
		arr, isArr := v.([]any)
		if !ok || !isArr {
			return false, c
		}
		for _, s := range c.subs {
			found := false
			for _, e := range arr {
				if h, _ := s.eval(e, true, hdr); h {
					found = true
					break
				}
			}
			if !found {
				return false, s
			}
		}
		return true, c
	case kOr:
		var at *cond
		for _, s := range c.subs {
			h, a := s.eval(v, ok, hdr)
			if h {
				return true, a
			}
			if at == nil {
				at = a
			}
		}
		return false, at
	case kAnd:
		return allHold(c.subs, v, ok, hdr, c)
	}
	// The scalar operators: on an array, any element.
	if !ok {
		return false, c
	}
	if arr, isArr := v.([]any); isArr {
		if c.kind == kIn && c.want == nil { // $in of a string: an element equal to it
			for _, e := range arr {
				if s, isStr := e.(string); isStr && s == c.str {
					return true, c
				}
			}
			return false, c
		}
		for _, e := range arr {
			if c.scalar(e) {
				return true, c
			}
		}
		return false, c
	}
	return c.scalar(v), c
}

// evalObject is a mapping applied to one value: every field, then every
// operator.
func (c *cond) evalObject(v any, ok bool, hdr func(string) (string, bool)) (bool, *cond) {
	at := c
	for i := range c.fields {
		f := &c.fields[i]
		fv, fok := f.lookup(v, ok, hdr)
		h, a := f.c.eval(fv, fok, hdr)
		if !h {
			return false, a
		}
		at = a
	}
	return allHold(c.subs, v, ok, hdr, at)
}

// allHold applies every condition of subs to v: the first that fails
// decides, else the last (at when there is none).
func allHold(subs []*cond, v any, ok bool, hdr func(string) (string, bool), at *cond) (bool, *cond) {
	for _, s := range subs {
		h, a := s.eval(v, ok, hdr)
		if !h {
			return false, a
		}
		at = a
	}
	return true, at
}

// lookup finds the field in v: a header of the request when v is the
// headers, else the value at its pointer.
func (f *field) lookup(v any, ok bool, hdr func(string) (string, bool)) (any, bool) {
	if !ok {
		return nil, false
	}
	if _, isHeaders := v.(headerDoc); isHeaders {
		if hdr == nil {
			return nil, false
		}
		s, found := hdr(f.name)
		return s, found
	}
	return f.ptr.Find(v)
}

// scalar applies a scalar operator to one value (an array's element).
func (c *cond) scalar(v any) bool {
	switch c.kind {
	case kValue:
		return c.equal(v, c.want)
	case kIn:
		if list, isList := c.want.([]any); isList {
			for _, w := range list {
				if c.equal(v, w) {
					return true
				}
			}
			return false
		}
		s, isStr := v.(string)
		return isStr && strings.Contains(s, c.str)
	case kStarts, kEnds:
		s, isStr := v.(string)
		if !isStr {
			return false
		}
		if c.kind == kStarts {
			return strings.HasPrefix(s, c.str)
		}
		return strings.HasSuffix(s, c.str)
	}
	// ordering
	var cmp int
	if c.isNum {
		n, isNum := c.number(v)
		if !isNum {
			return false
		}
		switch {
		case n < c.num:
			cmp = -1
		case n > c.num:
			cmp = 1
		}
	} else {
		s, isStr := v.(string)
		if !isStr {
			return false
		}
		cmp = strings.Compare(s, c.str)
	}
	switch c.kind {
	case kGt:
		return cmp > 0
	case kGte:
		return cmp >= 0
	case kLt:
		return cmp < 0
	}
	return cmp <= 0 // kLte
}

// equal is JSON equality, and for a header (text) a number operand equal
// to the header's text read as a number.
func (c *cond) equal(v, want any) bool {
	if s, isStr := v.(string); isStr && c.text {
		if n, isNum := want.(json.Number); isNum {
			return isJSONNumber(s) && numberEqual(json.Number(s), n)
		}
	}
	return jsonEqual(v, want)
}

// number reads v as a number: a JSON number, or a header's numeric text.
func (c *cond) number(v any) (float64, bool) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = string(v)
	case string:
		if !c.text || !isJSONNumber(v) {
			return 0, false
		}
		s = v
	default:
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// ParseFilter checks a route's filter: a mapping with body, headers or
// both, and compiles it. Each error gives the line and column of the
// place in the file, the place in the body or headers, and what is wrong.
func ParseFilter(n *yaml.Node) (*Filter, []error) {
	n = resolve(n)
	p := &filterParser{}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		p.fail(n, "", "want a mapping with body:, headers: or both")
		return nil, p.errs
	}
	f := &Filter{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		switch k.Value {
		case "body":
			f.body = p.value(v, Place{Part: "body"}, false)
		case "headers":
			f.headers = p.headers(v, Place{Part: "headers"})
		default:
			p.fail(k, "", fmt.Sprintf("unknown key %q: want body or headers", k.Value))
		}
	}
	f.names = p.names
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return f, nil
}

// filterParser gathers a filter's errors and the header names it reads.
type filterParser struct {
	errs  []error
	names []string
}

func (p *filterParser) fail(n *yaml.Node, place, msg string) {
	if place != "" {
		place += ": "
	}
	p.errs = append(p.errs, fmt.Errorf("line %d:%d: %s%s", n.Line, n.Column, place, msg))
}

// resolve follows an alias.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode || (n.Kind == yaml.DocumentNode && len(n.Content) == 1) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else {
			n = n.Content[0]
		}
	}
	return n
}

// at is pl at node n, for operator op.
func at(pl Place, n *yaml.Node, op string) Place {
	pl.Op, pl.Line, pl.Column = op, n.Line, n.Column
	return pl
}

func (pl Place) name() string { return pl.Part + pl.Path }

// value compiles the condition on the value at pl: a mapping of fields and
// operators, a list (an array holding each element), or a plain value.
// text: the value is a header's (no fields below it).
func (p *filterParser) value(n *yaml.Node, pl Place, text bool) *cond {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			p.fail(n, pl.name(), "empty mapping: give fields or operators")
			return nil
		}
		c := &cond{Place: at(pl, n, "{}"), kind: kObject, text: text}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				p.fail(k, pl.name(), "a key must be a plain value")
				continue
			}
			if strings.HasPrefix(k.Value, "$") {
				if s := p.op(k, v, pl, text); s != nil {
					c.subs = append(c.subs, s)
				}
				continue
			}
			if text {
				p.fail(k, pl.name(), fmt.Sprintf("a header's value is text: no field %q below it", k.Value))
				continue
			}
			ptr := jsonptr.Pointer{k.Value}
			fpl := pl
			if strings.HasPrefix(k.Value, "/") {
				var err error
				if ptr, err = jsonptr.Parse(k.Value); err != nil {
					p.fail(k, pl.name(), err.Error())
					continue
				}
				fpl.Path += k.Value
			} else {
				fpl.Path += "/" + escape(k.Value)
			}
			if fc := p.value(v, fpl, false); fc != nil {
				c.fields = append(c.fields, field{name: k.Value, ptr: ptr, c: fc})
			}
		}
		if len(c.fields) == 0 && len(c.subs) == 1 {
			return c.subs[0]
		}
		return c
	case yaml.SequenceNode:
		c := &cond{Place: at(pl, n, "contains"), kind: kContain, text: text}
		for _, e := range n.Content {
			if s := p.value(e, pl, text); s != nil {
				c.subs = append(c.subs, s)
			}
		}
		return c
	}
	want, err := jsonValue(n)
	if err != nil {
		p.fail(n, pl.name(), err.Error())
		return nil
	}
	return &cond{Place: at(pl, n, "$eq"), kind: kValue, text: text, want: want}
}

// op compiles one operator of a mapping at pl.
func (p *filterParser) op(k, v *yaml.Node, pl Place, text bool) *cond {
	return p.opAs(k, v, pl, text, k.Value)
}

// opAs is op with the operator named as written for messages: $neq and
// $nin are compiled as the negation of an $eq and an $in.
func (p *filterParser) opAs(k, v *yaml.Node, pl Place, text bool, written string) *cond {
	v = resolve(v)
	name := k.Value
	c := &cond{Place: at(pl, k, name), text: text}
	bad := func(want string) *cond {
		p.fail(v, pl.name(), fmt.Sprintf("%s wants %s", written, want))
		return nil
	}
	switch name {
	case "$eq":
		if v.Kind == yaml.ScalarNode {
			c.kind = kValue
		} else {
			c.kind = kDeep
		}
		want, err := jsonValue(v)
		if err != nil {
			p.fail(v, pl.name(), err.Error())
			return nil
		}
		c.want = want
		return c
	case "$neq", "$nin":
		pos := map[string]string{"$neq": "$eq", "$nin": "$in"}[name]
		s := p.opAs(&yaml.Node{Kind: yaml.ScalarNode, Value: pos, Line: k.Line, Column: k.Column}, v, pl, text, name)
		if s == nil {
			return nil
		}
		c.kind = map[string]kind{"$neq": kNeq, "$nin": kNin}[name]
		c.subs = []*cond{s}
		return c
	case "$in":
		c.kind = kIn
		switch {
		case v.Kind == yaml.SequenceNode:
			want, err := jsonValue(v)
			if err != nil {
				p.fail(v, pl.name(), err.Error())
				return nil
			}
			c.want = want
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str":
			c.str = v.Value
		default:
			return bad("a list of values, or a string (a substring, or an element of an array)")
		}
		return c
	case "$gt", "$gte", "$lt", "$lte":
		c.kind = map[string]kind{"$gt": kGt, "$gte": kGte, "$lt": kLt, "$lte": kLte}[name]
		if v.Kind != yaml.ScalarNode {
			return bad("a number or a string")
		}
		want, err := jsonValue(v)
		switch w := want.(type) {
		case json.Number:
			f, perr := strconv.ParseFloat(string(w), 64)
			if err != nil || perr != nil {
				return bad("a number or a string")
			}
			c.num, c.isNum = f, true
		case string:
			c.str = w
		default:
			return bad("a number or a string")
		}
		return c
	case "$startsWith", "$endsWith":
		c.kind = kStarts
		if name == "$endsWith" {
			c.kind = kEnds
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			return bad("a string (quote a number)")
		}
		c.str = v.Value
		return c
	case "$exist":
		c.kind = kExist
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
			return bad("true or false")
		}
		c.want = v.Value == "true"
		return c
	case "$or", "$and":
		c.kind = kOr
		if name == "$and" {
			c.kind = kAnd
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return bad("a non-empty list of conditions")
		}
		for _, e := range v.Content {
			if s := p.value(e, pl, text); s != nil {
				c.subs = append(c.subs, s)
			}
		}
		return c
	case "$not":
		c.kind = kNot
		s := p.value(v, pl, text)
		if s == nil {
			return nil
		}
		c.subs = []*cond{s}
		return c
	}
	p.fail(k, pl.name(), fmt.Sprintf("unknown operator %q (want one of $eq $neq $in $nin $gt $gte $lt $lte $startsWith $endsWith $exist $or $and $not; a field named with $ is written as a pointer, \"/%s\")", name, name))
	return nil
}

// headers compiles a headers filter: a mapping of header names to
// conditions on their values, with $or, $and and $not of such mappings.
func (p *filterParser) headers(n *yaml.Node, pl Place) *cond {
	n = resolve(n)
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		p.fail(n, pl.name(), "want a mapping of header names to conditions")
		return nil
	}
	c := &cond{Place: at(pl, n, "{}"), kind: kObject, text: true}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		switch k.Value {
		case "$or", "$and":
			s := &cond{Place: at(pl, k, k.Value), kind: kOr, text: true}
			if k.Value == "$and" {
				s.kind = kAnd
			}
			if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
				p.fail(v, pl.name(), k.Value+" wants a non-empty list of conditions")
				continue
			}
			for _, e := range v.Content {
				if h := p.headers(e, pl); h != nil {
					s.subs = append(s.subs, h)
				}
			}
			c.subs = append(c.subs, s)
			continue
		case "$not":
			if h := p.headers(v, pl); h != nil {
				c.subs = append(c.subs, &cond{Place: at(pl, k, "$not"), kind: kNot, text: true, subs: []*cond{h}})
			}
			continue
		}
		if strings.HasPrefix(k.Value, "$") {
			p.fail(k, pl.name(), fmt.Sprintf("%s: name a header first (headers: {x-name: {%s: ...}}); at the top of headers only $or, $and and $not", k.Value, k.Value))
			continue
		}
		name := strings.ToLower(k.Value)
		if !validHeaderName(name) {
			p.fail(k, pl.name(), fmt.Sprintf("%q is not a header name", k.Value))
			continue
		}
		switch name {
		case "authorization", "proxy-authorization", "cookie", "set-cookie":
			p.fail(k, pl.name(), fmt.Sprintf("%s: credential headers are never copied with a record, so no filter can read them", name))
			continue
		}
		fpl := pl
		fpl.Path = "/" + name
		if fc := p.value(v, fpl, true); fc != nil {
			c.fields = append(c.fields, field{name: name, c: fc})
			if !slices.Contains(p.names, name) {
				p.names = append(p.names, name)
			}
		}
	}
	if len(c.fields) == 0 && len(c.subs) == 0 {
		return nil
	}
	return c
}

// validHeaderName reports whether s is an HTTP token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0) {
			return false
		}
	}
	return true
}

// escape writes a key as a JSON pointer token.
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
