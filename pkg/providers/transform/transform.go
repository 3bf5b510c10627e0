// Package transform runs a route's transformation: a JavaScript function
// (the providers file's transform:) that receives a webhook's request and
// returns the request to send, or null to skip the route for that event.
// Scripts run in goja, a JavaScript engine written in Go (no cgo, no
// process), one engine per call at a time, taken from a small pool.
//
// A transform is deterministic: inside the script there is no clock
// (Date.now, new Date() and Date() throw; new Date(value) works), no
// randomness (Math.random throws), no network, file system or module
// loader (fetch and require throw; nothing else exists), and no state
// that outlives a call (the intrinsics and the global object are frozen,
// and the script's top level runs again for every call). So a retry, a
// replay and a run after a crash send the same bytes for the same input.
//
// A transform is bounded, per call: a CPU time limit and a memory bound
// (Limits), stopped with goja's Interrupt by a watchdog; the built-ins
// that can make a large value in one native step (String repeat, padStart,
// padEnd, Array length, fill, join) check the bound before they allocate,
// and typed arrays and ArrayBuffer are absent. See Limits for what the
// memory bound is and is not.
package transform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/net/http/httpguts"

	"github.com/hookline/hookline/pkg/providers/jsonptr"
)

// Defaults of Limits.
const (
	// DefaultTimeout is a call's CPU time limit (wall time of the call,
	// which runs on one goroutine without I/O).
	DefaultTimeout = 100 * time.Millisecond
	// DefaultMemory is a call's memory bound.
	DefaultMemory = 32 << 20
	// MaxTimeout and MaxMemory cap what a route may set.
	MaxTimeout = 10 * time.Second
	MaxMemory  = 1 << 30
)

// checkEvery is how often the watchdog looks at a running call.
const checkEvery = time.Millisecond

// maxStack bounds the script's call depth (goja's SetMaxCallStackSize):
// deep recursion ends as an error, not as a Go stack overflow.
const maxStack = 2000

// Limits bound one call of a script.
//
// Timeout is the call's time, measured from its start; the watchdog
// checks it every millisecond and interrupts the script at its next
// instruction. Memory is the bytes the process allocated on the heap
// since the call started (the Go runtime's cumulative allocation count,
// /gc/heap/allocs:bytes), checked at the same ticks: it is an upper bound
// on what the script allocated, so a call that stays under it allocated
// less, but allocations of other goroutines during the call count too
// (on a busy processor, a script that allocates close to its bound can be
// stopped where it would pass alone). Between two ticks a script can
// allocate past the bound by what it allocates in a millisecond; the
// built-ins that build a large value in one native step check the bound
// first. Neither bound covers a single built-in that runs long without
// allocating (a regular expression that backtracks for long is the one
// known case): keep regular expressions simple.
type Limits struct {
	Timeout time.Duration // 0: DefaultTimeout
	Memory  int64         // bytes; 0: DefaultMemory
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	return l
}

// Script is a compiled transform. It is safe for concurrent use; each
// call takes one of its Kept engines (made when first needed, and again
// after a call that failed).
type Script struct {
	// Path is the script's file as the providers file names it.
	Path string
	// SHA256 is the hex SHA-256 of the script's content: the outcome and
	// the trace name the script by Path and SHA256.
	SHA256 string
	Limits Limits

	prog  *goja.Program
	slots chan struct{} // one per call running
	idle  chan *engine  // engines between calls
}

// Kept is how many engines a script keeps, and how many of its calls run
// at once (more wait for one to finish): one per CPU the process may use
// (GOMAXPROCS at Compile), since a call uses a CPU and nothing else.
func (s *Script) Kept() int { return cap(s.slots) }

// Load reads and compiles the script at path (relative to dir unless
// absolute). Errors name the file.
func Load(dir, path string, lim Limits) (*Script, error) {
	file := path
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, path)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", path, err)
	}
	return Compile(path, string(src), lim)
}

