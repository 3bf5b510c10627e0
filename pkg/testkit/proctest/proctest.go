// Package proctest runs hookline's service binaries as real processes in
// tests, so a test can send them signals (SIGTERM, SIGKILL) and count what
// survives. Binaries come from HOOKLINE_BIN_DIR (make test sets it to bin/)
// or are built once per process into a temporary folder: BinaryPath is how
// every test and benchmark (pkg/bench) finds them.
package proctest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built caches binaries built by this process, by service name.
var built struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// RepoRoot is the repository's top folder (go.mod, compose/, bin/): the
// nearest folder holding go.mod above where this file was compiled. The
// source tree must be on the machine that runs the tests or benchmarks, as
// it is for the ones built here.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			panic("proctest: no go.mod above " + filepath.Dir(file))
		}
		dir = up
	}
}

// BinaryPath is the one way tests and benchmarks find a service binary
// (ingest, processor, retrier, dlq): $HOOKLINE_BIN_DIR/<service> when
// HOOKLINE_BIN_DIR is set (make build, make test and make bench-* point it
// at bin/; the file must be there), else `go build ./<service>` into a
// temporary folder, once per process and service (seconds the first time,
// less from Go's build cache; the folder is left for the OS to clean).
func BinaryPath(service string) (string, error) {
	if dir := os.Getenv("HOOKLINE_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, service)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("HOOKLINE_BIN_DIR=%s: %w (run make build)", dir, err)
		}
		return p, nil
	}
	built.Lock()
	defer built.Unlock()
	if p, ok := built.paths[service]; ok {
		return p, nil
	}
	if built.dir == "" {
		d, err := os.MkdirTemp("", "hookline-bin-")
		if err != nil {
			return "", err
		}
		built.dir, built.paths = d, map[string]string{}
	}
	out := filepath.Join(built.dir, service)
	cmd := exec.Command("go", "build", "-o", out, "./"+service)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./%s: %w\n%s", service, err, b)
	}
	built.paths[service] = out
	return out, nil
}

// Binary is BinaryPath for a test: it fails tb when the binary is missing
// or does not build.
func Binary(tb testing.TB, service string) string {
	tb.Helper()
	p, err := BinaryPath(service)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Proc is a running service process whose output is kept for the test log.
type Proc struct {
	Cmd  *exec.Cmd
	out  *Buffer
	done chan struct{}
	err  error
}

// Start runs the binary with env (added to a minimal environment) and kills
// it at the end of the test if it is still running.
func Start(tb testing.TB, path string, env []string, args ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p := &Proc{Cmd: cmd, out: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", path, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if tb.Failed() {
			tb.Logf("%s output:\n%s", filepath.Base(path), p.Output())
		}
	})
	return p
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns its error
// (nil for exit status 0).
func (p *Proc) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %s", timeout)
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// TimerSlacks is the timer slack of each of the process's threads, by
// thread id, from /proc (Linux only: /proc/<tid>/timerslack_ns, which a
// thread's own folder under /proc/<pid>/task does not have).
func (p *Proc) TimerSlacks() (map[int]time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", p.Cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int]time.Duration, len(tasks))
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", t.Name(), "timerslack_ns"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended since the listing
		}
		if err != nil {
			return nil, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%s/timerslack_ns: %w", t.Name(), err)
		}
		tid, _ := strconv.Atoi(t.Name())
		out[tid] = time.Duration(ns)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no thread of process %d left in %s", p.Cmd.Process.Pid, dir)
	}
	return out, nil
}

// CheckTimerSlack fails the test unless every thread of the running
// process has the timer slack want (package timerslack). Linux only:
// elsewhere nothing sets it, and nothing is checked.
func (p *Proc) CheckTimerSlack(tb testing.TB, want time.Duration) {
	tb.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	slacks, err := p.TimerSlacks()
	if err != nil {
		tb.Fatalf("%s: %v", filepath.Base(p.Cmd.Path), err)
	}
	for tid, d := range slacks {
		if d != want {
			tb.Errorf("%s: thread %d of %d has a timer slack of %v, want %v", filepath.Base(p.Cmd.Path), tid, len(slacks), d, want)
		}
	}
}

// Output is everything the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Buffer is a bytes.Buffer that goroutines may write at once: a process's
// output, or a logger's destination in a test.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
