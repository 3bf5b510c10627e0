// Package loadtest holds what hookline's benchmark programs share: a
// process's CPU time and RSS read from /proc, the broker's own
// ProducerPerformance as the baseline every ratio is taken against, a
// scrape of a Prometheus counter, closed- and open-loop load phases, the
// service binaries run as processes, and the clean-up of a run's topics.
// Linux only; loopback only.
package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat; 100
// on every Linux this runs on.
const clockTicks = 100

// CPU returns the user+system CPU time the process has used so far.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from after ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// RSS returns the resident set size of the process in bytes.
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

var perfLine = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency`)

// Perf is the summary line of ProducerPerformance.
type Perf struct {
	Records       int
	RecordsPerSec float64
	MBPerSec      float64
	AvgLatencyMS  float64
}

// ProducerPerformance runs the broker's own perf tool (compose/kafka.sh perf)
// against an existing topic: records of recordSize bytes, acks=all, as fast
// as it can. It is the physical-limit baseline of every benchmark here.
func ProducerPerformance(ctx context.Context, brokers, topic string, records, recordSize int) (Perf, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "compose", "kafka.sh"), "perf",
		"--bootstrap-server", brokers, "--topic", topic, "--num-records", strconv.Itoa(records),
		"--record-size", strconv.Itoa(recordSize), "--throughput", "-1", "--producer-props", "acks=all")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Perf{}, fmt.Errorf("ProducerPerformance: %w\n%s", err, out)
	}
	m := perfLine.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		return Perf{}, fmt.Errorf("ProducerPerformance: no summary line in\n%s", out)
	}
	last := m[len(m)-1]
	p := Perf{}
	p.Records, _ = strconv.Atoi(last[1])
	p.RecordsPerSec, _ = strconv.ParseFloat(last[2], 64)
	p.MBPerSec, _ = strconv.ParseFloat(last[3], 64)
	p.AvgLatencyMS, _ = strconv.ParseFloat(last[4], 64)
	return p, nil
}

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CounterSum scrapes url (a /metrics endpoint) and sums every sample of the
// named counter or gauge whose label set contains each of match, written as
// in the exposition (`result="committed"`); with no match, across all
// labels. 0 when there is none.
func CounterSum(ctx context.Context, url, name string, match ...string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // another metric, or a longer name with this prefix
		}
		labels := ""
		if rest[0] == '{' {
			labels = rest[:strings.IndexByte(rest, '}')+1]
		}
		for _, m := range match {
			if !strings.Contains(labels, m) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// FreeAddr returns a loopback address with a free port.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// WaitReady polls url until it answers 200, for at most timeout.
func WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %s", url, timeout)
}

// LoopbackBrokers reads KAFKA_BROKERS (default 127.0.0.1:9092) and refuses
// anything that is not a loopback address: benchmarks load only this
// machine.
func LoopbackBrokers() ([]string, error) {
	v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS"))
	if v == "" {
		v = "127.0.0.1:9092"
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		host, _, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil {
			return nil, fmt.Errorf("KAFKA_BROKERS=%q: %w", v, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("KAFKA_BROKERS=%q: the benchmark runs against a loopback broker only", v)
		}
		out = append(out, strings.TrimSpace(b))
	}
	return out, nil
}
