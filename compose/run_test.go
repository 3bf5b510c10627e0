package compose

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// output collects a process's lines and lets a test wait for one.
type output struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced on every line
	done  chan struct{} // closed at the end of the output
}

func newOutput(r io.Reader) *output {
	o := &output{more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			o.mu.Lock()
			o.lines = append(o.lines, sc.Text())
			close(o.more)
			o.more = make(chan struct{})
			o.mu.Unlock()
		}
	}()
	return o
}

// await returns the submatches of the first line matching re, or nil when
// deadline passes or the output ends without one.
func (o *output) await(re *regexp.Regexp, deadline time.Time) []string {
	for ended := false; ; {
		o.mu.Lock()
		for _, l := range o.lines {
			if m := re.FindStringSubmatch(l); m != nil {
				o.mu.Unlock()
				return m
			}
		}
		more := o.more
		o.mu.Unlock()
		if ended {
			return nil
		}
		select {
		case <-more:
		case <-o.done:
			ended = true // one more look at what came before the end
		case <-time.After(time.Until(deadline)):
			return nil
		}
	}
}

// tail is the last n lines, for failure messages.
func (o *output) tail(n int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines[max(0, len(o.lines)-n):], "\n")
}

// TestMakeRun runs compose/run.sh against KAFKA_BROKERS, pastes the curl it
// prints, and waits for the sink's line and for the key's trace on the
// console's API to say done.
func TestMakeRun(t *testing.T) {
	if os.Getenv("KAFKA_BROKERS") == "" {
		t.Skip("KAFKA_BROKERS is unset: run with KAFKA_BROKERS=host:port after make build (make test does both)")
	}
	for _, b := range []string{"sink", "ingest", "processor", "retrier", "dlq"} {
		if _, err := os.Stat(filepath.Join("..", "bin", b)); err != nil {
			t.Skipf("bin/%s is missing: run make build first (make test does)", b)
		}
	}
	addr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	dir := t.TempDir()
	prefix := kafkatest.Prefix(t)
	// start runs run.sh on free ports. A port taken by someone else between
	// its pick and run.sh's listen ends that run: it is tried again, up to 3
	// times, on new ports.
	var (
		cmd    *exec.Cmd
		out    *output
		exited chan error
		curl   []string
	)
	stopped := true
	t.Cleanup(func() {
		if !stopped { // a failed test: everything run.sh started goes
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	for try := 1; curl == nil; try++ {
		cmd = exec.Command("compose/run.sh")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(),
			"HOOKLINE_RUN_KAFKA=", // the broker is the caller's
			"HOOKLINE_TOPIC_PREFIX="+prefix,
			"HOOKLINE_INGEST_ADDR="+addr(),
			"HOOKLINE_ADMIN_ADDR="+addr(),
			"HOOKLINE_SINK_ADDR="+addr(),
			"HOOKLINE_PROCESSOR_METRICS_ADDR="+addr(),
			"HOOKLINE_RETRIER_METRICS_ADDR="+addr(),
			"HOOKLINE_ADMIN_TOKEN=",
			"HOOKLINE_PROVIDERS=",
			"HOOKLINE_RETRY_TIERS=",
			"HOOKLINE_STATE_DIR="+filepath.Join(dir, "state"),
			"HOOKLINE_TRACE_DIR="+filepath.Join(dir, "trace"),
		)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, pw
		out = newOutput(pr)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited = make(chan error, 1)
		go func() { exited <- cmd.Wait(); pw.Close() }()
		stopped = false

		curl = out.await(regexp.MustCompile(`^curl -si .*`), time.Now().Add(3*time.Minute))
		if curl != nil {
			break
		}
		inUse := out.await(regexp.MustCompile(`address already in use`), time.Now())
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		stopped = true
		if inUse == nil || try == 3 {
			t.Fatalf("run.sh printed no curl within 3 minutes (try %d); its last lines:\n%s", try, out.tail(40))
		}
		t.Logf("try %d: a port was taken (%s); again on new ports", try, inUse[0])
	}
	deadline := time.Now().Add(time.Minute)
	console := out.await(regexp.MustCompile(`^run: ready\. Console: (http://[^/]+)/ui/#token=([0-9a-f]+)$`), deadline)
	if console == nil {
		t.Fatalf("no console line; last lines:\n%s", out.tail(40))
	}
	key := "acme:" + regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(curl[0])[1]
	ans, err := exec.Command("bash", "-c", curl[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(ans), `"status":"accepted"`) {
		t.Fatalf("the printed curl: %v\n%s", err, ans)
	}

	deadline = time.Now().Add(2 * time.Minute) // a key of the failing third is done on attempt 3, after 5s+20s
	line := out.await(regexp.MustCompile(`^sink: .* /flaky/acme provider=acme key=`+regexp.QuoteMeta(key)+` event=order.created attempt=\d+ bytes=\d+ -> 200$`), deadline)
	if line == nil {
		t.Fatalf("the sink printed no 200 line for %s within 2 minutes; last lines:\n%s", key, out.tail(40))
	}
	t.Logf("sink: %s", line[0])
	var state string
	var trace struct {
		Now struct {
			State string `json:"state"`
		} `json:"now"`
		Attempts int `json:"attempts"`
	}
	for state != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("GET /events/%s: state %q after 2 minutes, want done", key, state)
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, console[1]+"/events/"+key, nil)
		req.Header.Set("Authorization", "Bearer "+console[2])
		if res, err := http.DefaultClient.Do(req); err == nil {
			if res.StatusCode == http.StatusOK {
				_ = json.NewDecoder(res.Body).Decode(&trace)
				state = trace.Now.State
			}
			res.Body.Close()
		}
		if state != "done" {
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("console: %s done after %d attempts", key, trace.Attempts)

	stopped = true
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("run.sh on SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Fatalf("run.sh did not stop within a minute of SIGTERM; last lines:\n%s", out.tail(40))
	}
	if last := out.await(regexp.MustCompile(`^run: broker not touched`), time.Now().Add(5*time.Second)); last == nil {
		t.Errorf("no closing broker line; last lines:\n%s", out.tail(10))
	}
}
