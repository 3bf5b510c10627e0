// Package proctest runs hookline's service binaries as real processes in
// tests, so a test can send them signals (SIGTERM, SIGKILL) and count what
// survives. Binaries come from HOOKLINE_BIN_DIR (make test sets it to bin/)
// or are built once per test binary into a temporary folder.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built caches binaries built by this test process, by service name.
var built struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// Binary returns the path of the service's binary (ingest, processor,
// retrier, dlq).
func Binary(tb testing.TB, service string) string {
	tb.Helper()
	if dir := os.Getenv("HOOKLINE_BIN_DIR"); dir != "" {
		p := filepath.Join(dir, service)
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("HOOKLINE_BIN_DIR=%s: %v (run make build)", dir, err)
		}
		return p
	}
	built.Lock()
	defer built.Unlock()
	if p, ok := built.paths[service]; ok {
		return p
	}
	if built.dir == "" {
		d, err := os.MkdirTemp("", "hookline-bin-")
		if err != nil {
			tb.Fatal(err)
		}
		built.dir, built.paths = d, map[string]string{}
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out := filepath.Join(built.dir, service)
	cmd := exec.Command("go", "build", "-o", out, "./"+service)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./%s: %v\n%s", service, err, b)
	}
	built.paths[service] = out
	return out
}

// Proc is a running service process whose output is kept for the test log.
type Proc struct {
	Cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// Start runs the binary with env (added to a minimal environment) and kills
// it at the end of the test if it is still running.
func Start(tb testing.TB, path string, env []string, args ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p := &Proc{Cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
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

// Output is everything the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