// Compile compiles src, named path, and checks that it defines the
// transform: a function transform(request, context), or a handler given
// to addHandler("transform", fn) (Hookdeck's form). A syntax error, a top
// level that throws, or no such function is an error naming path. Cost:
// one parse, and one engine made and kept.
func Compile(path, src string, lim Limits) (*Script, error) {
	lim = lim.withDefaults()
	if lim.Timeout > MaxTimeout || lim.Memory > MaxMemory {
		return nil, fmt.Errorf("transform %s: limits %s, %d bytes: at most %s and %d bytes", path, lim.Timeout, lim.Memory, MaxTimeout, MaxMemory)
	}
	sum := sha256.Sum256([]byte(src))
	// The script's top level runs inside a function, again for every
	// call: a var or let at its top level is the call's own. The prefix
	// shares the script's first line, so line numbers stay the file's.
	wrapped := "(function(){var __handlers={};function addHandler(name,fn){__handlers[name]=fn}" + src +
		"\n;return typeof transform===\"function\"?transform:__handlers.transform})"
	prog, err := goja.Compile(path, wrapped, false)
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", path, err)
	}
	s := &Script{Path: path, SHA256: hex.EncodeToString(sum[:]), Limits: lim, prog: prog}
	n := max(runtime.GOMAXPROCS(0), 1)
	s.slots, s.idle = make(chan struct{}, n), make(chan *engine, n)
	e, err := s.newEngine()
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", path, err)
	}
	if _, err := e.handler(s); err != nil {
		return nil, fmt.Errorf("transform %s: %w", path, err)
	}
	s.idle <- e
	return s, nil
}

// Request is what a script receives and what it returns: a webhook's
// body and headers, with what it is for.
type Request struct {
	Body []byte
	// ContentType is the body's Content-Type.
	ContentType string
	// Headers are the provider headers forwarded: lower-case names (as
	// headers.HTTP gives them).
	Headers []kgo.RecordHeader
	// EventType, Provider and Route say what the request is (inputs
	// only: a script cannot change them).
	EventType, Provider, Route string
}

// Result is what a call of a script gave: the request to send, or Skip.
type Result struct {
	// Skip says the script returned null (or a request with cancel:
	// true, Svix's form): the route is not called for this event.
	Skip bool
	// Request is the request to send (Body, ContentType, Headers), when
	// not Skip.
	Request Request
}

// Error is why a call failed: the script threw, ran out of its time or
// memory, or returned what is not a request. Its message names the
// script.
type Error struct {
	Script string
	SHA256 string
	Err    error
}

func (e *Error) Error() string { return "transform " + e.Script + ": " + e.Err.Error() }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// Sentinels a failed call's Error wraps, for callers and tests that tell
// the bounds apart.
var (
	ErrTimeout = errors.New("time limit reached")
	ErrMemory  = errors.New("memory bound reached")
	ErrResult  = errors.New("not a request")
)

// limitRuns is how many runs of a call in a row must reach the time
// limit or the memory bound for the call to fail with it. The watchdog
// measures the call's wall time and the process's allocations, which a
// machine short of CPU or the processor's other work add to: a script
// over its bound is over it in every run, a call slowed by its
// neighbours (a restart's burst of calls on a loaded machine took one
// past 100 ms in a system test) is not; a run after a limit waits
// limitPause times its number first. A script that loops for ever costs
// limitRuns times its time limit before it fails.
const (
	limitRuns  = 3
	limitPause = 10 * time.Millisecond
)

// Run calls the script on in. The returned error is an *Error; a call
// that reached the time limit or the memory bound is run again, and
// fails with it only when limitRuns runs in a row did. Cost: an engine
// from the pool (made when none is idle: see the package's benchmarks),
// the script's top level, a JSON parse of the body and a JSON
// serialisation of the result, and a timer.
func (s *Script) Run(in Request) (Result, error) {
	for n := 1; ; n++ {
		res, err := s.runOnce(in)
		if err == nil || n == limitRuns || !(errors.Is(err, ErrTimeout) || errors.Is(err, ErrMemory)) {
			return res, err
		}
		time.Sleep(time.Duration(n) * limitPause)
	}
}

