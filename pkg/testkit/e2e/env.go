package e2e

import (
	"os"
	"strconv"
	"testing"
)

// EnvCount reads a scenario's size from the environment variable name (to
// run it larger or smaller by hand): def when unset, else a whole number
// of at least least, or the test fails saying so.
func EnvCount(tb testing.TB, name string, def, least int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		tb.Fatalf("%s=%q: want a whole number, at least %d", name, v, least)
	}
	return n
}
