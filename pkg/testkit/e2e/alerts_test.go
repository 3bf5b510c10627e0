package e2e_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/proctest"
)

// TestAlertReachesAPerson runs `make observe`'s script (compose/observe.sh:
// Debian's Prometheus and Alertmanager) on free loopback ports, scraping
// ingest, processor, retrier and dlq serve every second, with a copy of
// compose/prometheus/alerts.yml in which HooklineTargetDown waits 5s instead
// of 2m, and a webhook receiver (HOOKLINE_ALERT_WEBHOOK_URL) that is this
// test's HTTP server. It kills the processor under flow: the receiver is
// told that HooklineTargetDown fires for the processor's instance, with the
// rule's labels and its runbook link (its line in docs/operating.md), and for no
// other instance; after the processor's restart, that the alert resolved.
// Every delivery accepted meanwhile ends done. When the test ends, the
// script has stopped Prometheus and Alertmanager and removed its temporary
// folder.
func TestAlertReachesAPerson(t *testing.T) {
	skipShort(t)
	requireObserveTools(t)
	const alert = "HooklineTargetDown"
	rules, runbook := rulesWithFor(t, alert, "5s")
	recv := newAlertReceiver(t)

	const batch = 64
	sys := e2e.New(t, e2e.Options{Partitions: 4})
	ingest := sys.StartIngest()
	proc := sys.StartProcessor("p1", map[string]string{"HOOKLINE_MAX_INFLIGHT": fmt.Sprint(batch), "HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch)})
	retrier := sys.StartRetrier(nil)
	dlq := sys.StartDLQServe("e2e-alerts-token-0123456789abcdef", nil)

	obs := startObserve(t, map[string]string{
		"HOOKLINE_INGEST_ADDR":            ingest.Addr,
		"HOOKLINE_PROCESSOR_METRICS_ADDR": proc.Addr,
		"HOOKLINE_RETRIER_METRICS_ADDR":   retrier.Addr,
		"HOOKLINE_ADMIN_ADDR":             dlq.Addr,
	}, fastObserve(rules, recv))
	obs.targetsUp(t, map[string]string{"hookline-ingest": ingest.Addr, "hookline-processor": proc.Addr,
		"hookline-retrier": retrier.Addr, "hookline-dlq": dlq.Addr})

	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 1000000, Rate: 100, ID: "alerts"})
	waitFor(t, 30*time.Second, "100 deliveries accepted before the kill", func() bool { return flow.Accepted() >= 100 }, func() {})

	isProc := func(a amAlert) bool {
		return a.Labels["alertname"] == alert && a.Labels["instance"] == proc.Addr
	}
	killed := time.Now()
	proc.Kill(t)
	firing := recv.await(t, time.Minute, "a firing "+alert+" for the processor", obs, func(n amNotification, a amAlert) bool {
		return n.Status == "firing" && a.Status == "firing" && isProc(a)
	})
	t.Logf("%.1fs after the kill: the receiver was told %s fires: labels %v, runbook %s",
		time.Since(killed).Seconds(), alert, firing.Labels, firing.Annotations["runbook_url"])
	for k, want := range map[string]string{"job": "hookline-processor", "severity": "critical"} {
		if firing.Labels[k] != want {
			t.Errorf("label %s=%q, want %q (labels %v)", k, firing.Labels[k], want, firing.Labels)
		}
	}
	if firing.Annotations["runbook_url"] != runbook {
		t.Errorf("runbook_url %q, want the rule's %q", firing.Annotations["runbook_url"], runbook)
	}
	if s := firing.Annotations["summary"]; !strings.Contains(s, proc.Addr) {
		t.Errorf("summary %q does not name the instance %s", s, proc.Addr)
	}

	restarted := time.Now()
	proc = sys.Restart(proc)
	resolved := recv.await(t, time.Minute, "the resolution of "+alert+" for the processor", obs, func(n amNotification, a amAlert) bool {
		return a.Status == "resolved" && a.Fingerprint == firing.Fingerprint
	})
	t.Logf("%.1fs after the restart: the receiver was told it resolved (ends %s)", time.Since(restarted).Seconds(), resolved.EndsAt.Format(time.RFC3339))
	if resolved.Annotations["runbook_url"] != runbook {
		t.Errorf("the resolution's runbook_url %q, want %q", resolved.Annotations["runbook_url"], runbook)
	}
	for _, a := range recv.alerts() {
		if a.Labels["alertname"] == alert && !isProc(a) {
			t.Errorf("%s for %s (%s): only the processor was down", alert, a.Labels["instance"], a.Labels["job"])
		}
	}

	flow.Stop()
	flow.Wait()
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: (len(e2e.MixedProviders) + 1) * batch})
	obs.stop(t)
}

