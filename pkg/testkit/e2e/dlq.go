package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/proctest"
)

// DLQRun is one finished run of the dlq binary.
type DLQRun struct {
	Args   []string
	Stdout string
	Stderr string
	Code   int
	Took   time.Duration
}

// DLQ runs the dlq binary with args and the system's environment plus extra
// (which wins), waits up to two minutes for it, and returns its output and
// exit code. It fails the test only when the binary cannot run.
func (s *System) DLQ(extra map[string]string, args ...string) DLQRun {
	s.tb.Helper()
	path := proctest.Binary(s.tb, "dlq")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, s.envList("dlq", extra)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := DLQRun{Args: args, Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.Code = ee.ExitCode()
	default:
		s.tb.Fatalf("dlq %s: %v\nstderr:\n%s", strings.Join(args, " "), err, r.Stderr)
	}
	return r
}

// Want fails the test unless the run exited with code.
func (r DLQRun) Want(tb testing.TB, code int) DLQRun {
	tb.Helper()
	if r.Code != code {
		tb.Fatalf("dlq %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.Args, " "), r.Code, code, r.Stdout, r.Stderr)
	}
	return r
}

// JSONLines decodes stdout as one JSON object per line, failing the test on
// any line that is not one.
func (r DLQRun) JSONLines(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	if r.Stdout == "" {
		return nil
	}
	for i, line := range strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			tb.Fatalf("dlq %s: stdout line %d is not a JSON object: %v\n%s", strings.Join(r.Args, " "), i+1, err, line)
		}
		out = append(out, m)
	}
	return out
}

// StartDLQServe runs `dlq serve` on a free loopback port with the admin
// token (none when empty) and waits until the console page answers. Its Addr
// is the base URL's host:port.
func (s *System) StartDLQServe(token string, extra map[string]string) *Service {
	s.tb.Helper()
	env := map[string]string{}
	if token != "" {
		env["HOOKLINE_ADMIN_TOKEN"] = token
	}
	maps.Copy(env, extra)
	return s.startListening("dlq", "HOOKLINE_ADMIN_ADDR", "/ui/", env, "serve")
}

// EnsureTopics creates the system's topics and checks them, as every service
// does at start-up (ingest -ensure-topics), without leaving a service
// running.
func (s *System) EnsureTopics() {
	s.tb.Helper()
	p := proctest.Start(s.tb, proctest.Binary(s.tb, "ingest"), s.envList("ingest", nil), "-ensure-topics")
	if err := p.Wait(2 * time.Minute); err != nil {
		s.tb.Fatalf("ingest -ensure-topics: %v\n%s", err, p.Output())
	}
}