// runOnce is one run of Run.
func (s *Script) runOnce(in Request) (Result, error) {
	s.slots <- struct{}{} // at most Kept calls at once: a transform is CPU only
	defer func() { <-s.slots }()
	var e *engine
	select {
	case e = <-s.idle:
	default:
		var err error
		if e, err = s.newEngine(); err != nil {
			return Result{}, &Error{Script: s.Path, SHA256: s.SHA256, Err: err}
		}
	}
	res, err := e.run(s, in)
	if err != nil {
		// An engine that failed is not reused: whatever the script left
		// half done goes with it; the next call makes a new one.
		return Result{}, &Error{Script: s.Path, SHA256: s.SHA256, Err: err}
	}
	s.idle <- e // room: no more engines than slots
	return res, nil
}

// engine is one goja runtime with the script's program loaded.
type engine struct {
	vm        *goja.Runtime
	factory   goja.Callable                // runs the script's top level, returns its transform
	tree      *jsonptr.Builder[goja.Value] // the body as JSON.parse would make it
	stringify goja.Callable                // JSON.stringify

	mu      sync.Mutex // guards running against the watchdog
	running bool       // a call runs
	start   time.Time
	alloc0  uint64
	timer   *time.Timer
	sample  [1]metrics.Sample
}

const allocsMetric = "/gc/heap/allocs:bytes"

// prelude makes the global environment deterministic and bounded, then
// freezes it. __limit is the largest string or array length a built-in
// may make in one step.
const prelude = `(function(g, limit){
"use strict";
function refuse(what, why){ return function(){ throw new Error(what + ": " + why + " (a transform is deterministic and has no I/O)") } }
var D = g.Date;
function Date(){
	if (!new.target) throw new Error("Date(): reads the clock (a transform is deterministic: use a time from the request)");
	if (arguments.length === 0) throw new Error("new Date(): reads the clock (a transform is deterministic: use a time from the request)");
	return Reflect.construct(D, Array.prototype.slice.call(arguments), new.target);
}
Object.defineProperty(Date, "prototype", {value: D.prototype});
Date.UTC = D.UTC; Date.parse = D.parse;
Date.now = refuse("Date.now", "reads the clock");
Object.defineProperty(D.prototype, "constructor", {value: Date});
g.Date = Date;
g.Math.random = refuse("Math.random", "is not deterministic");
g.fetch = refuse("fetch", "no network");
g.require = refuse("require", "no modules or files");
g.XMLHttpRequest = refuse("XMLHttpRequest", "no network");
["ArrayBuffer","SharedArrayBuffer","DataView","Int8Array","Uint8Array","Uint8ClampedArray","Int16Array","Uint16Array",
 "Int32Array","Uint32Array","Float32Array","Float64Array","BigInt64Array","BigUint64Array","Atomics","WeakRef","FinalizationRegistry"].forEach(function(n){ delete g[n] });
function over(what, n){ throw new RangeError(what + ": " + n + " would pass the transform's memory bound") }
var SP = g.String.prototype, repeat = SP.repeat, padStart = SP.padStart, padEnd = SP.padEnd;
SP.repeat = function(n){ var l = String(this).length * Number(n); if (l > limit) over("repeat", l); return repeat.call(this, n) };
SP.padStart = function(n, f){ if (Number(n) > limit) over("padStart", n); return padStart.call(this, n, f) };
SP.padEnd = function(n, f){ if (Number(n) > limit) over("padEnd", n); return padEnd.call(this, n, f) };
var AP = g.Array.prototype, fill = AP.fill, join = AP.join, A = g.Array;
AP.fill = function(){ if (this.length > limit) over("fill", this.length); return fill.apply(this, arguments) };
AP.join = function(sep){ if (this.length > limit) over("join", this.length); return join.call(this, sep) };
function Arr(){ if (arguments.length === 1 && typeof arguments[0] === "number" && arguments[0] > limit) over("Array", arguments[0]); return Reflect.construct(A, Array.prototype.slice.call(arguments), new.target || Arr) }
Object.defineProperty(Arr, "prototype", {value: AP});
Arr.isArray = A.isArray; Arr.from = A.from; Arr.of = A.of;
Object.defineProperty(AP, "constructor", {value: Arr});
g.Array = Arr;
var seen = new Set();
function freeze(o){
	if ((typeof o !== "object" && typeof o !== "function") || o === null || seen.has(o)) return;
	seen.add(o);
	Object.freeze(o);
	Reflect.ownKeys(o).forEach(function(k){
		var d = Object.getOwnPropertyDescriptor(o, k);
		if (!d) return;
		if ("value" in d) freeze(d.value); else { freeze(d.get); freeze(d.set) }
	});
	freeze(Object.getPrototypeOf(o));
}
freeze(g);
[[][Symbol.iterator](), new Map()[Symbol.iterator](), new Set()[Symbol.iterator](), ""[Symbol.iterator](), /a/[Symbol.matchAll]("a"),
 (function*(){})(), (async function(){}), Promise.resolve()].forEach(function(o){ freeze(Object.getPrototypeOf(o)) });
})`

