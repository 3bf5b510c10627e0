package transform

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func mustCompile(tb testing.TB, src string, lim Limits) *Script {
	tb.Helper()
	s, err := Compile("t.js", src, lim)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return s
}

var sample = Request{
	Body:        []byte(`{"id":"evt_1","amount":12,"customer":{"email":"a@example.com","name":"Ada"}}`),
	ContentType: "application/json",
	Headers:     []kgo.RecordHeader{{Key: "x-request-id", Value: []byte("r1")}},
	EventType:   "invoice.paid", Provider: "stripe", Route: "crm",
}

// TestRun: what a script receives and what its result becomes.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, src   string
		body        string
		contentType string
		headers     string // name=value;...
		skip        bool
	}{
		{name: "identity body keeps key order", src: `function transform(r) { return {body: r.body} }`,
			body: `{"id":"evt_1","amount":12,"customer":{"email":"a@example.com","name":"Ada"}}`, contentType: "application/json", headers: "x-request-id=r1"},
		{name: "raw string sent as is", src: `function transform(r) { return {body: r.raw + "\n"} }`,
			body: string(sample.Body) + "\n", contentType: "application/json", headers: "x-request-id=r1"},
		{name: "context and request fields", src: `function transform(r, c) { return {body: [r.event_type, r.provider, r.route, c.event_type, c.provider, c.route, r.headers["content-type"], r.headers["x-request-id"]]} }`,
			body: `["invoice.paid","stripe","crm","invoice.paid","stripe","crm","application/json","r1"]`, contentType: "application/json", headers: "x-request-id=r1"},
		{name: "headers replaced, own dropped, content-type taken", src: `function transform(r) { return {body: "a=1", headers: {"Content-Type": "application/x-www-form-urlencoded", "X-Team": "core", "x-hookline-route": "no", "idempotency-key": "no"}} }`,
			body: "a=1", contentType: "application/x-www-form-urlencoded", headers: "x-team=core"},
		{name: "null skips", src: `function transform(r) { return null }`, skip: true},
		{name: "svix cancel skips", src: `function handler(w) { w.cancel = true; return w } function transform(r) { return handler(r) }`, skip: true},
		{name: "hookdeck addHandler", src: `addHandler("transform", (request, context) => { request.body.route = context.route; return request })`,
			body: `{"id":"evt_1","amount":12,"customer":{"email":"a@example.com","name":"Ada"},"route":"crm"}`, contentType: "application/json", headers: "x-request-id=r1"},
		{name: "top level state is per call", src: `let n = 0; function transform(r) { n++; return {body: {n}} }`,
			body: `{"n":1}`, contentType: "application/json", headers: "x-request-id=r1"},
		{name: "global object frozen: no state survives", src: `function transform(r) { globalThis.n = (globalThis.n || 0) + 1; return {body: {n: globalThis.n === undefined}} }`,
			body: `{"n":true}`, contentType: "application/json", headers: "x-request-id=r1"},
		{name: "date from the request works", src: `function transform(r) { return {body: new Date(Date.UTC(2026, 0, 2)).toISOString()} }`,
			body: `2026-01-02T00:00:00.000Z`, contentType: "application/json", headers: "x-request-id=r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.src, Limits{})
			for i := range 3 { // the same bytes each time: no state survives a call
				res, err := s.Run(sample)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if res.Skip != tc.skip {
					t.Fatalf("call %d: Skip = %v, want %v", i, res.Skip, tc.skip)
				}
				if tc.skip {
					continue
				}
				var hs []string
				for _, h := range res.Request.Headers {
					hs = append(hs, h.Key+"="+string(h.Value))
				}
				if got := string(res.Request.Body); got != tc.body || res.Request.ContentType != tc.contentType || strings.Join(hs, ";") != tc.headers {
					t.Errorf("call %d: body %s, content-type %q, headers %q; want %s, %q, %q", i, got, res.Request.ContentType, strings.Join(hs, ";"), tc.body, tc.contentType, tc.headers)
				}
			}
		})
	}
}