// requireObserveTools skips the test without prometheus and alertmanager on
// PATH, or fails it in CI (CI=true), where .ci/run installs them.
func requireObserveTools(t *testing.T) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("prometheus"); err != nil {
		missing = append(missing, "prometheus")
	}
	_, err1 := exec.LookPath("alertmanager")
	if _, err2 := exec.LookPath("prometheus-alertmanager"); err1 != nil && err2 != nil {
		missing = append(missing, "alertmanager (or prometheus-alertmanager)")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("%s not on PATH: apt-get install prometheus prometheus-alertmanager (Debian, Ubuntu)", strings.Join(missing, " and "))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI installs them (.ci/run)")
	}
	t.Skip(msg)
}

// rulesWithFor writes a copy of compose/prometheus/alerts.yml in which alert
// waits forDur, and returns its path and the alert's runbook_url.
func rulesWithFor(t *testing.T, alert, forDur string) (path, runbook string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(proctest.RepoRoot(), "compose", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	field := func(m *yaml.Node, key string) *yaml.Node {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	var found *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			if a := field(n, "alert"); a != nil && a.Value == alert {
				found = n
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if found == nil || field(found, "for") == nil || field(found, "annotations") == nil {
		t.Fatalf("alerts.yml has no rule %s with for: and annotations", alert)
	}
	field(found, "for").Value = forDur
	if rb := field(field(found, "annotations"), "runbook_url"); rb != nil {
		runbook = rb.Value
	}
	if runbook == "" {
		t.Fatalf("%s has no runbook_url", alert)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "alerts.yml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, runbook
}

// amAlert and amNotification are the parts of Alertmanager's webhook body
// (version 4) the test reads.
type amAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Fingerprint string            `json:"fingerprint"`
}

type amNotification struct {
	Version  string    `json:"version"`
	Status   string    `json:"status"`
	Receiver string    `json:"receiver"`
	Alerts   []amAlert `json:"alerts"`
}

// alertReceiver is the webhook receiver: it keeps every notification.
type alertReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []amNotification
	bad  []string
	more chan struct{} // closed and replaced on every notification
}

func newAlertReceiver(t *testing.T) *alertReceiver {
	r := &alertReceiver{more: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var n amNotification
		err := json.Unmarshal(body, &n)
		r.mu.Lock()
		if err != nil || n.Version != "4" {
			r.bad = append(r.bad, fmt.Sprintf("%v: %.200s", err, body))
		} else {
			r.got = append(r.got, n)
		}
		close(r.more)
		r.more = make(chan struct{})
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *alertReceiver) URL() string { return r.srv.URL + "/alerts" }

func (r *alertReceiver) alerts() []amAlert {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []amAlert
	for _, n := range r.got {
		out = append(out, n.Alerts...)
	}
	return out
}

// await returns the first alert of a notification for which match holds,
// or fails the test after timeout saying what was received and what
// Prometheus holds.
func (r *alertReceiver) await(t *testing.T, timeout time.Duration, what string, obs *observe, match func(amNotification, amAlert) bool) amAlert {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		for _, n := range r.got {
			for _, a := range n.Alerts {
				if match(n, a) {
					r.mu.Unlock()
					return a
				}
			}
		}
		more := r.more
		var seen []string
		for _, n := range r.got {
			for _, a := range n.Alerts {
				seen = append(seen, fmt.Sprintf("%s %s %s", a.Status, a.Labels["alertname"], a.Labels["instance"]))
			}
		}
		bad := r.bad
		r.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: not received within %s; received %d alerts %v, unreadable bodies %v; Prometheus's alerts: %s\nobserve.sh:\n%s",
				what, timeout, len(seen), seen, bad, obs.get(t, "/api/v1/alerts"), obs.out.String())
		}
	}
}

// observe is a running compose/observe.sh.
type observe struct {
	cmd    *exec.Cmd
	out    *proctest.Buffer
	exited chan error
	prom   string // Prometheus's base URL
	tmp    string // its TMPDIR
}

