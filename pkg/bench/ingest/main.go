// Command ingest is ingest's benchmark (make bench-ingest, built as
// bin/loadgen): it drives the real ingest binary on loopback with signed 1 KiB Stripe deliveries and, in
// the same run, a bare gin handler that answers 202 without Kafka, so the
// figures are a ratio taken on one machine at one time.
//
// Phases: closed-loop maximum rate against each target (C connections, D
// seconds), then open-loop at half of ingest's maximum, where latency is
// measured from each request's scheduled send time (no coordinated omission).
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
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

func main() {
	serveBare := flag.String("serve-bare", "", "internal: serve the bare gin handler on this address")
	conns := flag.Int("c", 256, "concurrent connections in the closed-loop phases")
	dur := flag.Duration("d", 10*time.Second, "length of each measured phase")
	bodySize := flag.Int("body", 1024, "request body size in bytes")
	flag.Bool("compare", true, "compare ingest with the bare handler (the default mode)")
	corpusName := flag.String("corpus", "", "github: ingest on GitHub's published example payloads without schema, with GitHub's schema per event type and with the whole-provider schema file, alternated (see -rounds)")
	rounds := flag.Int("rounds", 5, "with -corpus: rounds, each measuring the three ingests in turn for -d")
	flag.Parse()
	gin.SetMode(gin.ReleaseMode)
	if *serveBare != "" {
		if err := bare(*serveBare); err != nil {
			fmt.Fprintln(os.Stderr, "bare:", err)
			os.Exit(1)
		}
		return
	}
	if *corpusName != "" {
		loadtest.Main("loadgen", func(ctx context.Context) error { return runCorpus(ctx, *corpusName, *conns, *dur, *rounds) })
		return
	}
	loadtest.Main("loadgen", func(ctx context.Context) error { return run(ctx, *conns, *dur, *bodySize) })
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

func run(ctx context.Context, conns int, dur time.Duration, bodySize int) (err error) {
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

	ingestAddr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	bareAddr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, c := range []struct {
		path, addr string
		env, args  []string
	}{
		{self, bareAddr, nil, []string{"-serve-bare", bareAddr}},
		{r.Bins["ingest"], ingestAddr, []string{"HOOKLINE_INGEST_ADDR=" + ingestAddr, "HOOKLINE_PROVIDERS=" + provFile, "BENCH_STRIPE_SECRET=" + secret,
			"HOOKLINE_TOPIC_PREFIX=" + prefix, "HOOKLINE_LOG_LEVEL=warn"}, nil},
	} {
		p, err := loadtest.Start(c.path, c.env, filepath.Join(r.Dir, filepath.Base(c.path)+".log"), c.args...)
		if err != nil {
			return err
		}
		defer func() { _ = p.Stop(30 * time.Second) }()
		if err := p.WaitReady(ctx, "http://"+c.addr+"/readyz", 60*time.Second); err != nil {
			return err
		}
	}

	reqs, err := signedBodies(20000, bodySize)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}, Timeout: 30 * time.Second}
	fmt.Printf("hookline ingest benchmark: %d-byte signed Stripe bodies, %d connections, %s per phase, broker %s\n", bodySize, conns, dur, strings.Join(r.Kafka.Brokers, ","))

	// Warm both up (JIT on the broker side, connection pools, topic leaders).
	_ = closedLoop(ctx, client, "http://"+bareAddr, reqs, conns, 2*time.Second)
	_ = closedLoop(ctx, client, "http://"+ingestAddr, reqs, conns, 2*time.Second)

	bareMax := closedLoop(ctx, client, "http://"+bareAddr, reqs, conns, dur)
	ingMax := closedLoop(ctx, client, "http://"+ingestAddr, reqs, conns, dur)
	half := ingMax.Rate() / 2
	ingHalf := openLoop(ctx, client, "http://"+ingestAddr, reqs, half, dur)
	bareHalf := openLoop(ctx, client, "http://"+bareAddr, reqs, half, dur)

	rec := report.NewRecorder("bench-ingest")
	fmt.Printf("%-34s %10s %9s %9s %8s\n", "phase", "req/s", "p50 ms", "p99 ms", "errors")
	for _, r := range []struct {
		name, key string
		res       loadtest.Result
	}{
		{"bare gin 202, max", "bare max", bareMax},
		{"ingest (acks=all), max", "ingest max", ingMax},
		{fmt.Sprintf("bare gin 202, %.0f req/s", half), "bare half", bareHalf},
		{fmt.Sprintf("ingest, %.0f req/s (half of max)", half), "ingest half", ingHalf},
	} {
		fmt.Printf("%-34s %10.0f %9.2f %9.2f %8d\n", r.name, r.res.Rate(), ms(r.res.Pct(50)), ms(r.res.Pct(99)), r.res.Errors)
		recordResult(rec, r.key, r.res)
	}
	fmt.Printf("ratio ingest/bare max throughput: %.2f (target >= 0.50)\n", ingMax.Rate()/bareMax.Rate())
	fmt.Printf("ingest p99 at half of max: %.2f ms (target <= 10 ms)\n", ms(ingHalf.Pct(99)))
	rec.Add("ratio ingest/bare max req/s", ingMax.Rate()/bareMax.Rate(), "ratio")
	rec.Add("ratio ingest/bare p99 at max", float64(ingMax.Pct(99))/float64(bareMax.Pct(99)), "ratio")
	if err := rec.WriteEnv(); err != nil {
		return err
	}
	if ingMax.Errors > 0 || ingHalf.Errors > 0 {
		return fmt.Errorf("ingest answered %d requests with something other than 202", ingMax.Errors+ingHalf.Errors)
	}
	return nil
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

// recordResult records a phase's req/s, p50, p99 and errors as printed.
func recordResult(rec *report.Recorder, phase string, res loadtest.Result) {
	rec.Add(phase+" req/s", res.Rate(), "req/s")
	rec.Add(phase+" p50", ms(res.Pct(50)), "ms")
	rec.Add(phase+" p99", ms(res.Pct(99)), "ms")
	rec.Add(phase+" errors", float64(res.Errors), "requests")
}

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