// newEngine makes an engine: a runtime, the prelude, the script loaded.
func (s *Script) newEngine() (*engine, error) {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxStack)
	vm.SetRandSource(func() float64 { return 0 }) // unreachable: Math.random throws
	pre, err := vm.RunString(prelude)
	if err != nil {
		return nil, fmt.Errorf("prelude: %w", err)
	}
	setup, _ := goja.AssertFunction(pre)
	// A UTF-16 string's length is half its bytes: limit/2 characters
	// stay within the bound either way.
	if _, err := setup(goja.Undefined(), vm.GlobalObject(), vm.ToValue(s.Limits.Memory/2)); err != nil {
		return nil, fmt.Errorf("prelude: %w", err)
	}
	f, err := vm.RunProgram(s.prog)
	if err != nil {
		return nil, err
	}
	e := &engine{vm: vm}
	e.factory, _ = goja.AssertFunction(f)
	json := vm.Get("JSON").ToObject(vm)
	e.tree = jsTree(vm)
	e.stringify, _ = goja.AssertFunction(json.Get("stringify"))
	e.sample[0].Name = allocsMetric
	return e, nil
}

// jsTree builds, in vm, the values JSON.parse makes of a document:
// objects with their members in the document's order as own data
// properties (a member named __proto__ too), arrays, strings, numbers as
// doubles, booleans and null. goja's own JSON.parse reads its input
// through encoding/json's token stream, which was about 70 % of a call on
// a 7 KB body; jsonptr's decoder builds the same values in a fraction of
// that (TestBodyAsJSONParse holds the two equal).
func jsTree(vm *goja.Runtime) *jsonptr.Builder[goja.Value] {
	return &jsonptr.Builder[goja.Value]{
		Object: func() goja.Value { return vm.NewObject() },
		Set: func(obj goja.Value, k string, v goja.Value) {
			_ = obj.(*goja.Object).DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		},
		Array: func(items []goja.Value) goja.Value {
			vs := make([]any, len(items))
			for i, v := range items {
				vs[i] = v
			}
			return vm.NewArray(vs...)
		},
		String: func(s string) goja.Value { return vm.ToValue(s) },
		Number: func(raw []byte) goja.Value {
			f, _ := strconv.ParseFloat(string(raw), 64) // valid JSON: out of range is ±Inf, as JSON.parse gives
			return vm.ToValue(f)
		},
		Bool: func(b bool) goja.Value { return vm.ToValue(b) },
		Null: goja.Null,
	}
}

