package envconf

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

// TestGetters: every getter's value for unset, good and bad input; every bad
// one is reported, with the value and what was wanted, in one error.
func TestGetters(t *testing.T) {
	r := New(envconftest.Env(map[string]string{
		"S": " x ", "SECRET": " p w ",
		"I": "7", "I_BAD": "8", "I_NAN": "seven",
		"B": "true", "B_BAD": "yes please",
		"D": "1m30s", "D_LOW": "1ms", "D_POS": "0s", "D_MIN": "50ms",
		"Z": "64MiB", "Z_PLAIN": "1000", "Z_BAD": "16MiB", "Z_HUGE": "99999999999GiB",
		"O": "WARN", "O_BAD": "loud",
		"A": "127.0.0.1:80", "A_BAD": "8080",
		"P": "12", "P_BAD": "-3",
	}))
	pos := func(v string) (int, error) {
		n, err := atoi(v)
		if err == nil && n < 0 {
			err = errors.New("negative")
		}
		return n, err
	}
	got := []any{
		r.String("S", "d"), r.String("UNSET", "d"), r.Secret("SECRET"), r.Required("S", "x"), r.Required("REQUIRED", "a path"),
		r.Int("I", 1, 0, 10), r.Int("I_BAD", 1, 0, 7), r.Int("I_NAN", 1, 0, 7), r.Int("UNSET", 3, 0, 7),
		r.Bool("B", false), r.Bool("B_BAD", false), r.Bool("UNSET", true),
		r.Duration("D", time.Second, time.Second, time.Hour), r.Duration("D_LOW", time.Second, time.Second, 5*time.Minute),
		r.Duration("D_POS", 5*time.Second, 1, 0), r.Duration("D_MIN", 30*time.Second, 100*time.Millisecond, 0),
		r.Bytes("Z", 128<<20, 32<<20, 1<<40), r.Bytes("Z_PLAIN", 1, 1, 1<<20), r.Bytes("Z_BAD", 128<<20, 32<<20, 1<<40), r.Bytes("Z_HUGE", 1, 1, 1<<40),
		r.OneOf("O", "info", "debug", "info", "warn", "error"), r.OneOf("O_BAD", "info", "debug", "info"),
		r.Addr("A", ":1"), r.Addr("A_BAD", ":9101"),
		Parse(r, "P", 0, "a count", pos), Parse(r, "P_BAD", 1, "a count", pos),
	}
	want := []any{
		"x", "d", " p w ", "x", "",
		7, 1, 1, 3,
		true, false, true,
		90 * time.Second, time.Second,
		5 * time.Second, 30 * time.Second,
		int64(64 << 20), int64(1000), int64(128 << 20), int64(1),
		"warn", "info",
		"127.0.0.1:80", ":9101",
		12, 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("values\n got %v\nwant %v", got, want)
	}
	err := r.Err()
	if err == nil {
		t.Fatal("no error")
	}
	msgs := []string{
		`REQUIRED is not set: want a path`,
		`I_BAD="8": want a whole number from 0 to 7`,
		`I_NAN="seven": want a whole number from 0 to 7`,
		`B_BAD="yes please": want true or false`,
		`D_LOW="1ms": want a duration from 1s to 5m`,
		`D_POS="0s": want a positive duration such as 5s`,
		`D_MIN="50ms": want a duration of 100ms or more, such as 30s`,
		`Z_BAD="16MiB": want bytes from 32MiB to 1024GiB, such as 128MiB`,
		`Z_HUGE="99999999999GiB": want bytes from 1 to 1024GiB`,
		`O_BAD="loud": want debug or info`,
		`A_BAD="8080": want host:port or :port, such as :9101`,
		`P_BAD="-3": negative (want a count)`,
	}
	if got := strings.Count(err.Error(), "\n"); got != len(msgs) {
		t.Errorf("%d lines after the first, want %d:\n%s", got, len(msgs), err)
	}
	if !strings.HasPrefix(err.Error(), fmt.Sprintf("%d settings are wrong:\n", len(msgs))) {
		t.Errorf("error does not start with the count:\n%s", err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), "\n  "+m) {
			t.Errorf("error does not say %q:\n%s", m, err)
		}
	}
}

func atoi(v string) (int, error) {
	var n int
	_, err := fmt.Sscanf(v, "%d", &n)
	return n, err
}

// TestAdd: validate()'s problems join the getters', once per variable;
// the forms of a message; errors.As finds each problem.
func TestAdd(t *testing.T) {
	r := New(envconftest.Env(map[string]string{"N": "x"}))
	r.Int("N", 1, 0, 9)
	r.Add(nil,
		&Error{Name: "N", Value: "1", Want: "reported twice"},
		errors.Join(&Error{Name: "REQ", Want: "a path"}, &Error{Name: "TOKEN", Value: "short", Secret: true, Want: "16 or more characters"}),
		&Error{Name: "MECH", Why: "not set, but USER is", Want: "PLAIN"},
		&Error{Name: "TLS", Value: "false", Why: "CA_FILE is set, so TLS is wanted"},
	)
	err := r.Err()
	want := "5 settings are wrong:\n" +
		"  N=\"x\": want a whole number from 0 to 9\n" +
		"  REQ is not set: want a path\n" +
		"  TOKEN (5 characters): want 16 or more characters\n" +
		"  MECH: not set, but USER is (want PLAIN)\n" +
		"  TLS=\"false\": CA_FILE is set, so TLS is wanted"
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Name != "N" {
		t.Fatalf("errors.As: %v", e)
	}
	if New(envconftest.Env(nil)).Err() != nil {
		t.Fatal("a reader with no problem returns an error")
	}
	one := New(envconftest.Env(map[string]string{"N": "x"}))
	one.Int("N", 1, 0, 9)
	if got := one.Err().Error(); got != `N="x": want a whole number from 0 to 9` {
		t.Fatalf("one problem: %q", got)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1 << 10: "1KiB", 3 << 20: "3MiB", 1 << 40: "1024GiB", 1<<20 + 1: "1048577"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %s, want %s", n, got, want)
		}
	}
}
