package report

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a report was measured.
type Machine struct {
	Cores        int    `json:"cores"`
	CPUModel     string `json:"cpu_model"`
	GoVersion    string `json:"go_version"`
	KafkaVersion string `json:"kafka_version"`
	OS           string `json:"os"`
	Commit       string `json:"commit"`
	Date         string `json:"date"`
	// LoadStart and LoadEnd are the 1, 5 and 15 minute load averages when
	// the run began and ended (LoadEnd empty until the run is finished).
	LoadStart []float64 `json:"load_start,omitempty"`
	LoadEnd   []float64 `json:"load_end,omitempty"`
}

// EnvKafkaVersion overrides the Kafka version the description reads from the
// local broker's build file (for a broker of another version).
const EnvKafkaVersion = "HOOKLINE_BENCH_KAFKA_VERSION"

// Describe reads this machine's description; what cannot be read is left
// "unknown" (or empty for the load average).
func Describe() Machine {
	return Machine{
		Cores:        runtime.NumCPU(),
		CPUModel:     cpuModel(),
		GoVersion:    runtime.Version(),
		KafkaVersion: kafkaVersion(),
		OS:           osName(),
		Commit:       commit(),
		Date:         time.Now().UTC().Format(time.RFC3339),
		LoadStart:    LoadAverage(),
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

var kafkaVersionRE = regexp.MustCompile(`<kafka\.version>([^<]+)</kafka\.version>`)

// kafkaVersion is the version the local broker's jars are fetched at
// (compose/kafka/pom.xml, looked for from the working directory up, as a
// test runs in its package's folder), unless HOOKLINE_BENCH_KAFKA_VERSION
// says otherwise.
func kafkaVersion() string {
	if v := os.Getenv(EnvKafkaVersion); v != "" {
		return v
	}
	dir, err := os.Getwd()
	if err != nil {
		return "unknown"
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "compose", "kafka", "pom.xml")); err == nil {
			if m := kafkaVersionRE.FindSubmatch(b); m != nil {
				return string(m[1])
			}
			return "unknown"
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "unknown"
		}
		dir = up
	}
}

func osName() string {
	name := runtime.GOOS + "/" + runtime.GOARCH
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				name += ", " + strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		name += ", kernel " + strings.TrimSpace(string(b))
	}
	return name
}

// commit is the working tree's commit, with "+dirty" when it has changes.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

// LoadAverage reads the 1, 5 and 15 minute load averages; nil when it cannot.
func LoadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var l [3]float64
	if _, err := fmt.Sscan(string(b), &l[0], &l[1], &l[2]); err != nil {
		return nil
	}
	return l[:]
}
