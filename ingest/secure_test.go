package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/proctest"
)

// TestSecureKafkaFailures runs the ingest binary against the local secure
// broker (SASL_SSL, SCRAM-SHA-512; compose/kafka.sh secure-up) with its own
// user, then with one setting wrong at a time. Each wrong setting is named
// in the log, never with a password; /readyz answers 503 with the reason;
// a signed webhook is answered 503 kafka_unavailable with Retry-After,
// never 2xx.
func TestSecureKafkaFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the secure broker")
	}
	b := kafkatest.Secure(t)
	prefix := kafkatest.Prefix(t)
	b.Grant(t, prefix)
	password := b.Env("ingest")["KAFKA_SASL_PASSWORD"]
	wrongPassword := "wrong-" + fmt.Sprint(time.Now().UnixNano())
	otherCA := writeOtherCA(t)

	t.Run("own user", func(t *testing.T) {
		e, base, _ := startSecureIngest(t, b, prefix, nil)
		resp, body := e.post(t, base, "stripe", "application/json", []byte(`{"id":"evt_secure_1","object":"event","type":"invoice.paid"}`), nil)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d with ingest's own user, want 202: %s", resp.StatusCode, body)
		}
	})

	cases := []struct {
		name string
		env  map[string]string // changes to ingest's own settings ("" unsets)
		want string            // in the log and in /readyz
	}{
		{"wrong password", map[string]string{"KAFKA_SASL_PASSWORD": wrongPassword},
			`SASL authentication failed for user "ingest"`},
		{"wrong CA", map[string]string{"KAFKA_TLS_CA_FILE": otherCA},
			"certificate signed by unknown authority"},
		{"plaintext client on the secure port", map[string]string{"KAFKA_TLS": "", "KAFKA_TLS_CA_FILE": ""},
			"a TLS listener (SSL or SASL_SSL) does that to a plaintext client, and KAFKA_TLS is not true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, base, proc := startSecureIngest(t, b, prefix, tc.env)
			logText := func() string { return strings.ReplaceAll(proc.Output(), `\"`, `"`) }
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(logText(), tc.want) {
				if time.Now().After(deadline) {
					t.Fatalf("the log does not say %q within 60s:\n%s", tc.want, proc.Output())
				}
				time.Sleep(200 * time.Millisecond)
			}
			for _, secret := range []string{password, wrongPassword} {
				if strings.Contains(proc.Output(), secret) {
					t.Fatalf("the log shows a password")
				}
			}

			resp, err := http.Get(base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ready := strings.ReplaceAll(string(body), `\"`, `"`)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(ready, tc.want) {
				t.Fatalf("/readyz: %d %s; want 503 saying %q", resp.StatusCode, ready, tc.want)
			}
			if strings.Contains(ready, password) || strings.Contains(ready, wrongPassword) {
				t.Fatal("/readyz shows a password")
			}

			for i := 0; i < 3; i++ {
				resp, body := e.post(t, base, "stripe", "application/json", []byte(fmt.Sprintf(`{"id":"evt_refused_%d","object":"event","type":"invoice.paid"}`, i)), nil)
				var a answer
				_ = json.Unmarshal(body, &a)
				if resp.StatusCode != http.StatusServiceUnavailable || a.Error != "kafka_unavailable" || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("webhook: %d %s (Retry-After %q); want 503 kafka_unavailable with Retry-After",
						resp.StatusCode, body, resp.Header.Get("Retry-After"))
				}
			}
			if proc.Exited() {
				t.Fatalf("ingest exited; it must keep answering:\n%s", proc.Output())
			}
		})
	}
}

// startSecureIngest runs the ingest binary as ingest's user of the secure
// broker, its settings changed by change, and returns its base URL once it
// answers /healthz.
func startSecureIngest(t *testing.T, b *kafkatest.SecureBroker, prefix string, change map[string]string) (*testEnv, string, *proctest.Proc) {
	t.Helper()
	e := &testEnv{brokers: b.Brokers, prefix: prefix, vars: map[string]string{
		"HOOKLINE_TOPIC_PREFIX":     prefix,
		"HOOKLINE_PARTITIONS":       "3",
		"HOOKLINE_RETRY_TIERS":      "1s",
		"HOOKLINE_INGEST_ADDR":      e2e.FreeAddr(t),
		"HOOKLINE_PROVIDERS":        providersFile,
		"HOOKLINE_PRODUCE_DEADLINE": "3s",
		"HOOKLINE_LOG_LEVEL":        "info",
	}}
	for k, v := range secrets {
		e.vars[k] = v
	}
	for k, v := range b.Env("ingest") {
		e.vars[k] = v
	}
	for k, v := range change {
		if v == "" {
			delete(e.vars, k)
		} else {
			e.vars[k] = v
		}
	}
	reg, err := providers.Load(providersFile, e.lookup)
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reg
	var env []string
	for k, v := range e.vars {
		env = append(env, k+"="+v)
	}
	proc := proctest.Start(t, proctest.Binary(t, "ingest"), env)
	base := "http://" + e.vars["HOOKLINE_INGEST_ADDR"]
	e2e.WaitHTTP(t, base+"/healthz", 30*time.Second)
	if change == nil {
		e2e.WaitHTTP(t, base+"/readyz", 60*time.Second)
	}
	return e, base, proc
}

// writeOtherCA writes a CA certificate that signed nothing of the broker's.
func writeOtherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the broker's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
