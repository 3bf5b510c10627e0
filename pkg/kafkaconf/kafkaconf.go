// Package kafkaconf turns the Kafka connection settings of DESIGN §9
// (KAFKA_BROKERS, KAFKA_TLS, KAFKA_SASL_*) into franz-go options, in one place,
// so every service and every test reaches Kafka the same way. Tests pass extra
// options (a kfake cluster's address, a short timeout) to the same function.
package kafkaconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// DefaultBrokers is where `make kafka-up` starts the local broker.
const DefaultBrokers = "127.0.0.1:9092"

// Config holds how to reach the Kafka cluster.
type Config struct {
	// Brokers are the seed brokers (KAFKA_BROKERS, comma-separated).
	Brokers []string
	// TLS enables TLS (KAFKA_TLS=true). TLSCAFile (KAFKA_TLS_CA_FILE) adds a
	// CA bundle to the system pool; TLSInsecure (KAFKA_TLS_INSECURE=true)
	// skips verification, for test clusters only.
	TLS         bool
	TLSCAFile   string
	TLSInsecure bool
	// SASLMechanism is "", "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"
	// (KAFKA_SASL_MECHANISM), with KAFKA_SASL_USER and KAFKA_SASL_PASSWORD.
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
}

// FromEnv reads the configuration; lookupEnv is os.LookupEnv in production.
// An unset KAFKA_BROKERS means DefaultBrokers.
func FromEnv(lookupEnv func(string) (string, bool)) (Config, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	var c Config
	brokers := get("KAFKA_BROKERS")
	if brokers == "" {
		brokers = DefaultBrokers
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	var err error
	if c.TLS, err = parseBool("KAFKA_TLS", get("KAFKA_TLS")); err != nil {
		return Config{}, err
	}
	if c.TLSInsecure, err = parseBool("KAFKA_TLS_INSECURE", get("KAFKA_TLS_INSECURE")); err != nil {
		return Config{}, err
	}
	c.TLSCAFile = get("KAFKA_TLS_CA_FILE")
	c.SASLMechanism = strings.ToUpper(get("KAFKA_SASL_MECHANISM"))
	c.SASLUser = get("KAFKA_SASL_USER")
	c.SASLPassword, _ = lookupEnv("KAFKA_SASL_PASSWORD") // a password may have spaces
	return c, c.validate()
}

func parseBool(name, v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("KAFKA_BROKERS: no broker address")
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			return fmt.Errorf("KAFKA_BROKERS: %q has no port (want host:port)", b)
		}
	}
	switch c.SASLMechanism {
	case "":
		if c.SASLUser != "" {
			return fmt.Errorf("KAFKA_SASL_USER is set but KAFKA_SASL_MECHANISM is not (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if c.SASLUser == "" || c.SASLPassword == "" {
			return fmt.Errorf("KAFKA_SASL_MECHANISM=%s needs KAFKA_SASL_USER and KAFKA_SASL_PASSWORD", c.SASLMechanism)
		}
	default:
		return fmt.Errorf("KAFKA_SASL_MECHANISM=%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	}
	if (c.TLSCAFile != "" || c.TLSInsecure) && !c.TLS {
		return fmt.Errorf("KAFKA_TLS_CA_FILE or KAFKA_TLS_INSECURE is set but KAFKA_TLS is not true")
	}
	return nil
}

// Opts returns the franz-go options for this configuration followed by
// extra, so a caller can override anything (later options win).
func (c Config) Opts(extra ...kgo.Opt) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		// How soon metadata may be refreshed again when a request finds it
		// stale (an unknown topic just created, a moved leader). franz-go's
		// 5 s default held the first produce to a new topic past ingest's
		// produce deadline; refreshes stay on demand, so this costs nothing
		// in steady state.
		kgo.MetadataMinAge(500 * time.Millisecond),
	}
	if c.TLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.TLSInsecure} //nolint:gosec // opt-in for test clusters
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("KAFKA_TLS_CA_FILE: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("KAFKA_TLS_CA_FILE %s: no PEM certificate in it", c.TLSCAFile)
			}
			tc.RootCAs = pool
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return append(opts, extra...), nil
}

func (c Config) mechanism() sasl.Mechanism {
	switch c.SASLMechanism {
	case "PLAIN":
		return plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}

// String describes the configuration without the password.
func (c Config) String() string {
	return fmt.Sprintf("brokers=%s tls=%t sasl=%q", strings.Join(c.Brokers, ","), c.TLS, c.SASLMechanism)
}
