package kafkaconf

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

func TestFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string // substring; "" means valid
		opts    int    // options Opts returns (seed brokers and metadata age, then TLS, SASL), for valid configs
	}{
		{"defaults", nil, "", 2},
		{"brokers list", map[string]string{"KAFKA_BROKERS": "a:9092, b:9093,"}, "", 2},
		{"no port", map[string]string{"KAFKA_BROKERS": "kafka"}, "has no port", 0},
		{"bad tls", map[string]string{"KAFKA_TLS": "yes please"}, "KAFKA_TLS", 0},
		{"tls", map[string]string{"KAFKA_TLS": "true"}, "", 3},
		{"plain", map[string]string{"KAFKA_SASL_MECHANISM": "plain", "KAFKA_SASL_USER": "u", "KAFKA_SASL_PASSWORD": "p w"}, "", 3},
		{"scram tls", map[string]string{"KAFKA_TLS": "1", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USER": "u", "KAFKA_SASL_PASSWORD": "p"}, "", 4},
		{"scram without password", map[string]string{"KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "KAFKA_SASL_USER": "u"}, "KAFKA_SASL_PASSWORD", 0},
		{"unknown mechanism", map[string]string{"KAFKA_SASL_MECHANISM": "GSSAPI", "KAFKA_SASL_USER": "u", "KAFKA_SASL_PASSWORD": "p"}, "GSSAPI", 0},
		{"user without mechanism", map[string]string{"KAFKA_SASL_USER": "u"}, "KAFKA_SASL_MECHANISM", 0},
		{"ca without tls", map[string]string{"KAFKA_TLS_CA_FILE": "/x"}, "KAFKA_TLS: not true, but KAFKA_TLS_CA_FILE is set, for TLS only (want true)", 0},
		{"ca and insecure without tls", map[string]string{"KAFKA_TLS_CA_FILE": "/x", "KAFKA_TLS_INSECURE": "true"}, "KAFKA_TLS: not true, but KAFKA_TLS_CA_FILE and KAFKA_TLS_INSECURE are set, for TLS only (want true)", 0},
		{"every wrong variable at once", map[string]string{"KAFKA_BROKERS": "a:1,kafka", "KAFKA_TLS": "maybe", "KAFKA_TLS_INSECURE": "sure", "KAFKA_SASL_MECHANISM": "MD5"},
			"4 settings are wrong:\n" +
				`  KAFKA_BROKERS="a:1,kafka": "kafka" has no port (want host:port addresses, comma-separated)` + "\n" +
				`  KAFKA_TLS="maybe": want true or false` + "\n" +
				`  KAFKA_TLS_INSECURE="sure": want true or false` + "\n" +
				`  KAFKA_SASL_MECHANISM="MD5": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`, 0},
		{"sasl without user and password", map[string]string{"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_PASSWORD": ""},
			"KAFKA_SASL_USER: not set, but KAFKA_SASL_MECHANISM=PLAIN needs it (want the SASL user name)\n" +
				"  KAFKA_SASL_PASSWORD: not set, but KAFKA_SASL_MECHANISM=PLAIN needs it (want the SASL user's password)", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(envconftest.Env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			opts, err := c.Opts()
			if err != nil || len(opts) != tc.opts {
				t.Fatalf("Opts: %d options, err %v; want %d", len(opts), err, tc.opts)
			}
			if strings.Contains(c.String(), "p w") {
				t.Fatal("String() shows the password")
			}
		})
	}
}

func TestCAFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a cert"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := FromEnv(envconftest.Env(map[string]string{"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": bad}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Opts(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("Opts with a bad CA file: %v", err)
	}
	c.TLSCAFile = filepath.Join(dir, "missing.pem")
	if _, err := c.Opts(); err == nil {
		t.Fatal("Opts with a missing CA file did not fail")
	}
}

func TestExplain(t *testing.T) {
	secure := Config{Brokers: []string{"b:9095"}, TLS: true, TLSCAFile: "/ca.pem", SASLMechanism: "SCRAM-SHA-512", SASLUser: "ingest", SASLPassword: "s3cret-pw"}
	plain := secure
	plain.TLS, plain.TLSCAFile = false, ""
	cases := []struct {
		name string
		c    Config
		err  error
		want string // "" means unchanged
	}{
		{"nil", secure, nil, ""},
		{"wrong password", secure, fmt.Errorf("list topics: %w", kerr.SaslAuthenticationFailed), `SASL authentication failed for user "ingest" (SCRAM-SHA-512)`},
		{"unknown CA", secure, fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}), "KAFKA_TLS_CA_FILE=/ca.pem does not hold the CA"},
		{"plaintext on TLS", plain, errors.New("invalid large response size 352518912 > limit 104857600; the first three bytes received appear to be a tls alert record for TLS v1.2; is this a plaintext connection speaking to a tls endpoint?"), "KAFKA_TLS is not true"},
		{"other", secure, kerr.NotLeaderForPartition, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.c.Explain(tc.err)
			if tc.want == "" {
				if got != tc.err {
					t.Fatalf("Explain changed %v into %v", tc.err, got)
				}
				return
			}
			if !strings.Contains(got.Error(), tc.want) || !errors.Is(got, tc.err) {
				t.Fatalf("Explain: %v; want it to say %q and wrap %v", got, tc.want, tc.err)
			}
			if strings.Contains(got.Error(), tc.c.SASLPassword) {
				t.Fatal("Explain shows the password")
			}
		})
	}
}

func TestJavaProperties(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"plaintext", nil, "", ""},
		{"tls", map[string]string{"KAFKA_TLS": "true"}, "security.protocol=SSL\n", ""},
		{"tls with ca", map[string]string{"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": "/ca.pem"},
			"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n", ""},
		{"sasl plain, no tls", map[string]string{"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USER": "u", "KAFKA_SASL_PASSWORD": "p"},
			"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";\n", ""},
		{"scram over tls, a password to escape", map[string]string{"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": "/ca.pem", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USER": "svc", "KAFKA_SASL_PASSWORD": `a"b\c`},
			"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\nsasl.mechanism=SCRAM-SHA-512\n" +
				`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="svc" password="a\\"b\\\\c";` + "\n", ""},
		{"insecure", map[string]string{"KAFKA_TLS": "true", "KAFKA_TLS_INSECURE": "true"}, "", "KAFKA_TLS_INSECURE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(envconftest.Env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.JavaProperties()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("JavaProperties() = %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}
