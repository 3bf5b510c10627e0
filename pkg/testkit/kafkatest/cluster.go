package kafkatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/hookline/hookline/pkg/testkit/freeport"
	"github.com/hookline/hookline/pkg/testkit/proctest"
)

// Cluster is a private Apache Kafka for one test, that the test may stop,
// kill and start again: nodes combined broker+controller nodes on loopback
// ports of their own, started by compose/kafka.sh cluster-up (the script
// `make kafka-cluster-up` runs) in a directory of their own. The shared
// broker of KAFKA_BROKERS is never touched.
type Cluster struct {
	tb      testing.TB
	script  string
	env     []string
	dir     string
	brokers []string
}

// StartCluster starts a private cluster of nodes brokers (1 for a single
// broker) and waits until every broker is registered; the cluster is killed
// and its directory removed at the end of the test (kept, and named in the
// log, when the test failed). With three nodes or more every topic gets
// replication factor 3 and min.insync.replicas 2; below, the number of nodes
// and 1. Each node takes a 384 MiB heap and a few seconds of CPU to start.
// Skips the test when java is missing, or when the Kafka jars are not
// fetched yet and mvn is missing.
func StartCluster(tb testing.TB, nodes int) *Cluster {
	tb.Helper()
	if nodes < 1 {
		tb.Fatalf("kafkatest.StartCluster: %d nodes; want at least 1", nodes)
	}
	root := proctest.RepoRoot()
	if _, err := exec.LookPath(javaCommand()); err != nil {
		tb.Skipf("private Kafka cluster: java not found (%v); install Java 17+ or set JAVA_HOME", err)
	}
	jars := os.Getenv("KAFKA_JARS_DIR")
	if jars == "" {
		jars = filepath.Join(root, ".kafka", "jars")
	}
	if _, err := os.Stat(filepath.Join(jars, ".complete")); err != nil {
		if _, err := exec.LookPath("mvn"); err != nil {
			tb.Skipf("private Kafka cluster: no Kafka jars in %s and no mvn to fetch them (run make kafka-up once)", jars)
		}
	}
	dir, err := os.MkdirTemp("", "hookline-kafka-")
	if err != nil {
		tb.Fatal(err)
	}
	ports := freePorts(tb, 2*nodes)
	c := &Cluster{tb: tb, script: filepath.Join(root, "compose", "kafka.sh"), dir: dir}
	var bp, cp []string
	for i := 0; i < nodes; i++ {
		bp = append(bp, strconv.Itoa(ports[i]))
		cp = append(cp, strconv.Itoa(ports[nodes+i]))
		c.brokers = append(c.brokers, "127.0.0.1:"+bp[i])
	}
	// The caller's own cluster settings must not leak into this one.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAFKA_CLUSTER_") && !strings.HasPrefix(kv, "KAFKA_EXTRA_CONFIG=") &&
			!strings.HasPrefix(kv, "KAFKA_JARS_DIR=") {
			c.env = append(c.env, kv)
		}
	}
	c.env = append(c.env,
		"KAFKA_CLUSTER_PORTS="+strings.Join(bp, ","),
		"KAFKA_CLUSTER_CONTROLLER_PORTS="+strings.Join(cp, ","),
		"KAFKA_CLUSTER_DIR="+dir,
		"KAFKA_JARS_DIR="+jars,
		"KAFKA_STOP_TIMEOUT=30",
	)
	tb.Cleanup(c.teardown)
	start := time.Now()
	c.run(5*time.Minute, "cluster-up")
	tb.Logf("private Kafka: %d node(s) on %s ready in %s (dir %s)", nodes, strings.Join(c.brokers, ","),
		time.Since(start).Round(100*time.Millisecond), dir)
	return c
}

// Brokers are the cluster's addresses, node 1 first.
func (c *Cluster) Brokers() []string { return append([]string(nil), c.brokers...) }

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.brokers) }

// Dir holds node-N/ (data, logs/server.log) for every node.
func (c *Cluster) Dir() string { return c.dir }

// Stop stops node n (1-based) with SIGTERM and waits for it to exit
// (SIGKILL after 30 s): a controlled shutdown that moves its leaderships.
func (c *Cluster) Stop(n int) { c.node(n, time.Minute, "down") }

// Kill kills node n with SIGKILL and waits until it is gone: a crash.
func (c *Cluster) Kill(n int) { c.node(n, time.Minute, "kill") }