// handler runs the script's top level and returns its transform.
func (e *engine) handler(s *Script) (goja.Callable, error) {
	v, err := e.factory(goja.Undefined())
	if err != nil {
		return nil, scriptError(err)
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		return nil, fmt.Errorf("defines no transform: want function transform(request, context) {...} or addHandler(\"transform\", (request, context) => {...})")
	}
	return fn, nil
}

// watch arms the watchdog for the call starting now.
func (e *engine) watch(s *Script) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running, e.start = true, time.Now()
	metrics.Read(e.sample[:])
	e.alloc0 = e.sample[0].Value.Uint64()
	if e.timer == nil {
		e.timer = time.AfterFunc(min(checkEvery, s.Limits.Timeout), func() { e.check(s) })
		return
	}
	e.timer.Reset(min(checkEvery, s.Limits.Timeout))
}

// check is the watchdog's tick: it interrupts the running call past its
// bounds, or looks again later. A tick of a call that ended finds none
// running, or the next call, which it checks against that call's start.
func (e *engine) check(s *Script) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return
	}
	var sample [1]metrics.Sample
	sample[0].Name = allocsMetric
	metrics.Read(sample[:])
	switch took := time.Since(e.start); {
	case sample[0].Value.Uint64()-e.alloc0 > uint64(s.Limits.Memory):
		e.vm.Interrupt(fmt.Errorf("%w (%d bytes)", ErrMemory, s.Limits.Memory))
	case took >= s.Limits.Timeout:
		e.vm.Interrupt(fmt.Errorf("%w (%s)", ErrTimeout, s.Limits.Timeout))
	default:
		e.timer.Reset(checkEvery)
	}
}

// unwatch disarms the watchdog; no Interrupt can come after it.
func (e *engine) unwatch() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = false
	e.timer.Stop()
	e.vm.ClearInterrupt()
}

// run is one call.
func (e *engine) run(s *Script, in Request) (Result, error) {
	e.watch(s)
	defer e.unwatch()
	fn, err := e.handler(s)
	if err != nil {
		return Result{}, err
	}
	req, ctx, err := e.request(in)
	if err != nil {
		return Result{}, err
	}
	out, err := fn(goja.Undefined(), req, ctx)
	if err != nil {
		return Result{}, scriptError(err)
	}
	return e.result(in, out)
}

// request builds the script's arguments: request {body, raw, headers,
// event_type, provider, route} and context {event_type, provider, route}.
func (e *engine) request(in Request) (goja.Value, goja.Value, error) {
	vm := e.vm
	raw := vm.ToValue(string(in.Body))
	body := goja.Null()
	if v, ok := jsonptr.DecodeWith(in.Body, e.tree); ok {
		body = v // a body that is not JSON (or not UTF-8) is null; raw has it
	}
	hs := vm.NewObject()
	if in.ContentType != "" {
		_ = hs.Set("content-type", in.ContentType)
	}
	for _, h := range in.Headers {
		_ = hs.Set(strings.ToLower(h.Key), string(h.Value))
	}
	req, ctx := vm.NewObject(), vm.NewObject()
	for _, o := range [...]*goja.Object{req, ctx} {
		_ = o.Set("event_type", in.EventType)
		_ = o.Set("provider", in.Provider)
		_ = o.Set("route", in.Route)
	}
	_ = req.Set("body", body)
	_ = req.Set("raw", raw)
	_ = req.Set("headers", hs)
	return req, ctx, nil
}

