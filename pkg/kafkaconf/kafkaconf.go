// Package kafkaconf turns the Kafka connection settings of DESIGN §9
// (KAFKA_BROKERS, KAFKA_TLS, KAFKA_SASL_*) into franz-go options, in one place,
// so every service and every test reaches Kafka the same way. Tests pass extra
// options (a kfake cluster's address, a short timeout) to the same function.
package kafkaconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/hookline/hookline/pkg/envconf"
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
// An unset KAFKA_BROKERS means DefaultBrokers. The error names every wrong
// variable (Read).
func FromEnv(lookupEnv func(string) (string, bool)) (Config, error) {
	r := envconf.New(lookupEnv)
	c := Read(r)
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// mechanisms are the KAFKA_SASL_MECHANISM values hookline supports.
var mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Read reads the configuration with r, which collects every problem with
// it, the variables' combinations included (validate). A service reads its
// own settings with the same r, so one error names them all.
func Read(r *envconf.Reader) Config {
	c := Config{
		Brokers:       envconf.Parse(r, "KAFKA_BROKERS", []string{DefaultBrokers}, "host:port addresses, comma-separated", parseBrokers),
		TLS:           r.Bool("KAFKA_TLS", false),
		TLSCAFile:     r.String("KAFKA_TLS_CA_FILE", ""),
		TLSInsecure:   r.Bool("KAFKA_TLS_INSECURE", false),
		SASLMechanism: r.OneOf("KAFKA_SASL_MECHANISM", "", mechanisms...),
		SASLUser:      r.String("KAFKA_SASL_USER", ""),
		SASLPassword:  r.Secret("KAFKA_SASL_PASSWORD"), // a password may have spaces
	}
	r.Add(c.validate())
	return c
}

func parseBrokers(v string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if !strings.Contains(b, ":") {
			return nil, fmt.Errorf("%q has no port", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("no broker address")
	}
	return out, nil
}

// validate checks what no single variable shows: SASL settings that go
// together, TLS options without TLS.
func (c Config) validate() error {
	var errs []error
	switch c.SASLMechanism {
	case "":
		if c.SASLUser != "" {
			errs = append(errs, &envconf.Error{Name: "KAFKA_SASL_MECHANISM", Why: "not set, but KAFKA_SASL_USER is", Want: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"})
		}
	default:
		needs := "not set, but KAFKA_SASL_MECHANISM=" + c.SASLMechanism + " needs it"
		if c.SASLUser == "" {
			errs = append(errs, &envconf.Error{Name: "KAFKA_SASL_USER", Why: needs, Want: "the SASL user name"})
		}
		if c.SASLPassword == "" {
			errs = append(errs, &envconf.Error{Name: "KAFKA_SASL_PASSWORD", Why: needs, Want: "the SASL user's password"})
		}
	}
	var tlsOpts []string
	if c.TLSCAFile != "" {
		tlsOpts = append(tlsOpts, "KAFKA_TLS_CA_FILE")
	}
	if c.TLSInsecure {
		tlsOpts = append(tlsOpts, "KAFKA_TLS_INSECURE")
	}
	if len(tlsOpts) > 0 && !c.TLS {
		set := " is set"
		if len(tlsOpts) > 1 {
			set = " are set"
		}
		errs = append(errs, &envconf.Error{Name: "KAFKA_TLS", Why: "not true, but " + strings.Join(tlsOpts, " and ") + set + ", for TLS only", Want: "true"})
	}
	return errors.Join(errs...)
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
