// Package envconf reads a service's settings from its environment and
// collects every problem on the way, so a start with several wrong variables
// names them all at once: each problem says the variable, the value given
// and what was wanted.
//
// A service makes one Reader over its lookup function (os.LookupEnv in
// production, a map in tests), reads every variable with the typed getters,
// adds what its validate() finds across variables, and returns Err:
//
//	r := envconf.New(lookupEnv)
//	c := config{Addr: r.Addr("HOOKLINE_INGEST_ADDR", ":8080"), ...}
//	r.Add(c.validate())
//	return c, r.Err()
//
// A getter given a bad value records the problem and returns the default, so
// a validate() that runs after it sees a usable value and does not report
// the same variable twice. Values are trimmed of spaces, except by Secret.
package envconf

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// Error is one wrong variable.
type Error struct {
	Name  string // the variable, such as HOOKLINE_PARTITIONS
	Value string // the value given, trimmed; "" when unset or empty
	// Why says what is wrong when "want" alone would not (a value that
	// parses but conflicts with another variable, the bad element of a
	// list); "" otherwise.
	Why  string
	Want string // what was wanted, such as "a whole number from 1 to 10000"
	// Secret keeps the value out of the message (only its length shows).
	Secret bool
}

// Error reads `NAME="value": want W`, `NAME="value": why (want W)`,
// `NAME is not set: want W` or `NAME: why (want W)` for an empty value.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	switch {
	case e.Value == "" && e.Why == "":
		b.WriteString(" is not set")
	case e.Value == "":
	case e.Secret:
		fmt.Fprintf(&b, " (%d characters)", len(e.Value))
	default:
		fmt.Fprintf(&b, "=%q", e.Value)
	}
	b.WriteString(": ")
	switch {
	case e.Why == "":
		b.WriteString("want " + e.Want)
	case e.Want == "":
		b.WriteString(e.Why)
	default:
		fmt.Fprintf(&b, "%s (want %s)", e.Why, e.Want)
	}
	return b.String()
}

// Errors is every problem a Reader found, in the order they were found. Its
// message is the one problem, or a count and one problem a line.
type Errors []error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	lines := make([]string, 0, len(es)+1)
	lines = append(lines, fmt.Sprintf("%d settings are wrong:", len(es)))
	for _, e := range es {
		lines = append(lines, "  "+e.Error())
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.Is and errors.As every problem.
func (es Errors) Unwrap() []error { return es }

// Reader reads variables through a lookup function and keeps every problem.
// It is not safe for concurrent use (a service reads its settings once, at
// start).
type Reader struct {
	lookup func(string) (string, bool)
	errs   Errors
	bad    map[string]bool // variables with a problem recorded
}

// New returns a Reader over lookup (os.LookupEnv in production).
func New(lookup func(string) (string, bool)) *Reader {
	return &Reader{lookup: lookup, bad: map[string]bool{}}
}

// Err returns nil, or Errors with every problem recorded.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return r.errs
}

// Add records problems found outside the getters (a service's validate()):
// nil is ignored, Errors and errors.Join results are taken apart, and a
// problem for a variable that already has one is dropped, so each wrong
// variable is reported once.
func (r *Reader) Add(errs ...error) {
	for _, err := range errs {
		switch e := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			r.Add(e.Unwrap()...)
		case *Error:
			if !r.bad[e.Name] {
				r.bad[e.Name] = true
				r.errs = append(r.errs, e)
			}
		default:
			r.errs = append(r.errs, e)
		}
	}
}

func (r *Reader) fail(name, value, want string) {
	r.Add(&Error{Name: name, Value: value, Want: want})
}

// get returns name's value trimmed of spaces ("" when unset).
func (r *Reader) get(name string) string {
	v, _ := r.lookup(name)
	return strings.TrimSpace(v)
}

// String returns name's value, or def when it is unset or empty.
func (r *Reader) String(name, def string) string {
	if v := r.get(name); v != "" {
		return v
	}
	return def
}

// Required returns name's value; unset or empty, it is a problem that
// says want.
func (r *Reader) Required(name, want string) string {
	v := r.get(name)
	if v == "" {
		r.fail(name, "", want)
	}
	return v
}

// Secret returns name's value as given, spaces included (a password may
// have them); a problem with it never shows the value.
func (r *Reader) Secret(name string) string {
	v, _ := r.lookup(name)
	return v
}