// result reads what the script returned: null (skip), or an object with
// a body (a string is sent as it is, anything else as JSON.stringify
// writes it) and optional headers (an object of strings; absent: the
// request's).
func (e *engine) result(in Request, out goja.Value) (Result, error) {
	if goja.IsNull(out) {
		return Result{Skip: true}, nil
	}
	if goja.IsUndefined(out) {
		return Result{}, fmt.Errorf("%w: the function returned undefined (return the request to send, or null to skip this route)", ErrResult)
	}
	obj, ok := out.(*goja.Object)
	if !ok || obj.ClassName() == "Array" || obj.ClassName() == "Function" {
		return Result{}, fmt.Errorf("%w: the function returned %s (return {body, headers}, or null to skip this route)", ErrResult, describe(out))
	}
	if c := obj.Get("cancel"); c != nil && c.StrictEquals(e.vm.ToValue(true)) {
		return Result{Skip: true}, nil
	}
	res := Result{Request: Request{ContentType: in.ContentType, EventType: in.EventType, Provider: in.Provider, Route: in.Route}}
	b := obj.Get("body")
	switch {
	case b == nil || goja.IsUndefined(b):
		return Result{}, fmt.Errorf("%w: the returned object has no body", ErrResult)
	case isString(b):
		res.Request.Body = []byte(b.String())
	default:
		s, err := e.stringify(goja.Undefined(), b)
		if err != nil {
			return Result{}, scriptError(err)
		}
		if goja.IsUndefined(s) {
			return Result{}, fmt.Errorf("%w: the body is %s, which JSON cannot write", ErrResult, describe(b))
		}
		res.Request.Body = []byte(s.String())
	}
	hv := obj.Get("headers")
	if hv == nil || goja.IsUndefined(hv) {
		res.Request.Headers = in.Headers
		return res, nil
	}
	ho, ok := hv.(*goja.Object)
	if !ok || goja.IsNull(hv) || ho.ClassName() == "Array" {
		return Result{}, fmt.Errorf("%w: headers is %s: want an object of strings", ErrResult, describe(hv))
	}
	for _, k := range ho.Keys() {
		v := ho.Get(k)
		name := strings.ToLower(k)
		if !isString(v) {
			return Result{}, fmt.Errorf("%w: header %q is %s: want a string", ErrResult, k, describe(v))
		}
		if !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(v.String()) {
			return Result{}, fmt.Errorf("%w: header %q: not a valid HTTP header", ErrResult, k)
		}
		switch {
		case name == "content-type":
			res.Request.ContentType = v.String()
		case Own(name):
			// hookline's own: set by hookline on the call, never by a script
		default:
			res.Request.Headers = append(res.Request.Headers, kgo.RecordHeader{Key: name, Value: []byte(v.String())})
		}
	}
	return res, nil
}

// Own reports whether a lower-case header name is hookline's own on a
// call (the idempotency key, X-Hookline-*, its User-Agent): a script's
// result cannot set them, and hookline sets them after it.
func Own(name string) bool {
	return name == "idempotency-key" || name == "user-agent" || strings.HasPrefix(name, "x-hookline-")
}

func isString(v goja.Value) bool {
	_, obj := v.(*goja.Object)
	return !obj && v.ExportType() != nil && v.ExportType().Kind() == reflect.String
}

// describe names a value's type for an error.
func describe(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if o, ok := v.(*goja.Object); ok {
		if o.ClassName() == "Array" {
			return "an array"
		}
		if _, ok := goja.AssertFunction(v); ok {
			return "a function"
		}
		return "an object"
	}
	return "a " + v.ExportType().Kind().String() + " (" + short(v.String(), 40) + ")"
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// scriptError is a goja error as a short error: an exception's message
// and where it was thrown, an interrupt's cause.
func scriptError(err error) error {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if cause, ok := ie.Value().(error); ok {
			return cause
		}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return fmt.Errorf("threw: call stack deeper than %d", maxStack)
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		msg := ex.Value().String()
		if st := ex.Stack(); len(st) > 0 {
			var b bytes.Buffer
			st[0].Write(&b)
			msg += " at " + b.String()
		}
		return fmt.Errorf("threw: %s", msg)
	}
	return err
}
