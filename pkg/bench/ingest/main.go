// Command ingest is ingest's benchmark (make bench-ingest, built as
// bin/loadgen): it drives the real ingest binary on loopback with signed 1 KiB Stripe deliveries and, in
// the same run, a bare gin handler that answers 202 without Kafka and a
// minimal gin + franz-go handler that produces each body with acks=all
// before its 202 (minimal.go), so the figures are ratios taken on one
// machine at one time.
//
// Phases: rounds (-rounds) of closed-loop maximum rate against each target
// (C connections, D seconds each; the order rotates by round), the targets
// taking turns in slices (-slice, 2 s) so that the machine's other load
// falls on each alike, ratios to the minimal handler per round, with each
// target's CPU per request and the broker's while it served that target
// (-broker-pid-file); then open-loop at half of ingest's
// maximum, where latency is measured from each request's scheduled send
// time (no coordinated omission).
// With -corpus github it measures instead what checking real payloads
// against their provider's published schema costs (corpus.go).
//
// Every phase is bounded in time and count and targets 127.0.0.1 only. The
// broker is reached as the services reach it (KAFKA_TLS*, KAFKA_SASL_*:
// pkg/kafkaconf), and ingest inherits those settings; the run's topics are
// deleted at the end.
package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/timerslack"
	"github.com/hookline/hookline/pkg/topics"
)

func main() {
	serveBare := flag.String("serve-bare", "", "internal: serve the bare gin handler on this address")
	serveMinimal := flag.String("serve-minimal", "", "internal: serve the minimal gin + franz-go handler on this address (with -minimal-topic)")
	minimalTopic := flag.String("minimal-topic", "", "internal: the topic the minimal handler produces to")
	conns := flag.Int("c", 256, "concurrent connections in the closed-loop phases")
	dur := flag.Duration("d", 10*time.Second, "length of each measured phase")
	bodySize := flag.Int("body", 1024, "request body size in bytes")
	flag.Bool("compare", true, "compare ingest with the bare handler (the default mode)")
	corpusName := flag.String("corpus", "", "github: ingest on GitHub's published example payloads without schema, with GitHub's schema per event type (on_invalid: dlq, then reject) and with the whole-provider schema file (reject), alternated (see -rounds)")
	rounds := flag.Int("rounds", 0, "rounds, each measuring every target in turn for -d (0: 3, or 5 with -corpus)")
	slice := flag.Duration("slice", 2*time.Second, "in a round, the targets take turns in slices this long until each had -d (0: one turn of -d each)")
	brokerPIDFile := flag.String("broker-pid-file", "", "the local broker's pid file: its CPU per request is measured too (the broker shares the cores)")
	minimalSlack := flag.Duration("minimal-timer-slack", 0, "give the minimal handler this timer slack, as ingest has HOOKLINE_TIMER_SLACK (0: Linux's default, as any Go program runs): to tell hookline's own work from the runtime's")
	flag.Parse()
	gin.SetMode(gin.ReleaseMode)
	if *serveBare != "" {
		if err := bare(*serveBare); err != nil {
			fmt.Fprintln(os.Stderr, "bare:", err)
			os.Exit(1)
		}
		return
	}
	if *serveMinimal != "" {
		timerslack.Apply(os.Stderr, "minimal", *minimalSlack)
		if err := minimal(*serveMinimal, *minimalTopic); err != nil {
			fmt.Fprintln(os.Stderr, "minimal:", err)
			os.Exit(1)
		}
		return
	}
	if *rounds < 0 || *rounds > 20 {
		fmt.Fprintf(os.Stderr, "loadgen: -rounds=%d: want 1 to 20 (0: the default)\n", *rounds)
		os.Exit(2)
	}
	if *corpusName != "" {
		if *rounds == 0 {
			*rounds = 5
		}
		loadtest.Main("loadgen", func(ctx context.Context) error { return runCorpus(ctx, *corpusName, *conns, *dur, *rounds) })
		return
	}
	if *rounds == 0 {
		*rounds = 3
	}
	if *slice < 0 || *slice > *dur {
		fmt.Fprintf(os.Stderr, "loadgen: -slice=%s: want 0 to -d (%s)\n", *slice, *dur)
		os.Exit(2)
	}
	loadtest.Main("loadgen", func(ctx context.Context) error {
		return run(ctx, *conns, *dur, *slice, *bodySize, *rounds, loadtest.BrokerPID(*brokerPIDFile, "loadgen"), *minimalSlack)
	})
}

