package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
)

// TestSecureWrongPasswordProcessorRetrier starts the processor and the
// retrier against the secure broker with a wrong password: each stays up,
// names the user in its log (never a password) and answers /readyz 503
// with the reason. (Ingest's failures: TestSecureKafkaFailures.)
func TestSecureWrongPasswordProcessorRetrier(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	b := kafkatest.Secure(t)
	sys := e2e.New(t, e2e.Options{Secure: b})
	const wrong = "not-the-password-0123456789"
	for _, start := range []struct {
		user string
		run  func() *e2e.Service
	}{
		{"processor", func() *e2e.Service { return sys.StartProcessor("p1", map[string]string{"KAFKA_SASL_PASSWORD": wrong}) }},
		{"retrier", func() *e2e.Service { return sys.StartRetrier(map[string]string{"KAFKA_SASL_PASSWORD": wrong}) }},
	} {
		svc := start.run()
		want := `SASL authentication failed for user "` + start.user + `"`
		unescape := func(s string) string { return strings.ReplaceAll(s, `\"`, `"`) }
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(unescape(svc.Output()), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the log does not say %q within 60s:\n%s", start.user, want, svc.Output())
			}
			time.Sleep(200 * time.Millisecond)
		}
		resp, err := http.Get("http://" + svc.Addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(unescape(string(body)), want) {
			t.Fatalf("%s /readyz: %d %s; want 503 saying %q", start.user, resp.StatusCode, body, want)
		}
		real := b.Env(start.user)["KAFKA_SASL_PASSWORD"]
		if strings.Contains(svc.Output(), wrong) || strings.Contains(svc.Output(), real) || strings.Contains(string(body), wrong) {
			t.Fatalf("%s shows a password", start.user)
		}
		if svc.Exited() {
			t.Fatalf("%s exited:\n%s", start.user, svc.Output())
		}
	}
}
