package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Proc is a service binary a benchmark runs (its path from
// proctest.BinaryPath), its output in a log file.
type Proc struct {
	Name string
	Log  string // path of the output file
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs the binary at path with this process's environment plus env
// (later entries win), writing its stdout and stderr to logPath.
func Start(path string, env []string, logPath string, args ...string) (*Proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &Proc{Name: filepath.Base(path), Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process id (for CPU and RSS).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// WaitReady polls url until it answers 200, failing early, with the end
// of the log, when the process exits first.
func (p *Proc) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s answered 200: %v\n%s", p.Name, url, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s: %s did not answer 200 within %s\n%s", p.Name, url, timeout, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits up to timeout for exit status 0; a process
// still running then is killed, and that is an error too.
func (p *Proc) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return fmt.Errorf("%s had already exited: %v\n%s", p.Name, p.err, p.tail())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s on SIGTERM: %w\n%s", p.Name, p.err, p.tail())
		}
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s still running %s after SIGTERM: killed\n%s", p.Name, timeout, p.tail())
	}
}

// Kill ends the process with SIGKILL if it still runs, and waits for it:
// the deferred clean-up of a benchmark that stopped early.
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Err is nil while the process runs; once it has exited it says how
// (exit status 0 included: a service should not stop by itself).
func (p *Proc) Err() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("%s exited (status 0)", p.Name)
		}
		return fmt.Errorf("%s exited: %w\n%s", p.Name, p.err, p.tail())
	default:
		return nil
	}
}

// tail is the last 4 KiB of the log.
func (p *Proc) tail() string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return fmt.Sprintf("--- end of %s ---\n%s", p.Log, b)
}
