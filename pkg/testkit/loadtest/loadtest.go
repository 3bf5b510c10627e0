// Package loadtest holds what hookline's benchmark programs (pkg/bench/...)
// share: the cluster to run against and its clients (through kafkaconf, so
// TLS and SASL work as in the services), a process's CPU time and RSS read
// from /proc, the broker's own ProducerPerformance as the baseline every
// ratio is taken against, a scrape of a Prometheus counter, closed- and
// open-loop load phases, the service binaries (found by
// proctest.BinaryPath) run as processes; Run sets all of that up for one
// benchmark and deletes its topics and folder at the end. Linux only;
// loopback only.
package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/testkit/freeport"
	"github.com/hookline/hookline/pkg/testkit/proctest"
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

// RSS returns the resident set size of the process in bytes (VmRSS).
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// PeakRSS returns the largest resident set size the process has had, in
// bytes (VmHWM).
func PeakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM") }

// statusBytes reads a "<field>: N kB" line of /proc/<pid>/status.
func statusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// MachineCPU is the whole machine's CPU time so far, summed over its
// cores, from the first line of /proc/stat: busy (user, nice, system, irq,
// softirq and steal) and all of it (busy, idle and iowait). Between two
// reads, busy's difference over all's is the share of the machine that
// was busy, whoever used it: our programs, the broker, other users.
func MachineCPU() (busy, all time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks [8]int64 // user nice system idle iowait irq softirq steal
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d: %w", i+1, err)
		}
	}
	idle := ticks[3] + ticks[4]
	var sum int64
	for _, t := range ticks {
		sum += t
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	return tick(sum - idle), tick(sum), nil
}

// BrokerPID reads the local broker's pid from file (compose/kafka.sh
// writes it): 0 when file is empty, or does not name a live Kafka broker
// (said on stderr after prog's name); its CPU is then not measured.
func BrokerPID(file, prog string) int {
	if file == "" {
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v: the broker's CPU is not measured\n", prog, err)
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		fmt.Fprintf(os.Stderr, "%s: %s: no pid in it: the broker's CPU is not measured\n", prog, file)
		return 0
	}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !bytes.Contains(cmd, []byte("kafka.Kafka")) {
		fmt.Fprintf(os.Stderr, "%s: %s: pid %d is not a running Kafka broker: the broker's CPU is not measured\n", prog, file, pid)
		return 0
	}
	return pid
}

var perfLine = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency.*`)

// Perf is the summary line of ProducerPerformance.
type Perf struct {
	Records       int
	RecordsPerSec float64
	MBPerSec      float64
	AvgLatencyMS  float64
	// Line is the summary line as the tool printed it; Command is how it
	// was run ("compose/kafka.sh perf ...", the client properties file
	// named, not shown).
	Line    string
	Command string
}

// ProducerPerformance runs the broker's own perf tool (compose/kafka.sh perf)
// against an existing topic of the cluster cfg names, as cfg says to reach
// it (TLS and SASL through a client properties file, kafkaconf's
// JavaProperties): records of recordSize bytes, acks=all, as fast as it can.
// It is the physical-limit baseline of every benchmark here.
func ProducerPerformance(ctx context.Context, cfg kafkaconf.Config, topic string, records, recordSize int) (Perf, error) {
	args := []string{"perf", "--bootstrap-server", strings.Join(cfg.Brokers, ","), "--topic", topic,
		"--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(recordSize), "--throughput", "-1",
		"--command-property", "acks=all"}
	props, err := cfg.JavaProperties()
	if err != nil {
		return Perf{}, fmt.Errorf("ProducerPerformance: %w", err)
	}
	if props != "" {
		f, err := os.CreateTemp("", "hookline-perf-*.properties") // mode 0600: it holds the password
		if err != nil {
			return Perf{}, err
		}
		defer os.Remove(f.Name())
		_, err = f.WriteString(props)
		if err = errors.Join(err, f.Close()); err != nil {
			return Perf{}, err
		}
		args = append(args, "--command-config", f.Name())
	}
	out, err := exec.CommandContext(ctx, filepath.Join(proctest.RepoRoot(), "compose", "kafka.sh"), args...).CombinedOutput()
	if err != nil {
		return Perf{}, fmt.Errorf("ProducerPerformance: %w\n%s", err, out)
	}
	p, err := parsePerf(string(out), records)
	p.Command = "compose/kafka.sh " + strings.Join(args, " ")
	return p, err
}

// parsePerf reads the summary of ProducerPerformance's output (the last
// line of its shape), which must count all of records.
func parsePerf(out string, records int) (Perf, error) {
	m := perfLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return Perf{}, fmt.Errorf("ProducerPerformance: no summary line in\n%s", out)
	}
	last := m[len(m)-1]
	p := Perf{Line: strings.TrimSpace(last[0])}
	p.Records, _ = strconv.Atoi(last[1])
	p.RecordsPerSec, _ = strconv.ParseFloat(last[2], 64)
	p.MBPerSec, _ = strconv.ParseFloat(last[3], 64)
	p.AvgLatencyMS, _ = strconv.ParseFloat(last[4], 64)
	if p.Records != records {
		return p, fmt.Errorf("ProducerPerformance sent %d records, not %d:\n%s", p.Records, records, out)
	}
	return p, nil
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

// FreeAddr returns a loopback address with a free port (freeport.Addr).
func FreeAddr() (string, error) { return freeport.Addr() }

// KafkaConfig is the cluster a benchmark runs against, read as the services
// read it (kafkaconf: KAFKA_BROKERS, KAFKA_TLS*, KAFKA_SASL_*; an unset
// KAFKA_BROKERS is 127.0.0.1:9092), so a benchmark reaches any cluster they
// can, and the services it starts inherit the same variables. It refuses
// brokers that are not loopback addresses: benchmarks load only this
// machine.
func KafkaConfig() (kafkaconf.Config, error) {
	cfg, err := kafkaconf.FromEnv(os.LookupEnv)
	if err != nil {
		return cfg, err
	}
	for _, b := range cfg.Brokers {
		host, _, err := net.SplitHostPort(b)
		if err != nil {
			return cfg, fmt.Errorf("KAFKA_BROKERS: %q: %w", b, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return cfg, fmt.Errorf("KAFKA_BROKERS: %q: the benchmark runs against a loopback broker only", b)
		}
	}
	return cfg, nil
}