// fastObserve is observe.sh's environment for a test: scrapes and rule
// evaluations every second, rules from rules, notifications to recv at
// once, and repeated only after an hour.
func fastObserve(rules string, recv *alertReceiver) map[string]string {
	return map[string]string{
		"HOOKLINE_OBSERVE_SCRAPE_INTERVAL": "1s",
		"HOOKLINE_OBSERVE_SCRAPE_TIMEOUT":  "1s",
		"HOOKLINE_OBSERVE_EVAL_INTERVAL":   "1s",
		"HOOKLINE_OBSERVE_RULES":           rules,
		"HOOKLINE_ALERT_WEBHOOK_URL":       recv.URL(),
		"HOOKLINE_ALERT_GROUP_WAIT":        "1s",
		"HOOKLINE_ALERT_GROUP_INTERVAL":    "1s",
		"HOOKLINE_ALERT_REPEAT_INTERVAL":   "1h",
	}
}

// startObserve runs compose/observe.sh in a process group of its own, on
// free loopback ports, with only env and each of more (and PATH, HOME,
// TMPDIR), and waits for its ready line. At the end of the test, whatever
// it left running is killed and reported.
func startObserve(t *testing.T, env map[string]string, more ...map[string]string) *observe {
	t.Helper()
	o := &observe{out: &proctest.Buffer{}, exited: make(chan error, 1), tmp: t.TempDir()}
	promAddr, amAddr := e2e.FreeAddr(t), e2e.FreeAddr(t)
	o.prom = "http://" + promAddr
	o.cmd = exec.Command(filepath.Join(proctest.RepoRoot(), "compose", "observe.sh"))
	o.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + o.tmp,
		"HOOKLINE_OBSERVE_PROMETHEUS_ADDR=" + promAddr, "HOOKLINE_OBSERVE_ALERTMANAGER_ADDR=" + amAddr,
		"HOOKLINE_OBSERVE_JAEGER=off"} // Jaeger: TestTraceOfARetriedDelivery
	for _, m := range append([]map[string]string{env}, more...) {
		for k, v := range m {
			o.cmd.Env = append(o.cmd.Env, k+"="+v)
		}
	}
	o.cmd.Stdout, o.cmd.Stderr = o.out, o.out
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { o.exited <- o.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-o.exited:
		default:
			_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
			<-o.exited
		}
		// The group's leader is gone; a member still alive was left behind.
		if err := syscall.Kill(-o.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			_ = syscall.Kill(-o.cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("observe.sh left processes running in its group (killed now)")
		}
		if t.Failed() {
			t.Logf("observe.sh output:\n%s", o.out.String())
		}
	})
	waitFor(t, time.Minute, "observe.sh's ready line", func() bool {
		return strings.Contains(o.out.String(), "observe: ready. Prometheus: "+o.prom) || o.exitedNow()
	}, func() {})
	if !strings.Contains(o.out.String(), "observe: Alertmanager: http://"+amAddr) {
		t.Fatalf("observe.sh did not print both URLs:\n%s", o.out.String())
	}
	return o
}

func (o *observe) exitedNow() bool {
	select {
	case err := <-o.exited:
		o.exited <- err
		return true
	default:
		return false
	}
}

// get is the body of a GET of Prometheus's path, or the error.
func (o *observe) get(t *testing.T, path string) string {
	t.Helper()
	res, err := http.Get(o.prom + path)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// targetsUp waits until Prometheus has scraped each job's address
// successfully.
func (o *observe) targetsUp(t *testing.T, want map[string]string) {
	t.Helper()
	var seen map[string]string
	up := func() bool {
		var ts struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		seen = map[string]string{}
		if err := json.Unmarshal([]byte(o.get(t, "/api/v1/targets")), &ts); err != nil {
			return false
		}
		for _, tg := range ts.Data.ActiveTargets {
			seen[tg.Labels["job"]+" "+tg.Labels["instance"]] = tg.Health + tg.LastError
		}
		for job, addr := range want {
			if seen[job+" "+addr] != "up" {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(30 * time.Second); !up(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape every service within 30s: want %v up, its targets (job instance: health, error) %v", want, seen)
		}
	}
}

// stop sends SIGTERM, as Ctrl-C would, and requires a clean exit that
// leaves no temporary folder behind.
func (o *observe) stop(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(o.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-o.exited:
		o.exited <- err
		if err != nil {
			t.Errorf("observe.sh on SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("observe.sh did not stop within 30s of SIGTERM")
	}
	if !strings.Contains(o.out.String(), "observe: stopped") {
		t.Errorf("observe.sh's output ends without \"observe: stopped\"")
	}
	if left, _ := filepath.Glob(filepath.Join(o.tmp, "hookline-observe.*")); len(left) > 0 {
		t.Errorf("observe.sh left %v", left)
	}
}
