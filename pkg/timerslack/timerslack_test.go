//go:build linux

package timerslack

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childWant, in a child's environment, makes the test binary a child
// that calls Ensure with that many nanoseconds and reports on stdout.
const childWant = "TIMERSLACK_TEST_WANT"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(childWant); ok {
		child(v)
		return
	}
	os.Exit(m.Run())
}

// child prints one "start" line each time the program starts (before
// Ensure), then, once Ensure returned, the slack and error it gave, the
// marker's presence and the slack of every thread of the process it could
// read.
func child(v string) {
	have, _ := current()
	fmt.Printf("start pid=%d slack=%d\n", os.Getpid(), have)
	n, _ := strconv.ParseInt(v, 10, 64)
	got, err := Ensure(time.Duration(n))
	_, marked := os.LookupEnv(execMark)
	fmt.Printf("ensured pid=%d slack=%d err=%v marked=%v\n", os.Getpid(), got, err, marked)
	// On one thread throughout, so that at least its own slack is readable
	// without CAP_SYS_NICE.
	runtime.LockOSThread()
	tids, _ := os.ReadDir("/proc/self/task")
	for _, t := range tids {
		b, err := os.ReadFile("/proc/" + t.Name() + "/timerslack_ns")
		if err != nil {
			fmt.Printf("thread %s unreadable: %v\n", t.Name(), err)
			continue
		}
		fmt.Printf("thread %s slack=%s\n", t.Name(), strings.TrimSpace(string(b)))
	}
}

// runChild runs the test binary as a child that ensures want, with the
// extra environment, and returns its lines.
func runChild(t *testing.T, want time.Duration, extra ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childWant+"="+strconv.FormatInt(want.Nanoseconds(), 10)), extra...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v; stderr: %s", err, errOut.String())
	}
	var lines []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	t.Logf("child (want %v):\n%s", want, strings.Join(lines, "\n"))
	return lines
}

// field is the value of key=... in line.
func field(t *testing.T, line, key string) string {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s= in %q", key, line)
	return ""
}

func prefixed(lines []string, p string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			out = append(out, l)
		}
	}
	return out
}

// odd is a slack no process here has by chance: more than Linux's default
// (50 µs) and than this test's own.
func odd(t *testing.T) time.Duration {
	have, err := current()
	if err != nil {
		t.Fatal(err)
	}
	return max(have, 50*time.Microsecond) + 2*time.Millisecond + 123
}

// TestEnsureStartsAgainInPlace: a process with less slack than it wants
// starts again once, as the same process, and then every thread of it has
// the slack it wanted; the marker is gone.
func TestEnsureStartsAgainInPlace(t *testing.T) {
	want := odd(t)
	lines := runChild(t, want)
	starts := prefixed(lines, "start ")
	if len(starts) != 2 {
		t.Fatalf("%d starts, want 2 (one start again)", len(starts))
	}
	if a, b := field(t, starts[0], "pid"), field(t, starts[1], "pid"); a != b {
		t.Errorf("started again as pid %s, first as %s: want the same process", b, a)
	}
	if got := field(t, starts[1], "slack"); got != strconv.FormatInt(want.Nanoseconds(), 10) {
		t.Errorf("slack at the second start %s, want %d", got, want.Nanoseconds())
	}
	ensured := prefixed(lines, "ensured ")
	if len(ensured) != 1 {
		t.Fatalf("%d ensured lines, want 1", len(ensured))
	}
	if got := field(t, ensured[0], "slack"); got != strconv.FormatInt(want.Nanoseconds(), 10) {
		t.Errorf("Ensure gave slack %s, want %d", got, want.Nanoseconds())
	}
	if got := field(t, ensured[0], "err"); got != "<nil>" {
		t.Errorf("Ensure: err=%s", got)
	}
	if got := field(t, ensured[0], "marked"); got != "false" {
		t.Errorf("%s still in the environment after Ensure", execMark)
	}
	threads := prefixed(lines, "thread ")
	readable := 0
	for _, l := range threads {
		if strings.Contains(l, "unreadable") {
			continue // another thread's slack needs CAP_SYS_NICE to read
		}
		readable++
		if got := field(t, l, "slack"); got != strconv.FormatInt(want.Nanoseconds(), 10) {
			t.Errorf("%s: want slack=%d", l, want.Nanoseconds())
		}
	}
	if readable == 0 {
		t.Errorf("no thread's slack readable: %q", threads)
	}
}

// TestEnsureEnoughAlready: a process that has the slack, or asks for none,
// does not start again.
func TestEnsureEnoughAlready(t *testing.T) {
	for _, want := range []time.Duration{0, time.Nanosecond} {
		lines := runChild(t, want)
		if starts := prefixed(lines, "start "); len(starts) != 1 {
			t.Errorf("want %v: %d starts, want 1", want, len(starts))
		}
		if e := prefixed(lines, "ensured "); len(e) != 1 || field(t, e[0], "err") != "<nil>" {
			t.Errorf("want %v: %q", want, e)
		}
	}
}

// TestEnsureKernelDidNotKeep: started again (the marker set) and still
// short of the slack, as on a kernel that did not keep it across execve,
// Ensure says so instead of starting again, and removes the marker.
func TestEnsureKernelDidNotKeep(t *testing.T) {
	want := odd(t)
	lines := runChild(t, want, execMark+"="+want.String())
	if starts := prefixed(lines, "start "); len(starts) != 1 {
		t.Fatalf("%d starts, want 1: no start again after one", len(starts))
	}
	e := prefixed(lines, "ensured ")
	if len(e) != 1 || !strings.Contains(e[0], "does not keep it across execve") {
		t.Fatalf("want the kernel named in the error: %q", e)
	}
	if field(t, e[0], "marked") != "false" {
		t.Errorf("marker left in the environment: %q", e[0])
	}
}
