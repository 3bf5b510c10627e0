package schema

import (
	"slices"
	"strings"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Dispatch on a discriminator. Providers publish one schema per event type
// as a oneOf over its variants, each variant requiring one property with
// values of its own: GitHub's pull_request_event is a oneOf over 20-odd
// definitions, one per action, each with "required": ["action", ...] and
// "action": {"enum": ["opened"]}. A validator checks a oneOf against every
// branch, each in full (about 17 times the cost of the one branch that
// applies, on GitHub's examples). When the branches' values are disjoint,
// at most one branch can hold, and it is the one whose values hold the
// body's: the oneOf (or an anyOf of the same shape) says exactly what a
// chain of if/then/else says, which checks the property first and the
// branch it names alone:
//
//	if: {required: [P], properties: {P: {enum: values of branch 1}}}
//	then: branch 1
//	else: {if: ... branch 2 ..., else: ... {required: [P], properties: {P: {enum: every value}}}}
//
// The last else refuses a body without the property or with a value no
// branch takes, as the oneOf did (every branch failed). dispatch rewrites
// a schema document so before it is compiled: the same bodies valid, the
// same invalid; an invalid body's violations are the applying branch's own
// instead of every branch's.

// dispatch rewrites, in doc (a JSON Schema document as decoded into any,
// draft-07 or later: if/then/else exist there), every oneOf and anyOf
// whose branches (inline, or "#/..." $refs into doc) each require one same
// property and restrict it to string values (const or enum) that no other
// branch takes: the keyword is removed and the chain added to the
// schema's allOf. It returns how many it rewrote. Values under enum,
// const, default and examples are data, not schemas, and are left alone.
// Cost: one walk of doc.
func dispatch(doc any) int {
	// Every chain is planned on the document as published (a branch may
	// itself be a oneOf over variants: its values are theirs), then put
	// in place.
	type plan struct {
		node  map[string]any
		kw    string
		chain map[string]any
	}
	var plans []plan
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, kw := range []string{"oneOf", "anyOf"} {
				if chain := dispatchChain(doc, t[kw]); chain != nil {
					plans = append(plans, plan{t, kw, chain})
				}
			}
			for k, c := range t {
				switch k {
				case "enum", "const", "default", "examples":
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(doc)
	for _, p := range plans {
		delete(p.node, p.kw)
		all, _ := p.node["allOf"].([]any)
		p.node["allOf"] = append(all, p.chain)
	}
	return len(plans)
}

// dispatchChain is the if/then/else chain equivalent to a oneOf or anyOf
// over branches, or nil when the branches have no discriminator: a
// property every branch requires and restricts to strings, no string
// taken by two branches. Of several, the first in name order is used.
func dispatchChain(doc, branches any) map[string]any {
	bs, ok := branches.([]any)
	if !ok || len(bs) < 2 {
		return nil
	}
	// Each branch's candidates: required property -> its strings.
	cands := make([]map[string][]string, len(bs))
	for i, b := range bs {
		cands[i] = discriminators(doc, b)
		if len(cands[i]) == 0 {
			return nil
		}
	}
	var names []string
	for p := range cands[0] {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		seen := map[string]bool{}
		disjoint := true
		for _, c := range cands {
			vals, ok := c[p]
			if !ok {
				disjoint = false
				break
			}
			for _, v := range vals {
				if seen[v] {
					disjoint = false
				}
				seen[v] = true
			}
		}
		if !disjoint {
			continue
		}
		return chain(p, bs, cands, seen)
	}
	return nil
}

// chain builds the if/then/else chain on property p over branches.
func chain(p string, bs []any, cands []map[string][]string, all map[string]bool) map[string]any {
	every := make([]string, 0, len(all))
	for v := range all {
		every = append(every, v)
	}
	slices.Sort(every)
	var next any = has(p, every)
	for i := len(bs) - 1; i >= 0; i-- {
		next = map[string]any{"if": has(p, cands[i][p]), "then": bs[i], "else": next}
	}
	return next.(map[string]any)
}

// has is the schema "property p is present and one of vals".
func has(p string, vals []string) map[string]any {
	enum := make([]any, len(vals))
	for i, v := range vals {
		enum[i] = v
	}
	return map[string]any{"required": []any{p}, "properties": map[string]any{p: map[string]any{"enum": enum}}}
}

// discriminators are a branch's properties that it requires and restricts
// to strings (const, or an enum of strings only), with those strings; and,
// when the branch is itself a oneOf or anyOf whose every branch has such a
// property, that property with all their strings. A branch that is a $ref
// alone is looked up in doc ("#/..." only).
func discriminators(doc, branch any) map[string][]string {
	return discriminatorsDepth(doc, branch, 0)
}

// maxNesting bounds how deep discriminators looks into nested oneOfs (and
// $ref cycles).
const maxNesting = 4

func discriminatorsDepth(doc, branch any, depth int) map[string][]string {
	if depth > maxNesting {
		return nil
	}
	b, ok := branch.(map[string]any)
	if !ok {
		return nil
	}
	if ref, ok := b["$ref"].(string); ok && len(b) == 1 {
		target, ok := resolveLocal(doc, ref)
		if !ok {
			return nil
		}
		if b, ok = target.(map[string]any); !ok {
			return nil
		}
	}
	req, _ := b["required"].([]any)
	props, _ := b["properties"].(map[string]any)
	out := map[string][]string{}
	for _, r := range req {
		name, ok := r.(string)
		if !ok {
			continue
		}
		ps, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		if c, ok := ps["const"].(string); ok {
			out[name] = []string{c}
			continue
		}
		enum, ok := ps["enum"].([]any)
		if !ok || len(enum) == 0 {
			continue
		}
		vals := make([]string, 0, len(enum))
		for _, e := range enum {
			s, ok := e.(string)
			if !ok {
				vals = nil
				break
			}
			vals = append(vals, s)
		}
		if vals != nil {
			out[name] = vals
		}
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		nested, ok := b[kw].([]any)
		if !ok || len(nested) == 0 {
			continue
		}
		union := map[string][]string{}
		for i, n := range nested {
			c := discriminatorsDepth(doc, n, depth+1)
			for p := range union {
				if _, ok := c[p]; !ok {
					delete(union, p)
				}
			}
			for p, vals := range c {
				if i == 0 || union[p] != nil {
					union[p] = append(union[p], vals...)
				}
			}
		}
		for p, vals := range union {
			if _, own := out[p]; !own {
				slices.Sort(vals)
				out[p] = slices.Compact(vals) // variants of one value (GitHub's review_requested: by user, by team)
			}
		}
	}
	return out
}

// resolveLocal finds a "#/a/b" reference in doc (a reference with
// percent-escapes is not resolved).
func resolveLocal(doc any, ref string) (any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok || strings.Contains(ptr, "%") {
		return nil, false
	}
	return find(doc, ptr)
}

// find is the value at JSON pointer ptr (RFC 6901) in doc.
func find(doc any, ptr string) (any, bool) {
	p, err := jsonptr.Parse(ptr)
	if err != nil {
		return nil, false
	}
	return p.Find(doc)
}
