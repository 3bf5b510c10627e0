// Package e2e runs hookline as a whole in tests: the real binaries as
// processes (ingest, processor, retrier) against a real broker, each with its
// own state dir and ports, a destination HTTP server whose behaviour per key
// the test sets, and readers of every topic, read_committed.
package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/providers/transform"
	"github.com/hookline/hookline/pkg/testkit/freeport"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/testkit/proctest"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/topics"
)

// Secret signs every provider of the harness's providers file.
const Secret = "e2e-secret"

// Options shape one system under test.
type Options struct {
	// Tiers is HOOKLINE_RETRY_TIERS (default "1s,2s,3s").
	Tiers string
	// Partitions is HOOKLINE_PARTITIONS (default 4).
	Partitions int
	// Env is added to every service's environment.
	Env map[string]string
	// Brokers, when set, is the cluster to run against instead of the
	// shared one (kafkatest.Brokers): a private broker a test may stop.
	Brokers []string
	// Secure, when set, is the cluster instead: the local secure broker
	// (SASL_SSL, SCRAM-SHA-512, ACLs only). Every service runs as its own
	// user with the ACLs compose/kafka.sh grants, given for this system's
	// prefix; the test's own readers act as admin.
	Secure *kafkatest.SecureBroker
	// Providers, when set, returns more entries for the providers file
	// (indented under `providers:`), given the destination's URL and the
	// name of the environment variable holding Secret.
	Providers func(destURL, secretEnv string) string
	// Routes, when set, gives providers of MixedProviders routes (issue
	// 22) instead of their provider-level destination, by provider name.
	// The Ledger then settles every (key, route), and reads each topic
	// route's topic.
	Routes map[string][]Route
	// Moved are providers of Routes that start with their provider-level
	// destination instead: the services start with that providers file,
	// and a processor started with System.RoutesFile's takes their routes
	// (issue 31: a destination moved to routes). The ledger settles each
	// key on its routes, and takes its route default's calls and
	// retrying, parked or held outcomes as what waited before the move.
	Moved []string
	// ProviderLines, by provider name, are more lines of the entry of a
	// provider with Routes (such as schema: and on_invalid:), each written
	// as a key of the entry ("schema: x.json").
	ProviderLines map[string][]string
}

// System is one hookline under test.
type System struct {
	tb      testing.TB
	Brokers []string
	Prefix  string
	Names   topics.Names
	Dir     string
	Dest    *Destination
	reg     *providers.Registry
	env     map[string]string
	routes  map[string][]Route  // Options.Routes
	moved   []string            // Options.Moved
	lines   map[string][]string // Options.ProviderLines
	secure  *kafkatest.SecureBroker
	// routesFile is the providers file with the Moved providers' routes.
	routesFile string

	mu     sync.Mutex
	ingest string  // base URL of the running ingest
	ledger *Ledger // started by the first Ledger call

	scriptsMu sync.Mutex
	scripts   map[string]*transform.Script // provider/route -> its transform, compiled once (Transformed)
}