// bare answers like ingest does, reading the body, without Kafka.
func bare(addr string) error {
	r := gin.New()
	r.POST("/webhooks/:provider", func(c *gin.Context) {
		b, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.AbortWithStatus(400)
			return
		}
		c.JSON(http.StatusAccepted, gin.H{"status": "accepted", "idempotency_key": "bare", "request_id": fmt.Sprint(len(b))})
	})
	r.GET("/readyz", func(c *gin.Context) { c.Status(200) })
	return http.ListenAndServe(addr, r)
}

const secret = "bench-secret"

// target is one server of the comparison.
type target struct {
	name, addr string
	proc       *loadtest.Proc
}

func run(ctx context.Context, conns int, dur, slice time.Duration, bodySize, rounds, broker int, minimalSlack time.Duration) (err error) {
	r, err := loadtest.NewRun("bench-ingest", []string{"ingest"})
	if err != nil {
		return err
	}
	defer func() { err = r.Close(err) }()
	prefix := r.Prefix("bench-ingest") // ingest creates the topics at start
	provFile := filepath.Join(r.Dir, "providers.yaml")
	if err := os.WriteFile(provFile, []byte("providers:\n  stripe:\n    preset: stripe\n    secret_env: [BENCH_STRIPE_SECRET]\n"), 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bare, ingest, mini := &target{name: "bare"}, &target{name: "ingest"}, &target{name: "minimal"}
	for _, t := range []*target{bare, ingest, mini} {
		if t.addr, err = loadtest.FreeAddr(); err != nil {
			return err
		}
	}
	// The minimal handler produces to ingest's raw topic: it starts once
	// ingest made it.
	for _, c := range []struct {
		t         *target
		path      string
		env, args []string
	}{
		{bare, self, nil, []string{"-serve-bare", bare.addr}},
		{ingest, r.Bins["ingest"], []string{"HOOKLINE_INGEST_ADDR=" + ingest.addr, "HOOKLINE_PROVIDERS=" + provFile, "BENCH_STRIPE_SECRET=" + secret,
			"HOOKLINE_TOPIC_PREFIX=" + prefix, "HOOKLINE_LOG_LEVEL=warn"}, nil},
		{mini, self, nil, []string{"-serve-minimal", mini.addr, "-minimal-topic", prefix + topics.BaseRaw, "-minimal-timer-slack", minimalSlack.String()}},
	} {
		p, err := loadtest.Start(c.path, c.env, filepath.Join(r.Dir, c.t.name+".log"), c.args...)
		if err != nil {
			return err
		}
		c.t.proc = p
		defer func() { _ = p.Stop(30 * time.Second) }()
		if err := p.WaitReady(ctx, "http://"+c.t.addr+"/readyz", 60*time.Second); err != nil {
			return err
		}
	}

	reqs, err := signedBodies(20000, bodySize)
	if err != nil {
		return err
	}
	client := loadtest.PostClient(512, 512)
	fmt.Printf("hookline ingest benchmark: %d-byte signed Stripe bodies, %d connections, %s per phase in turns of %s, %d rounds, broker %s, load average %s\n",
		bodySize, conns, dur, cmp.Or(slice, dur), rounds, strings.Join(r.Kafka.Brokers, ","), loadAvg())
	if minimalSlack > 0 {
		fmt.Printf("the minimal handler runs with a timer slack of %s (-minimal-timer-slack)\n", minimalSlack)
	}

	// Warm each up (JIT on the broker side, connection pools, topic leaders).
	targets := []*target{mini, ingest, bare}
	for _, t := range targets {
		_ = closedLoop(ctx, client, "http://"+t.addr, reqs, conns, 2*time.Second)
	}
	fmt.Printf("%-6s %-8s %10s %9s %9s %8s %14s %14s %8s %12s\n", "round", "target", "req/s", "p50 ms", "p99 ms", "errors", "CPU/req", "broker CPU/req", "×minimal", "p99×minimal")
	var rateR, p99R, bareR []float64
	perTarget := map[string]*targetRuns{}
	for _, t := range targets {
		perTarget[t.name] = &targetRuns{}
	}
	var ingMax loadtest.Result
	for round := 1; round <= rounds; round++ {
		// Rotate the order, so that no target always follows another.
		order := append(targets[(round-1)%len(targets):], targets[:(round-1)%len(targets)]...)
		res, cpu, brokerCPU, err := measureRound(ctx, client, reqs, order, conns, dur, slice, broker)
		if err != nil {
			return err
		}
		m := res["minimal"]
		for _, t := range targets {
			x := res[t.name]
			bc := "-"
			if broker > 0 {
				bc = fmt.Sprintf("%.0f µs", float64(brokerCPU[t.name].Microseconds()))
			}
			fmt.Printf("%-6d %-8s %10.0f %9.2f %9.2f %8d %11.0f µs %14s %8.3f %12.3f\n", round, t.name, x.Rate(), ms(x.Pct(50)), ms(x.Pct(99)), x.Errors,
				float64(cpu[t.name].Microseconds()), bc, x.Rate()/m.Rate(), float64(x.Pct(99))/float64(m.Pct(99)))
			perTarget[t.name].add(x, cpu[t.name], brokerCPU[t.name], broker > 0)
		}
		ing := res["ingest"]
		rateR = append(rateR, ing.Rate()/m.Rate())
		p99R = append(p99R, float64(ing.Pct(99))/float64(m.Pct(99)))
		bareR = append(bareR, ing.Rate()/res["bare"].Rate())
		if ing.Rate() > ingMax.Rate() {
			ingMax = ing
		}
		if ing.Errors > 0 || m.Errors > 0 {
			return fmt.Errorf("round %d: %d requests to ingest, %d to the minimal handler failed or were answered with something other than 202 (ingest's first: %v; the minimal handler's: %v)", round, ing.Errors, m.Errors, ing.First, m.First)
		}
	}
	fmt.Printf("ingest/minimal req/s over %d rounds: %s (target >= 0.95)\n", rounds, spread(rateR))
	fmt.Printf("ingest/minimal p99 over %d rounds: %s (target <= 1.1)\n", rounds, spread(p99R))
	fmt.Printf("ingest/bare req/s over %d rounds: %s\n", rounds, spread(bareR))

	half := ingMax.Rate() / 2
	ingHalf := openLoop(ctx, client, "http://"+ingest.addr, reqs, half, dur)
	bareHalf := openLoop(ctx, client, "http://"+bare.addr, reqs, half, dur)
	rec := report.NewRecorder("bench-ingest")
	for _, t := range targets {
		perTarget[t.name].record(rec, t.name+" max")
	}
	rec.AddRuns("ratio ingest/minimal req/s", "ratio", rateR)
	rec.AddRuns("ratio ingest/minimal p99", "ratio", p99R)
	rec.AddRuns("ratio ingest/bare req/s", "ratio", bareR)
	fmt.Printf("%-34s %10s %9s %9s %8s\n", "open loop", "req/s", "p50 ms", "p99 ms", "errors")
	for _, r := range []struct {
		name, key string
		res       loadtest.Result
	}{
		{fmt.Sprintf("bare gin 202, %.0f req/s", half), "bare half", bareHalf},
		{fmt.Sprintf("ingest, %.0f req/s (half of max)", half), "ingest half", ingHalf},
	} {
		fmt.Printf("%-34s %10.0f %9.2f %9.2f %8d\n", r.name, r.res.Rate(), ms(r.res.Pct(50)), ms(r.res.Pct(99)), r.res.Errors)
		rec.Add(r.key+" req/s", r.res.Rate(), "req/s")
		rec.Add(r.key+" p50", ms(r.res.Pct(50)), "ms")
		rec.Add(r.key+" p99", ms(r.res.Pct(99)), "ms")
		rec.Add(r.key+" errors", float64(r.res.Errors), "requests")
	}
	if err := rec.WriteEnv(); err != nil {
		return err
	}
	fmt.Printf("ingest p99 at half of max: %.2f ms (target <= 10 ms); load average at the end %s\n", ms(ingHalf.Pct(99)), loadAvg())
	if ingHalf.Errors > 0 {
		return fmt.Errorf("%d requests to ingest failed or were answered with something other than 202; the first: %v", ingHalf.Errors, ingHalf.First)
	}
	return nil
}

// measureRound measures each target of order for dur of closed loop,
// the targets taking turns in slices of slice (the last one shorter), so
// that a change of the machine's other load within the round falls on
// every target alike rather than on whichever ran then; slice 0 gives
// each one turn of dur. It returns each target's requests (latencies and
// errors of its slices together, over their summed time), its own CPU per
// request, and, when broker is a pid, the broker's CPU per request during
// that target's slices.
func measureRound(ctx context.Context, client *http.Client, reqs []request, order []*target, conns int, dur, slice time.Duration, broker int) (
	res map[string]loadtest.Result, cpu, brokerCPU map[string]time.Duration, err error) {
	if slice <= 0 {
		slice = dur
	}
	res = map[string]loadtest.Result{}
	cpu, brokerCPU = map[string]time.Duration{}, map[string]time.Duration{}
	for done := time.Duration(0); done < dur; done += slice {
		d := min(slice, dur-done)
		for _, t := range order {
			cpu0, b0, err := cpuOf(t.proc.Pid(), broker)
			if err != nil {
				return nil, nil, nil, err
			}
			x := closedLoop(ctx, client, "http://"+t.addr, reqs, conns, d)
			cpu1, b1, err := cpuOf(t.proc.Pid(), broker)
			if err != nil {
				return nil, nil, nil, err
			}
			r := res[t.name]
			r.Lat = append(r.Lat, x.Lat...)
			r.Errors += x.Errors
			r.Elapsed += x.Elapsed
			res[t.name] = r
			cpu[t.name] += cpu1 - cpu0
			brokerCPU[t.name] += b1 - b0
		}
	}
	for name, r := range res {
		if n := time.Duration(len(r.Lat) + r.Errors); n > 0 {
			cpu[name] /= n
			brokerCPU[name] /= n
		}
	}
	return res, cpu, brokerCPU, nil
}

// cpuOf is the CPU time so far of the process pid and of the broker, 0 for
// the broker when broker is not a pid (not measured).
func cpuOf(pid, broker int) (own, brk time.Duration, err error) {
	if own, err = loadtest.CPU(pid); err != nil || broker <= 0 {
		return own, 0, err
	}
	brk, err = loadtest.CPU(broker)
	return own, brk, err
}

// spread is "median m (range lo-hi)" of xs.
func spread(xs []float64) string {
	s := slices.Sorted(slices.Values(xs))
	return fmt.Sprintf("median %.3f (range %.3f-%.3f)", s[len(s)/2], s[0], s[len(s)-1])
}

// targetRuns holds one target's closed-loop figures, round by round.
type targetRuns struct{ rate, p50, p99, errors, cpu, brokerCPU []float64 }

func (t *targetRuns) add(res loadtest.Result, cpuPerReq, brokerPerReq time.Duration, broker bool) {
	if broker {
		t.brokerCPU = append(t.brokerCPU, float64(brokerPerReq.Microseconds()))
	}
	t.rate = append(t.rate, res.Rate())
	t.p50 = append(t.p50, ms(res.Pct(50)))
	t.p99 = append(t.p99, ms(res.Pct(99)))
	t.errors = append(t.errors, float64(res.Errors))
	t.cpu = append(t.cpu, float64(cpuPerReq.Microseconds()))
}

// record puts the rounds into rec as figures measured several times.
func (t *targetRuns) record(rec *report.Recorder, key string) {
	rec.AddRuns(key+" req/s", "req/s", t.rate)
	rec.AddRuns(key+" p50", "ms", t.p50)
	rec.AddRuns(key+" p99", "ms", t.p99)
	rec.AddRuns(key+" errors", "requests", t.errors)
	rec.AddRuns(key+" CPU per request", "µs/request", t.cpu)
	if len(t.brokerCPU) > 0 {
		rec.AddRuns(key+" broker CPU per request", "µs/request", t.brokerCPU)
	}
}

// loadAvg is the machine's load average (1, 5, 15 minutes), or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

type request struct {
	body []byte
	sig  string
}

// signedBodies pre-signs n distinct bodies so signing is not in the loop.
func signedBodies(n, size int) ([]request, error) {
	out := make([]request, n)
	now := time.Now()
	for i := range out {
		head := fmt.Sprintf(`{"id":"evt_bench_%d_%d","type":"invoice.paid","pad":"`, now.UnixNano(), i)
		tail := `"}`
		pad := max(0, size-len(head)-len(tail))
		body := []byte(head + strings.Repeat("x", pad) + tail)
		h := http.Header{}
		if err := providers.Sign("stripe", []byte(secret), body, now, h); err != nil {
			return nil, err
		}
		out[i] = request{body: body, sig: h.Get("Stripe-Signature")}
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func send(ctx context.Context, c *http.Client, base string, r request) error {
	return post(ctx, c, base+"/webhooks/stripe", r.body, "Stripe-Signature", r.sig)
}

// post sends body as JSON with the headers given as name, value pairs, and
// wants 202.
func post(ctx context.Context, c *http.Client, url string, body []byte, hv ...string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hv); i += 2 {
		req.Header.Set(hv[i], hv[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// closedLoop keeps conns requests in flight for dur.
func closedLoop(ctx context.Context, c *http.Client, base string, reqs []request, conns int, dur time.Duration) loadtest.Result {
	return loadtest.ClosedLoop(ctx, conns, dur, func(ctx context.Context, i int) error {
		return send(ctx, c, base, reqs[i%len(reqs)])
	})
}

// openLoop sends at a fixed rate for dur; latency counts from the scheduled
// send time, so a stalled server shows in the percentiles.
func openLoop(ctx context.Context, c *http.Client, base string, reqs []request, rate float64, dur time.Duration) loadtest.Result {
	return loadtest.OpenLoop(ctx, rate, dur, func(ctx context.Context, i int) error {
		return send(ctx, c, base, reqs[i%len(reqs)])
	})
}
