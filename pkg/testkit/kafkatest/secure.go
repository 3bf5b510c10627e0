package kafkatest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/testkit/proctest"
)

// SecureBroker is the local secure broker of `make kafka-secure-up`
// (compose/kafka.sh secure-up): SASL_SSL with SCRAM-SHA-512, a CA of its
// own, one user per service plus admin, and ACLs only (pkg/kafkaacl).
type SecureBroker struct {
	// Dir holds ca.pem and <user>.env for admin, ingest, processor,
	// retrier and dlq.
	Dir       string
	Brokers   []string
	script    string
	scriptEnv []string // compose/kafka.sh's environment (SecureEnv)
	env       map[string]map[string]string
}

var secureOnce struct {
	once sync.Once
	b    *SecureBroker
	skip string
	err  error
}

// Secure returns the local secure broker, starting it (compose/kafka.sh
// secure-up, about 30 s the first time) when it is not running. Outside CI
// the test is skipped, saying why, when it cannot be started (no java,
// openssl or Kafka jars, a port in use); under CI (CI=true) that fails it.
//
// Its ports are KAFKA_SECURE_PORT and KAFKA_SECURE_CONTROLLER_PORT, by
// default three and four above the plaintext broker's: KAFKA_PORT, else the
// port of KAFKA_BROKERS when that is one loopback address (SecureEnv). So a
// checkout testing against its own broker gets its own secure one, in its
// own directory (KAFKA_SECURE_DIR, default .kafka-secure in the checkout).
func Secure(tb testing.TB) *SecureBroker {
	tb.Helper()
	s := &secureOnce
	s.once.Do(func() { s.b, s.skip, s.err = startSecure() })
	if s.skip != "" {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("secure Kafka: %s (CI=true: .ci/run installs what it needs)", s.skip)
		}
		tb.Skipf("secure Kafka: %s; or run make kafka-secure-up", s.skip)
	}
	if s.err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("secure Kafka: %v", s.err)
		}
		tb.Skipf("secure Kafka could not be started (under CI=true this fails): %v", s.err)
	}
	return s.b
}

func startSecure() (*SecureBroker, string, error) {
	root := proctest.RepoRoot()
	for _, tool := range []string{javaCommand(), "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, tool + " not found", nil
		}
	}
	jars := os.Getenv("KAFKA_JARS_DIR")
	if jars == "" {
		jars = filepath.Join(root, ".kafka", "jars")
	}
	if _, err := os.Stat(filepath.Join(jars, ".complete")); err != nil {
		if _, err := exec.LookPath("mvn"); err != nil {
			return nil, "no Kafka jars in " + jars + " and no mvn to fetch them", nil
		}
	}
	b := &SecureBroker{script: filepath.Join(root, "compose", "kafka.sh"), env: map[string]map[string]string{},
		scriptEnv: SecureEnv(os.Environ())}
	out, err := b.run(5*time.Minute, "secure-up")
	if err != nil {
		return nil, "", fmt.Errorf("compose/kafka.sh secure-up: %w\n%s", err, out)
	}
	dir := os.Getenv("KAFKA_SECURE_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".kafka-secure")
	}
	b.Dir = dir
	for _, u := range []string{"admin", "ingest", "processor", "retrier", "dlq"} {
		vars, err := kafkaconf.ReadEnvFile(filepath.Join(dir, u+".env"))
		if err != nil {
			return nil, "", err
		}
		b.env[u] = vars
	}
	b.Brokers = strings.Split(b.env["admin"]["KAFKA_BROKERS"], ",")
	return b, "", nil
}

func (b *SecureBroker) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.script, args...)
	cmd.Env = b.scriptEnv
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Env is the KAFKA_* environment of a user (admin, ingest, processor,
// retrier, dlq): what `set -a; . .kafka-secure/<user>.env` sets.
func (b *SecureBroker) Env(user string) map[string]string {
	out := map[string]string{}
	for k, v := range b.env[user] {
		out[k] = v
	}
	return out
}

// Config is a user's connection settings.
func (b *SecureBroker) Config(tb testing.TB, user string) kafkaconf.Config {
	tb.Helper()
	vars := b.env[user]
	if vars == nil {
		tb.Fatalf("secure Kafka: no user %q", user)
	}
	c, err := kafkaconf.FromEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Opts are a user's franz-go connection options (TLS with the broker's CA,
// SCRAM-SHA-512), for kafkatest.Client and the like.
func (b *SecureBroker) Opts(tb testing.TB, user string) []kgo.Opt {
	tb.Helper()
	opts, err := b.Config(tb, user).Opts()
	if err != nil {
		tb.Fatal(err)
	}
	return opts
}

// Client is a client acting as user, closed at the end of the test.
func (b *SecureBroker) Client(tb testing.TB, user string, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := b.Config(tb, user).NewClient(opts...)
	if err != nil {
		tb.Fatalf("kafka client as %s: %v", user, err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Grant gives every service its ACLs for topics and groups named with
// prefix (compose/kafka.sh secure-acls PREFIX), as a test with its own
// HOOKLINE_TOPIC_PREFIX needs; at the end of the test the admin user
// deletes the topics and groups named with it.
func (b *SecureBroker) Grant(tb testing.TB, prefix string) {
	tb.Helper()
	if out, err := b.run(3*time.Minute, "secure-acls", prefix); err != nil {
		tb.Fatalf("compose/kafka.sh secure-acls %s: %v\n%s", prefix, err, out)
	}
	tb.Cleanup(func() { deletePrefix(tb, b.Config(tb, "admin"), prefix) })
}

// SecureEnv is environ for compose/kafka.sh's secure commands: with
// KAFKA_PORT added, when it is unset and KAFKA_BROKERS is one loopback
// address, as that address's port, so that the script's default secure
// ports (KAFKA_PORT+3 and +4) follow the broker the tests use rather than
// 9095 and 9096 whatever the checkout.
func SecureEnv(environ []string) []string {
	var brokers string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "KAFKA_PORT=") && kv != "KAFKA_PORT=" {
			return environ
		}
		if v, ok := strings.CutPrefix(kv, "KAFKA_BROKERS="); ok {
			brokers = strings.TrimSpace(v)
		}
	}
	host, port, err := net.SplitHostPort(brokers)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return environ
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535-4 {
		return environ
	}
	return append(slices.Clip(environ), "KAFKA_PORT="+port)
}