// TestMisbehaving: each way a script can misbehave ends in an *Error with
// a clear reason, within its bound, and the script runs fine afterwards.
func TestMisbehaving(t *testing.T) {
	lim := Limits{Timeout: 200 * time.Millisecond, Memory: 16 << 20}
	for _, tc := range []struct {
		name, body string
		is         error  // errors.Is, when set
		want       string // in the message
		// memory: the memory bound must end it, whatever the machine's
		// speed: the time limit is the largest.
		memory bool
	}{
		{name: "endless loop", body: `while (true) {}`, is: ErrTimeout},
		{name: "endless recursion", body: `function f() { return f() + 1 } return {body: f()}`, want: "call stack"},
		{name: "unbounded allocation, array", body: `const a = []; while (true) a.push({x: "yyyyyyyyyyyyyyyy" + a.length})`, is: ErrMemory, memory: true},
		{name: "unbounded allocation, doubling string", body: `let s = "x"; while (true) s = s + s`, is: ErrMemory, memory: true},
		{name: "one large string", body: `return {body: "x".repeat(1e9)}`, want: "memory bound"},
		{name: "one large array", body: `return {body: new Array(1e9).fill(0)}`, want: "memory bound"},
		{name: "exception", body: `throw new Error("no customer")`, want: "threw: Error: no customer at"},
		{name: "type error", body: `return {body: r.nothing.deeper}`, want: "threw: TypeError"},
		{name: "returns undefined", body: `r.body.x = 1`, is: ErrResult, want: "returned undefined"},
		{name: "returns a string", body: `return "hello"`, is: ErrResult, want: "returned a string"},
		{name: "returns an array", body: `return [r]`, is: ErrResult, want: "returned an array"},
		{name: "no body", body: `return {headers: {}}`, is: ErrResult, want: "no body"},
		{name: "body JSON cannot write", body: `return {body: function() {}}`, is: ErrResult, want: "JSON cannot write"},
		{name: "header not a string", body: `return {body: r.body, headers: {"x-n": 1}}`, is: ErrResult, want: `header "x-n"`},
		{name: "header not valid", body: `return {body: r.body, headers: {"x n": "1"}}`, is: ErrResult, want: "not a valid HTTP header"},
		{name: "Date.now", body: `return {body: Date.now()}`, want: "Date.now: reads the clock"},
		{name: "new Date()", body: `return {body: new Date()}`, want: "new Date(): reads the clock"},
		{name: "Date()", body: `return {body: Date()}`, want: "Date(): reads the clock"},
		{name: "Math.random", body: `return {body: Math.random()}`, want: "Math.random: is not deterministic"},
		{name: "fetch", body: `return {body: fetch("https://example.com")}`, want: "fetch: no network"},
		{name: "require", body: `return {body: require("fs").readFileSync("/etc/passwd")}`, want: "require: no modules or files"},
		{name: "typed arrays absent", body: `return {body: new Uint8Array(1e9)}`, want: "Uint8Array is not defined"},
		{name: "state on an intrinsic", body: `(function() { "use strict"; Array.prototype.seen = 1 })(); return {body: 1}`, want: "threw: TypeError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := lim
			if tc.memory {
				lim.Timeout = MaxTimeout
			}
			// Two good calls first (a body that is not JSON): the engine
			// that misbehaves is one used before.
			s := mustCompile(t, `function transform(r) { if (r.body === null) return {body: 1}; `+tc.body+` }`, lim)
			for range 2 {
				if _, err := s.Run(Request{Body: []byte("not JSON")}); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			_, err := s.Run(sample)
			took := time.Since(start)
			var te *Error
			if !errors.As(err, &te) || te.Script != "t.js" || te.SHA256 != s.SHA256 {
				t.Fatalf("err = %v (%T); want an *Error naming t.js", err, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v; want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q; want it to contain %q", err, tc.want)
			}
			// Generous against a shared machine: the bound is 200ms, and
			// a call past it is run limitRuns times.
			if took > 10*limitRuns*lim.Timeout {
				t.Errorf("took %s; the time limit is %s", took, lim.Timeout)
			}
			// A time limit is reached in limitRuns runs in a row before
			// the call fails with it: it cannot take less.
			if errors.Is(err, ErrTimeout) && took < limitRuns*lim.Timeout {
				t.Errorf("took %s: fewer than %d runs of %s", took, limitRuns, lim.Timeout)
			}
		})
	}
}

// TestCompileRefuses: a script that cannot run is refused at Compile,
// naming the file.
func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"syntax error", `function transform(r) { return {body: }`, "t.js"},
		{"no function", `function handler(r) { return r }`, "defines no transform"},
		{"transform not a function", `var transform = 1`, "defines no transform"},
		{"top level throws", `throw new Error("boom")`, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("t.js", tc.src, Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "transform t.js: ") {
				t.Errorf("err = %v; want it to name t.js and contain %q", err, tc.want)
			}
		})
	}
	if _, err := Compile("t.js", `function transform(r) { return r }`, Limits{Timeout: time.Hour}); err == nil {
		t.Error("a one-hour time limit compiles")
	}
}

// TestConcurrent: calls at once, more than the engines kept, each gets
// its own result.
func TestConcurrent(t *testing.T) {
	s := mustCompile(t, `function transform(r) { return {body: {id: r.body.id}} }`, Limits{})
	errs := make(chan error, 32)
	for i := range 32 {
		go func() {
			in := sample
			in.Body = []byte(`{"id":` + string(rune('0'+i%10)) + `}`)
			res, err := s.Run(in)
			if err == nil && string(res.Request.Body) != `{"id":`+string(rune('0'+i%10))+`}` {
				err = errors.New("wrong body " + string(res.Request.Body))
			}
			errs <- err
		}()
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if s.Kept() < 1 {
		t.Errorf("Kept = %d", s.Kept())
	}
}
