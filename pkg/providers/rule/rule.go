// Package rule reads one value from a webhook request, as a providers file's
// {header: <name>} or {json: <JSON pointer>} says: the idempotency key's
// parts, the event type and the ordering entity are each read by a Rule.
package rule

import (
	"fmt"
	"net/http"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Rule is a header, or a JSON pointer into the body. A Rule is never
// changed once made, so it is safe for concurrent use.
type Rule struct {
	header  string // canonical header name, or ""
	path    string // the pointer as written, for messages
	pointer jsonptr.Pointer
}

// Header is the rule of the request header name (canonicalised).
func Header(name string) *Rule { return &Rule{header: http.CanonicalHeaderKey(name)} }

// JSON is the rule of a JSON pointer into the body; the error is
// jsonptr.Parse's.
func JSON(path string) (*Rule, error) {
	ptr, err := jsonptr.Parse(path)
	if err != nil {
		return nil, err
	}
	return &Rule{path: path, pointer: ptr}, nil
}

// MustJSON is JSON for a pointer written in the code (a preset's); it
// panics when path is not one.
func MustJSON(path string) *Rule {
	r, err := JSON(path)
	if err != nil {
		panic(err)
	}
	return r
}

// HeaderName is the canonical name of a header rule's header, "" for a
// JSON rule.
func (r *Rule) HeaderName() string { return r.header }

// Value returns what the rule finds, "" when absent. A JSON rule over a
// body that is not JSON is an error; so is, when strict, a value that is
// neither a string nor a number. The errors say what is wrong with the
// request (callers answer them as a malformed request).
func (r *Rule) Value(h http.Header, body []byte, strict bool) (string, error) {
	if r.header != "" {
		return h.Get(r.header), nil
	}
	raw, found, err := r.pointer.Lookup(body)
	if err != nil {
		return "", err
	}
	if !found {
		return "", nil
	}
	s, ok, isNull := jsonptr.Scalar(raw)
	if !ok && !isNull && strict {
		return "", fmt.Errorf("value at %s is not a string or a number", r.path)
	}
	return s, nil
}

// String names the rule as the providers file does: the header's name or
// the JSON pointer.
func (r *Rule) String() string {
	if r.header != "" {
		return "header " + r.header
	}
	return "json " + r.path
}

// YAML writes the rule as the providers file does: json: /p or header: H.
func (r *Rule) YAML() string {
	if r.header != "" {
		return "header: " + r.header
	}
	return "json: " + r.path
}