// Int returns name's value as a whole number from lo to hi, or def.
func (r *Reader) Int(name string, def, lo, hi int) int {
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		r.fail(name, v, fmt.Sprintf("a whole number from %d to %d", lo, hi))
		return def
	}
	return n
}

// Bool returns name's value as true or false (also 1, 0, t, f, TRUE, ...:
// strconv.ParseBool), or def.
func (r *Reader) Bool(name string, def bool) bool {
	v := r.get(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "true or false")
		return def
	}
	return b
}

// Duration returns name's value as a Go duration (5s, 1m30s) from lo to
// hi, or def; hi 0 means no upper bound.
func (r *Reader) Duration(name string, def, lo, hi time.Duration) time.Duration {
	v := r.get(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err == nil && d >= lo && (hi == 0 || d <= hi) {
		return d
	}
	var want string
	switch {
	case hi != 0:
		want = fmt.Sprintf("a duration from %s to %s", short(lo), short(hi))
	case lo <= time.Nanosecond:
		want = "a positive duration such as " + short(def)
	default:
		want = fmt.Sprintf("a duration of %s or more, such as %s", short(lo), short(def))
	}
	r.fail(name, v, want)
	return def
}

// short prints d as Go does without trailing zero units: 5m, 1h, 1h30m.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// byteUnits are the suffixes Bytes takes, largest first (GOMEMLIMIT's).
var byteUnits = []struct {
	suffix string
	size   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// Bytes returns name's value as a byte count from lo to hi, or def: a whole
// number of bytes, or one with a KiB, MiB or GiB suffix (as GOMEMLIMIT
// takes them).
func (r *Reader) Bytes(name string, def, lo, hi int64) int64 {
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := ParseBytes(v)
	if err != nil || n < lo || n > hi {
		r.fail(name, v, fmt.Sprintf("bytes from %s to %s, such as %s", Size(lo), Size(hi), Size(def)))
		return def
	}
	return n
}

// ParseBytes reads a byte count as Bytes does: a whole number of bytes,
// or one with a KiB, MiB or GiB suffix.
func ParseBytes(v string) (int64, error) {
	num, unit := v, int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, unit = n, u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is not a byte count (write it like 32MiB, 512KiB or 1000)", v)
	}
	return n * unit, nil
}

// Size prints n bytes in the syntax Bytes reads, with the largest unit that
// divides it: 128MiB, 1024GiB, 1000.
func Size(n int64) string {
	for _, u := range byteUnits {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// OneOf returns name's value when it is one of choices (compared without
// regard to case), spelled as in choices; or def.
func (r *Reader) OneOf(name, def string, choices ...string) string {
	v := r.get(name)
	if v == "" {
		return def
	}
	for _, c := range choices {
		if strings.EqualFold(v, c) {
			return c
		}
	}
	r.fail(name, v, orList(choices))
	return def
}

// orList joins choices as "a, b or c".
func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

// Addr returns name's value as a listen address, host:port or :port, or def.
func (r *Reader) Addr(name, def string) string {
	v := r.get(name)
	if v == "" {
		return def
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		r.fail(name, v, "host:port or :port, such as "+def)
		return def
	}
	return v
}

// Parse returns parse(value) for a set variable, or def when it is unset
// or empty: for lists (each wants its own check of its elements) and for
// values whose message says more than a getter's would. An error of parse that is an *Error is recorded with its empty
// Name, Value and Want filled in (so new(Error) says "want want"); any
// other error becomes the Why of an Error that wants want. On an error
// Parse returns def.
func Parse[T any](r *Reader, name string, def T, want string, parse func(string) (T, error)) T {
	v := r.get(name)
	if v == "" {
		return def
	}
	out, err := parse(v)
	if err == nil {
		return out
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Name == "" {
			e.Name = name
		}
		if e.Value == "" {
			e.Value = v
		}
		if e.Want == "" {
			e.Want = want
		}
	} else {
		e = &Error{Name: name, Value: v, Why: err.Error(), Want: want}
	}
	r.Add(e)
	return def
}

// Override returns lookup with name answering value, for a command-line
// flag that overrides a variable (--providers over HOOKLINE_PROVIDERS); an
// empty value leaves lookup as it is.
func Override(lookup func(string) (string, bool), name, value string) func(string) (string, bool) {
	if value == "" {
		return lookup
	}
	return func(k string) (string, bool) {
		if k == name {
			return value, true
		}
		return lookup(k)
	}
}