// New prepares a system: topics of its own, a destination server, a
// providers file with one provider of each name in MixedProviders delivering
// to the destination (or by the routes Options.Routes gives it), and an
// "outcomes" provider without destination.
func New(tb testing.TB, o Options) *System {
	tb.Helper()
	if o.Tiers == "" {
		o.Tiers = "1s,2s,3s"
	}
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	if o.Secure != nil {
		o.Brokers = o.Secure.Brokers
	}
	if len(o.Brokers) == 0 {
		o.Brokers = kafkatest.Brokers(tb)
	}
	checkRoutes(tb, o.Routes)
	for _, p := range o.Moved {
		if _, ok := o.Routes[p]; !ok {
			tb.Fatalf("e2e: provider %s moved to routes Options.Routes does not give it", p)
		}
	}
	for p := range o.ProviderLines {
		if _, ok := o.Routes[p]; !ok {
			tb.Fatalf("e2e: ProviderLines for %s: the harness adds lines to providers with Routes only", p)
		}
	}
	s := &System{tb: tb, Brokers: o.Brokers, Prefix: kafkatest.Prefix(tb), Dir: tb.TempDir(), Dest: NewDestination(tb), secure: o.Secure,
		routes: o.Routes, moved: o.Moved, lines: o.ProviderLines}
	if s.secure != nil {
		s.secure.Grant(tb, s.Prefix)
	}
	tiers := strings.Split(o.Tiers, ",")
	s.Names = topics.NewNames(s.Prefix, tiers)
	pf := filepath.Join(s.Dir, "providers.yaml")
	if err := os.WriteFile(pf, []byte(s.providersFile(o, o.Moved)), 0o600); err != nil {
		tb.Fatal(err)
	}
	if len(o.Moved) > 0 {
		s.routesFile = filepath.Join(s.Dir, "providers-routes.yaml")
		if err := os.WriteFile(s.routesFile, []byte(s.providersFile(o, nil)), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	s.env = map[string]string{
		"KAFKA_BROKERS":         strings.Join(s.Brokers, ","),
		"HOOKLINE_TOPIC_PREFIX": s.Prefix,
		"HOOKLINE_PARTITIONS":   fmt.Sprint(o.Partitions),
		"HOOKLINE_RETRY_TIERS":  o.Tiers,
		"HOOKLINE_PROVIDERS":    pf,
		"E2E_SECRET":            Secret,
		"E2E_STD_SECRET":        "whsec_" + base64.StdEncoding.EncodeToString([]byte(Secret)),
		"HOOKLINE_LOG_LEVEL":    "info",
		"HOOKLINE_TRACE_DIR":    filepath.Join(s.Dir, "dlq-trace"), // dlq trace and dlq serve's index
	}
	for k, v := range o.Env {
		s.env[k] = v
	}
	reg, err := providers.Load(pf, func(k string) (string, bool) { v, ok := s.env[k]; return v, ok })
	if err != nil {
		tb.Fatal(err)
	}
	s.reg = reg
	return s
}

// providersFile is the system's providers file: one provider of each
// name in MixedProviders delivering to the destination, or by its routes
// (Options.Routes) unless it is one of before, the "outcomes" provider
// without destination, and what Options.Providers adds.
func (s *System) providersFile(o Options, before []string) string {
	dest := fmt.Sprintf("{url: %q, timeout: 5s}", s.Dest.URL())
	prov := "providers:\n"
	for _, p := range MixedProviders {
		env := "E2E_SECRET"
		if p == "standard" {
			env = "E2E_STD_SECRET"
		}
		if rs, ok := o.Routes[p]; ok && !slices.Contains(before, p) {
			prov += s.routesEntry(p, env, rs)
			continue
		}
		prov += fmt.Sprintf("  %-11s {preset: %-10s secret_env: [%s], destination: %s}\n", p+":", p+",", env, dest)
	}
	prov += `  outcomes:
    preset: generic
    secret_env: [E2E_SECRET]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: /id}
`
	if o.Providers != nil {
		prov += o.Providers(s.Dest.URL(), "E2E_SECRET")
	}
	return prov
}

// RoutesFile is the providers file in which the providers of
// Options.Moved have their routes (HOOKLINE_PROVIDERS for a processor
// started after the move); "" without Moved.
func (s *System) RoutesFile() string { return s.routesFile }

// Service is a running service process.
type Service struct {
	*proctest.Proc
	Name string
	Addr string // HTTP address (ingest) or metrics address
	env  []string
	path string
}

// envList is the environment of service: the system's, then on the secure
// broker the service's own user, then extra (which wins).
func (s *System) envList(service string, extra map[string]string) []string {
	all := map[string]string{}
	for k, v := range s.env {
		all[k] = v
	}
	if s.secure != nil {
		for k, v := range s.secure.Env(service) {
			all[k] = v
		}
	}
	for k, v := range extra {
		all[k] = v
	}
	out := make([]string, 0, len(all))
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	return out
}

// StartIngest runs the ingest binary and waits until it is ready.
func (s *System) StartIngest() *Service {
	s.tb.Helper()
	svc := s.startListening("ingest", "HOOKLINE_INGEST_ADDR", "/readyz", nil)
	s.mu.Lock()
	s.ingest = "http://" + svc.Addr
	s.mu.Unlock()
	return svc
}

// StartProcessor runs a processor with its own state dir (kept across
// restarts of the same id) and metrics port.
func (s *System) StartProcessor(id string, extra map[string]string) *Service {
	s.tb.Helper()
	env := map[string]string{
		"HOOKLINE_STATE_DIR":   s.StateDir(id),
		"HOOKLINE_INSTANCE_ID": id,
	}
	maps.Copy(env, extra)
	return s.startListening("processor", "HOOKLINE_METRICS_ADDR", "/healthz", env)
}

// takesTimerSlack names the services (dlq: serve) that give their threads
// HOOKLINE_TIMER_SLACK at start; startListening checks each has the
// default when the variable is not set.
var takesTimerSlack = map[string]bool{"ingest": true, "processor": true, "dlq": true}

// startListening runs the service binary name (with args) listening on a
// free port given in the variable addrVar, and waits up to a minute until
// ready answers 200 there. A start whose port was taken in the meantime
// (by another test process picking the same one) is tried again on
// another port, twice at most.
func (s *System) startListening(name, addrVar, ready string, extra map[string]string, args ...string) *Service {
	s.tb.Helper()
	path := proctest.Binary(s.tb, name)
	for attempt := 1; ; attempt++ {
		addr := FreeAddr(s.tb)
		env := map[string]string{addrVar: addr}
		maps.Copy(env, extra)
		envList := s.envList(name, env)
		svc := &Service{Proc: proctest.Start(s.tb, path, envList, args...), Name: name, Addr: addr, env: envList, path: path}
		err := waitReady(svc.Proc, "http://"+addr+ready, 60*time.Second)
		if err == nil {
			if takesTimerSlack[name] && !slices.ContainsFunc(envList, func(v string) bool { return strings.HasPrefix(v, "HOOKLINE_TIMER_SLACK=") }) {
				svc.CheckTimerSlack(s.tb, timerslack.Default)
			}
			return svc
		}
		if attempt < 3 && svc.Exited() && freeport.InUse(nil, svc.Output()) {
			s.tb.Logf("%s: %s was taken before it listened; starting it on another port", name, addr)
			continue
		}
		s.tb.Fatalf("%s: %v", name, err)
	}
}

// waitReady waits up to timeout until url answers 200, and stops early
// when the process exits.
func waitReady(p *proctest.Proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if p.Exited() {
			return fmt.Errorf("exited before %s answered 200 (last: %s)", url, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %s (last: %s)", url, timeout, last)
}

// StateDir is the processor state dir of instance id.
func (s *System) StateDir(id string) string { return filepath.Join(s.Dir, "state-"+id) }

// Restart starts the same service again with the same environment (after a
// kill or a stop).
func (s *System) Restart(svc *Service) *Service {
	s.tb.Helper()
	n := &Service{Proc: proctest.Start(s.tb, svc.path, svc.env), Name: svc.Name, Addr: svc.Addr, env: svc.env, path: svc.path}
	WaitHTTP(s.tb, "http://"+svc.Addr+"/healthz", 60*time.Second)
	return n
}

// RestartRefused starts the same service again, as Restart does, for a
// start its checks must refuse: it waits up to timeout for the process to
// exit, fails the test unless it exited with an error, and returns what
// it printed.
func (s *System) RestartRefused(svc *Service, timeout time.Duration) string {
	s.tb.Helper()
	p := proctest.Start(s.tb, svc.path, svc.env)
	if err := p.Wait(timeout); err == nil || !p.Exited() {
		s.tb.Fatalf("%s started again: %v, want it to exit with an error; its output:\n%s", svc.Name, err, p.Output())
	}
	return p.Output()
}

// Kill sends SIGKILL and waits for the process to die.
func (svc *Service) Kill(tb testing.TB) {
	tb.Helper()
	_ = svc.Signal(syscall.SIGKILL)
	_ = svc.Wait(10 * time.Second)
}

// Stop sends SIGTERM and requires a clean exit.
func (svc *Service) Stop(tb testing.TB) {
	tb.Helper()
	if err := svc.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	if err := svc.Wait(60 * time.Second); err != nil {
		tb.Fatalf("%s did not stop cleanly: %v\n%s", svc.Name, err, svc.Output())
	}
}

// Post signs body as provider (a provider whose key comes from the body,
// such as stripe or outcomes) and posts it to ingest as JSON.
func (s *System) Post(provider string, body []byte) (int, error) {
	a, err := s.Send(Event{Provider: provider, Body: body, Header: http.Header{"Content-Type": {"application/json"}}})
	return a.Status, err
}

var httpClient = loadtest.PostClient(64, 0)

// StripeEvent is a body for the stripe provider; its key is "stripe:"+id.
func StripeEvent(id string) []byte { return stripeEvent(id, "invoice.paid") }

// stripeEvent is a stripe body of event type typ.
func stripeEvent(id, typ string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q}`, id, typ))
}

// Outcome is an outcome record (package outcome), under the name the
// kit's tests and scenarios use.
type Outcome = outcome.Outcome

// Reader reads a topic from the start, read_committed, remembering what it
// has seen so tests can wait for conditions.
type Reader struct {
	tb   testing.TB
	cl   *kgo.Client
	mu   sync.Mutex
	recs []*kgo.Record
}

// Read starts reading topics.
func (s *System) Read(topics ...string) *Reader {
	return &Reader{tb: s.tb, cl: s.committedReader(topics...)}
}

// committedReader is a client reading topics from the start, read_committed,
// as an analyst would, closed at the end of the test.
func (s *System) committedReader(topics ...string) *kgo.Client {
	var conn []kgo.Opt
	if s.secure != nil {
		conn = s.secure.Opts(s.tb, "admin")
	}
	return kafkatest.Client(s.tb, s.Brokers, append(conn, kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(500*time.Millisecond))...)
}

// Until polls until cond holds over every record read so far, or fails the
// test after timeout.
func (r *Reader) Until(timeout time.Duration, what string, cond func(recs []*kgo.Record) bool) []*kgo.Record {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		r.mu.Lock()
		ok := cond(r.recs)
		recs := r.recs
		r.mu.Unlock()
		if ok {
			return recs
		}
		if ctx.Err() != nil {
			r.tb.Fatalf("%s: not within %s (%d records read)", what, timeout, len(recs))
		}
		fs := r.cl.PollFetches(ctx)
		r.mu.Lock()
		r.recs = append(r.recs, fs.Records()...)
		r.mu.Unlock()
	}
}

// Outcomes decodes outcome records.
func Outcomes(tb testing.TB, recs []*kgo.Record) []Outcome {
	tb.Helper()
	out := make([]Outcome, 0, len(recs))
	for _, r := range recs {
		o, err := outcome.Decode(r.Value)
		if err != nil {
			tb.Fatalf("outcome at %d:%d is not JSON: %v", r.Partition, r.Offset, err)
		}
		out = append(out, o)
	}
	return out
}

// FreeAddr returns a loopback address with a free port (freeport.Addr:
// below the ephemeral range, so no outgoing connection takes it before
// the service binds it).
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// WaitHTTP waits until url answers 200.
func WaitHTTP(tb testing.TB, url string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("%s did not answer 200 within %s", url, timeout)
}

// routeHeader names the route of a destination call (issue 22; the
// processor's deliver package spells it too, internal to the processor).
const routeHeader = "X-Hookline-Route"

// Destination is the test's destination server: it logs every call and
// answers as the behaviour set for the key says. A call's route is its
// X-Hookline-Route header (absent: the route default); a call sent to a
// route's URL (RouteURL) whose header names another route is counted as
// misrouted.
type Destination struct {
	srv *httptest.Server
	mu  sync.Mutex
	// calls per idempotency key, in arrival order: the X-Hookline-Attempt
	// of each call, every route.
	calls map[string][]string
	// routed counts the calls per route, then per key.
	routed  map[string]map[string]int
	behave  func(route, key string, call int) int // HTTP status for the n-th call (1-based) of key on route
	headers map[string]http.Header                // last request headers per key
	bodies  map[string][]byte
	delay   time.Duration
	delayBy func(route, key string) time.Duration // added to delay
	onCall  func(route, key string, at time.Time)
	// retryAfter is the Retry-After of the n-th call of key; "": none.
	retryAfter func(key string, call int) string
	inflight   int
	maxIn      int
	inRoute    map[string]int // calls being answered now, per route
	maxRoute   map[string]int
	misrouted  []string // "<route of the URL> <- <header> <key>"
}

// NewDestination starts a destination that answers 200 to everything.
func NewDestination(tb testing.TB) *Destination {
	d := &Destination{calls: map[string][]string{}, routed: map[string]map[string]int{}, headers: map[string]http.Header{},
		bodies: map[string][]byte{}, inRoute: map[string]int{}, maxRoute: map[string]int{},
		behave: func(string, string, int) int { return 200 }}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	tb.Cleanup(d.srv.Close)
	return d
}

func (d *Destination) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	route := r.Header.Get(routeHeader)
	if route == "" {
		route = headers.DefaultRoute
	}
	d.mu.Lock()
	if want, ok := strings.CutPrefix(r.URL.Path, "/hooks/"); ok && want != route {
		d.misrouted = append(d.misrouted, want+" <- "+route+" "+key)
	}
	d.calls[key] = append(d.calls[key], r.Header.Get("X-Hookline-Attempt"))
	if d.routed[route] == nil {
		d.routed[route] = map[string]int{}
	}
	d.routed[route][key]++
	n := d.routed[route][key]
	d.headers[key] = r.Header.Clone()
	d.bodies[key] = body
	behave, delay, onCall, retryAfter := d.behave, d.delay, d.onCall, d.retryAfter
	if d.delayBy != nil {
		delay += d.delayBy(route, key)
	}
	d.inflight++
	d.maxIn = max(d.maxIn, d.inflight)
	d.inRoute[route]++
	d.maxRoute[route] = max(d.maxRoute[route], d.inRoute[route])
	d.mu.Unlock()
	if onCall != nil {
		onCall(route, key, at)
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	d.mu.Lock()
	d.inflight--
	d.inRoute[route]--
	d.mu.Unlock()
	if retryAfter != nil {
		if v := retryAfter(key, n); v != "" {
			w.Header().Set("Retry-After", v)
		}
	}
	w.WriteHeader(behave(route, key, n))
}

// RetryAfter makes the destination send f(key, call) as the Retry-After
// of the n-th call of key (on its route), "" for none; it is called
// after the call's delay, just before the answer.
func (d *Destination) RetryAfter(f func(key string, call int) string) {
	d.mu.Lock()
	d.retryAfter = f
	d.mu.Unlock()
}

// URL is where the destination listens.
func (d *Destination) URL() string { return d.srv.URL + "/hooks" }

// RouteURL is the destination's URL for route: calls arriving there must
// name route in X-Hookline-Route (Misrouted lists those that do not).
func (d *Destination) RouteURL(route string) string { return d.URL() + "/" + route }

// Behave sets the status for the n-th call of a key (on its route).
func (d *Destination) Behave(f func(key string, call int) int) {
	d.BehaveRoute(func(_, key string, call int) int { return f(key, call) })
}

// BehaveRoute sets the status for the n-th call of a key on route.
func (d *Destination) BehaveRoute(f func(route, key string, call int) int) {
	d.mu.Lock()
	d.behave = f
	d.mu.Unlock()
}

// Delay makes every call take at least dl.
func (d *Destination) Delay(dl time.Duration) {
	d.mu.Lock()
	d.delay = dl
	d.mu.Unlock()
}

// DelayBy makes every call of key take f(key) longer (on top of Delay).
func (d *Destination) DelayBy(f func(key string) time.Duration) {
	d.DelayRoute(func(_, key string) time.Duration { return f(key) })
}

// DelayRoute makes every call of key on route take f(route, key) longer
// (on top of Delay).
func (d *Destination) DelayRoute(f func(route, key string) time.Duration) {
	d.mu.Lock()
	d.delayBy = f
	d.mu.Unlock()
}

// OnCall makes the destination call f with each call's key and arrival
// time, before it answers.
func (d *Destination) OnCall(f func(key string, at time.Time)) {
	d.OnRouteCall(func(_, key string, at time.Time) { f(key, at) })
}

// OnRouteCall makes the destination call f with each call's route, key and
// arrival time, before it answers.
func (d *Destination) OnRouteCall(f func(route, key string, at time.Time)) {
	d.mu.Lock()
	d.onCall = f
	d.mu.Unlock()
}

// Inflight is how many calls are being answered now.
func (d *Destination) Inflight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inflight
}

// Calls returns how many times key was called, every route.
func (d *Destination) Calls(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls[key])
}

// AllCalls returns a copy of the call counts per key, every route.
func (d *Destination) AllCalls() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.calls))
	for k, v := range d.calls {
		out[k] = len(v)
	}
	return out
}

// RouteCalls returns a copy of the call counts per key on route.
func (d *Destination) RouteCalls(route string) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.routed[route])
}

// Request returns the last headers and body received for key.
func (d *Destination) Request(key string) (http.Header, []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.headers[key], d.bodies[key]
}

// MaxInflight is the most concurrent calls seen.
func (d *Destination) MaxInflight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxIn
}

// MaxInflightOn is the most concurrent calls seen on route.
func (d *Destination) MaxInflightOn(route string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxRoute[route]
}

// Misrouted lists the calls sent to a route's URL whose X-Hookline-Route
// named another route (or none), as "<URL's route> <- <header's> <key>".
func (d *Destination) Misrouted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.misrouted)
}