// Start starts nodes again, all at once, and waits until a metadata
// request lists each. A node of a cluster whose other nodes are down cannot
// become ready (the quorum needs a majority); a single node can, and so can
// nodes started together that make a majority.
func (c *Cluster) Start(nodes ...int) {
	c.tb.Helper()
	if len(nodes) == 1 {
		c.node(nodes[0], 3*time.Minute, "up")
		return
	}
	for _, n := range nodes {
		if n < 1 || n > len(c.brokers) {
			c.tb.Fatalf("kafkatest.Cluster: node %d of %d", n, len(c.brokers))
		}
	}
	errs := make([]error, len(nodes))
	outs := make([][]byte, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = c.exec(3*time.Minute, "node", strconv.Itoa(n), "up")
		}()
	}
	wg.Wait()
	failed := false
	for i, err := range errs {
		if err != nil {
			c.tb.Errorf("compose/kafka.sh node %d up: %v\n%s", nodes[i], err, outs[i])
			failed = true
		}
	}
	if failed {
		c.tb.FailNow()
	}
}

func (c *Cluster) node(n int, timeout time.Duration, cmd string) {
	c.tb.Helper()
	if n < 1 || n > len(c.brokers) {
		c.tb.Fatalf("kafkatest.Cluster: node %d of %d", n, len(c.brokers))
	}
	c.run(timeout, "node", strconv.Itoa(n), cmd)
}

// WaitInSync waits until every partition of the topics has all its replicas
// in sync (a restarted node has caught up), failing the test after timeout.
func (c *Cluster) WaitInSync(timeout time.Duration, topics ...string) {
	c.tb.Helper()
	adm := kadm.NewClient(Client(c.tb, c.brokers))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var behind []string
	for {
		behind = behind[:0]
		td, err := adm.ListTopics(ctx, topics...)
		if err == nil {
			for _, name := range topics {
				t, ok := td[name]
				if !ok || t.Err != nil || len(t.Partitions) == 0 {
					behind = append(behind, name+" (no metadata)")
					continue
				}
				for _, p := range t.Partitions.Sorted() {
					if len(p.ISR) < len(p.Replicas) {
						behind = append(behind, fmt.Sprintf("%s[%d] isr %v of %v", name, p.Partition, p.ISR, p.Replicas))
					}
				}
			}
		} else {
			behind = append(behind, err.Error())
		}
		if len(behind) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			c.tb.Fatalf("replicas not in sync within %s: %s", timeout, strings.Join(behind, "; "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// run runs compose/kafka.sh with the cluster's settings, failing the test
// with the script's output when it fails.
func (c *Cluster) run(timeout time.Duration, args ...string) {
	c.tb.Helper()
	if out, err := c.exec(timeout, args...); err != nil {
		c.tb.Fatalf("compose/kafka.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *Cluster) exec(timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.script, args...)
	cmd.Env = c.env
	// The brokers' own output goes to their log files; the script's pipe
	// closes when it exits.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// teardown kills every node (the data is thrown away, so nothing is gained
// by a clean stop) and removes the directory unless the test failed.
func (c *Cluster) teardown() {
	for n := 1; n <= len(c.brokers); n++ {
		if out, err := c.exec(time.Minute, "node", strconv.Itoa(n), "kill"); err != nil {
			c.tb.Errorf("kafkatest: killing node %d of the private cluster: %v\n%s", n, err, out)
		}
	}
	if c.tb.Failed() {
		c.tb.Logf("private Kafka cluster kept for inspection: %s (node-N/logs/server.log)", c.dir)
		return
	}
	if err := os.RemoveAll(c.dir); err != nil {
		c.tb.Errorf("kafkatest: %v", err)
	}
}

// freePorts returns n distinct free loopback ports (freeport.Ports).
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports, err := freeport.Ports(n)
	if err != nil {
		tb.Fatal(err)
	}
	return ports
}

// javaCommand is the java compose/kafka.sh runs: $JAVA, $JAVA_HOME/bin/java
// or java on the PATH.
func javaCommand() string {
	if j := os.Getenv("JAVA"); j != "" {
		return j
	}
	if h := os.Getenv("JAVA_HOME"); h != "" {
		return filepath.Join(h, "bin", "java")
	}
	return "java"
}
