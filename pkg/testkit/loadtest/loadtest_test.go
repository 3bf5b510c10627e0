package loadtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCounterSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `# HELP hookline_retrier_moved_records_total Records moved.
# TYPE hookline_retrier_moved_records_total counter
hookline_retrier_moved_records_total{tier="1s"} 3
hookline_retrier_moved_records_total{tier="2s"} 4.5
hookline_retrier_moved_records_totalish 100
hookline_retrier_paused_partitions 2
hookline_processor_transactions_total{instance="p1",result="aborted"} 2
hookline_processor_transactions_total{instance="p1",result="committed"} 40
`)
	}))
	defer srv.Close()
	for _, c := range []struct {
		name  string
		match []string
		want  float64
	}{
		{"hookline_retrier_moved_records_total", nil, 7.5}, // not the longer name
		{"hookline_retrier_paused_partitions", nil, 2},     // no labels
		{"absent", nil, 0},
		{"hookline_processor_transactions_total", []string{`result="committed"`}, 40},
		{"hookline_processor_transactions_total", []string{`instance="p1"`, `result="aborted"`}, 2},
		{"hookline_retrier_paused_partitions", []string{`tier="1s"`}, 0}, // a match needs labels
	} {
		got, err := CounterSum(t.Context(), srv.URL+"/metrics", c.name, c.match...)
		if err != nil || got != c.want {
			t.Errorf("CounterSum(%s, %q) = %v, %v; want %v", c.name, c.match, got, err, c.want)
		}
	}
	if _, err := CounterSum(t.Context(), srv.URL+"/nothing", "absent"); err == nil {
		t.Error("a 404 summed to a number")
	}
}

func TestParsePerf(t *testing.T) {
	out := `log4j: a warning
9000 records sent, 1799.6 records/sec (1.76 MB/sec), 12.3 ms avg latency, 400.0 ms max latency.
10000 records sent, 1981.378 records/sec (1.93 MB/sec), 11.52 ms avg latency, 412.00 ms max latency, 8 ms 50th, 30 ms 95th, 60 ms 99th, 400 ms 99.9th.
`
	p, err := parsePerf(out, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if p.Records != 10000 || p.RecordsPerSec != 1981.378 || p.MBPerSec != 1.93 || p.AvgLatencyMS != 11.52 ||
		p.Line != "10000 records sent, 1981.378 records/sec (1.93 MB/sec), 11.52 ms avg latency, 412.00 ms max latency, 8 ms 50th, 30 ms 95th, 60 ms 99th, 400 ms 99.9th." {
		t.Errorf("parsePerf = %+v: want the last line's figures, and the line", p)
	}
	if _, err := parsePerf(out, 20000); err == nil || !strings.Contains(err.Error(), "sent 10000 records, not 20000") {
		t.Errorf("a short run: err %v, want one naming the counts", err)
	}
	if _, err := parsePerf("Exception in thread main", 10); err == nil {
		t.Error("no summary line: no error")
	}
}

func TestProcessFigures(t *testing.T) {
	pid := os.Getpid()
	rss, err := RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	peak, err := PeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("RSS %d, peak %d: want a positive RSS at most the peak", rss, peak)
	}
	if _, err := CPU(pid); err != nil {
		t.Error(err)
	}
	if _, err := RSS(-1); err == nil {
		t.Error("RSS of no process: no error")
	}
}

// TestMachineCPU burns 100 ms of this process's CPU between two reads of
// the machine's (spinning until its own count shows it, however long a
// loaded machine takes, up to a minute): the machine's busy time grows by
// at least this process's (less a tick of each count), and never past its
// total.
func TestMachineCPU(t *testing.T) {
	busy0, all0, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	own0, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	own1 := own0
	for deadline := time.Now().Add(time.Minute); own1-own0 < 100*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("this process used %s of CPU in a minute of spinning", own1-own0)
		}
		for spin := time.Now().Add(10 * time.Millisecond); time.Now().Before(spin); {
		}
		if own1, err = CPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	busy1, all1, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	own, busy, all := own1-own0, busy1-busy0, all1-all0
	if busy < own-2*time.Second/clockTicks || all < busy {
		t.Errorf("this process used %s, the machine was busy %s of %s: want the machine's busy at least the process's, at most its total", own, busy, all)
	}
}

// TestBrokerPID: no file, no pid in it, or a pid that is not a Kafka
// broker (this test's own) all give 0: the broker is then not measured.
func TestBrokerPID(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, file := range []string{"", filepath.Join(dir, "missing.pid"), write("empty.pid", ""), write("word.pid", "kafka\n"), write("self.pid", fmt.Sprintf("%d\n", os.Getpid()))} {
		if pid := BrokerPID(file, "test"); pid != 0 {
			t.Errorf("BrokerPID(%q) = %d, want 0", file, pid)
		}
	}
}

func TestKafkaConfig(t *testing.T) {
	for _, k := range []string{"KAFKA_TLS", "KAFKA_TLS_CA_FILE", "KAFKA_TLS_INSECURE", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USER", "KAFKA_SASL_PASSWORD"} {
		t.Setenv(k, "") // empty is unset to kafkaconf
	}
	for _, c := range []struct {
		brokers, wantErr string
	}{
		{"", ""}, // 127.0.0.1:9092, as the services
		{"127.0.0.1:29300,localhost:9092,[::1]:9092", ""},
		{"10.0.0.5:9092", "loopback broker only"},
		{"127.0.0.1:9092,kafka.example:9092", "loopback broker only"},
		{"127.0.0.1", "no port"},
	} {
		t.Setenv("KAFKA_BROKERS", c.brokers)
		cfg, err := KafkaConfig()
		if c.wantErr == "" && (err != nil || len(cfg.Brokers) == 0) || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("KAFKA_BROKERS=%q: %+v, %v; want error %q", c.brokers, cfg, err, c.wantErr)
		}
	}
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:9092")
	t.Setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-512") // without a user: as the services, an error
	if _, err := KafkaConfig(); err == nil || !strings.Contains(err.Error(), "KAFKA_SASL_USER") {
		t.Errorf("SASL without a user: %v", err)
	}
}

func TestPrefix(t *testing.T) {
	a, b := Prefix("bench-x"), Prefix("bench-x")
	if a == b || !strings.HasPrefix(a, "bench-x-") || !strings.HasSuffix(a, ".") || len(a) != len("bench-x-")+6+1 {
		t.Errorf("Prefix: %q and %q; want two distinct bench-x-<6 hex>.", a, b)
	}
}
