package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
	"github.com/hookline/hookline/pkg/testkit/loadtest"
)

// corpusMode is one ingest of the corpus benchmark: its github provider's
// schema lines.
type corpusMode struct {
	name      string
	schema    string // the entry's schema: value; "" for none
	onInvalid string // dlq (the processor checks) or reject (ingest checks)
	addr      string
	proc      *loadtest.Proc
}

// runCorpus measures ingest on GitHub's published example payloads
// (package corpus: the payloads of 58 event types that the independent
// validator accepts against both schemas below, signed, with GitHub's
// headers) with four providers files, each served by its own ingest
// process: none (no schema), per-event (GitHub's schema mapped per event
// type to each type's own definition, on_invalid: dlq: ingest checks
// nothing, the processor does), pe-reject (the same, on_invalid:
// reject: ingest checks each body) and wh-reject (the whole-provider
// file, its top-level oneOf, on_invalid: reject). The payloads the
// validator refuses are left out so that reject answers 202 to every one.
// Each round measures the four in
// turn, closed loop for dur each, so they share the machine's state; the
// ratio of each to none is taken per round and the range over rounds
// printed. Replay recognition is off (HOOKLINE_REPLAY_CACHE_ENTRIES=0):
// the corpus is sent again and again, and a recognised replay would skip
// the produce.
func runCorpus(ctx context.Context, name string, conns int, dur time.Duration, rounds int) (err error) {
	if name != "github" {
		return fmt.Errorf("-corpus %q: the corpus is github", name)
	}
	all, err := corpus.LoadGitHub()
	if err != nil {
		return err
	}
	var exs []corpus.GitHubExample
	var invalid [2]map[string]bool
	for i, mode := range []string{corpus.PerEvent, corpus.Whole} {
		if invalid[i], err = corpus.LoadGitHubInvalid(mode); err != nil {
			return err
		}
	}
	for _, e := range all {
		if !invalid[0][e.ID()] && !invalid[1][e.ID()] {
			exs = append(exs, e)
		}
	}
	defs, err := corpus.GitHubMapping()
	if err != nil {
		return err
	}
	perEvent, err := json.Marshal(defs)
	if err != nil {
		return err
	}
	whole, _ := json.Marshal(corpus.GitHubSchema())
	modes := []*corpusMode{{name: "none"}, {name: "per-event", schema: string(perEvent), onInvalid: "dlq"},
		{name: "pe-reject", schema: string(perEvent), onInvalid: "reject"}, {name: "wh-reject", schema: string(whole), onInvalid: "reject"}}

	r, err := loadtest.NewRun("bench-ingest-corpus", []string{"ingest"})
	if err != nil {
		return err
	}
	defer func() { err = r.Close(err) }()
	for _, m := range modes {
		entry := "providers:\n  github:\n    preset: github\n    secret_env: [BENCH_GITHUB_SECRET]\n"
		if m.schema != "" {
			entry += "    schema: " + m.schema + "\n    on_invalid: " + m.onInvalid + "\n"
		}
		file := filepath.Join(r.Dir, "providers-"+m.name+".yaml")
		if err := os.WriteFile(file, []byte(entry), 0o600); err != nil {
			return err
		}
		if m.addr, err = loadtest.FreeAddr(); err != nil {
			return err
		}
		m.proc, err = loadtest.Start(r.Bins["ingest"], []string{"HOOKLINE_INGEST_ADDR=" + m.addr, "HOOKLINE_PROVIDERS=" + file,
			"BENCH_GITHUB_SECRET=" + secret, "HOOKLINE_TOPIC_PREFIX=" + r.Prefix("bench-corpus-"+m.name),
			"HOOKLINE_REPLAY_CACHE_ENTRIES=0", "HOOKLINE_LOG_LEVEL=warn"}, filepath.Join(r.Dir, "ingest-"+m.name+".log"))
		if err != nil {
			return err
		}
		defer func() { _ = m.proc.Stop(30 * time.Second) }()
		if err := m.proc.WaitReady(ctx, "http://"+m.addr+"/readyz", 60*time.Second); err != nil {
			return err
		}
	}
	reqs := make([]corpusRequest, len(exs))
	var bytesSum int
	for i, e := range exs {
		h := http.Header{}
		if err := providers.Sign("github", []byte(secret), e.Body, time.Now(), h); err != nil {
			return err
		}
		reqs[i] = corpusRequest{body: e.Body, event: e.Event, delivery: e.Delivery, sig: h.Get("X-Hub-Signature-256")}
		bytesSum += len(e.Body)
	}
	client := loadtest.PostClient(512, 512)
	fmt.Printf("hookline ingest on a real corpus: GitHub's %d example payloads (%d event types, mean %d bytes), %d connections, %s per phase, %d rounds, broker %s, load average %s\n",
		len(exs), len(defs), bytesSum/len(exs), conns, dur, rounds, strings.Join(r.Kafka.Brokers, ","), loadAvg())
	for _, m := range modes { // warm-up
		_ = corpusLoop(ctx, client, m.addr, reqs, conns, 2*time.Second)
	}
	ratios := map[string][]float64{}
	rates := map[string][]float64{}
	cpus := map[string][]float64{}
	fmt.Printf("%-6s %-10s %10s %9s %9s %8s %8s %14s\n", "round", "schema", "req/s", "p50 ms", "p99 ms", "errors", "×none", "ingest CPU/req")
	for round := 1; round <= rounds; round++ {
		var base float64
		for _, m := range modes {
			cpu0, err := loadtest.CPU(m.proc.Pid())
			if err != nil {
				return err
			}
			res := corpusLoop(ctx, client, m.addr, reqs, conns, dur)
			cpu1, err := loadtest.CPU(m.proc.Pid())
			if err != nil {
				return err
			}
			perReq := time.Duration(0)
			if n := len(res.Lat) + res.Errors; n > 0 {
				perReq = (cpu1 - cpu0) / time.Duration(n)
			}
			if m.name == "none" {
				base = res.Rate()
			}
			ratio := res.Rate() / base
			ratios[m.name] = append(ratios[m.name], ratio)
			rates[m.name] = append(rates[m.name], res.Rate())
			cpus[m.name] = append(cpus[m.name], float64(perReq.Microseconds()))
			fmt.Printf("%-6d %-10s %10.0f %9.2f %9.2f %8d %8.2f %11.0f µs\n", round, m.name, res.Rate(), ms(res.Pct(50)), ms(res.Pct(99)), res.Errors, ratio, float64(perReq.Microseconds()))
			if res.Errors > 0 {
				return fmt.Errorf("%s: %d requests answered something other than 202", m.name, res.Errors)
			}
		}
	}
	rec := report.NewRecorder("bench-ingest")
	for _, m := range modes[1:] {
		fmt.Printf("%s/none throughput over %d rounds: %s\n", m.name, rounds, spread(ratios[m.name]))
		rec.AddRuns("corpus "+m.name+"/none req/s", "ratio", ratios[m.name])
	}
	fmt.Printf("load average at the end %s\n", loadAvg())
	for _, m := range modes {
		rec.AddRuns("corpus "+m.name+" req/s", "req/s", rates[m.name])
		rec.AddRuns("corpus "+m.name+" ingest CPU per request", "µs/request", cpus[m.name])
	}
	return rec.WriteEnv()
}

type corpusRequest struct {
	body                 []byte
	event, delivery, sig string
}

// corpusLoop keeps conns requests in flight for dur, going round the
// corpus.
func corpusLoop(ctx context.Context, c *http.Client, addr string, reqs []corpusRequest, conns int, dur time.Duration) loadtest.Result {
	return loadtest.ClosedLoop(ctx, conns, dur, func(ctx context.Context, i int) error {
		r := reqs[i%len(reqs)]
		return post(ctx, c, "http://"+addr+"/webhooks/github", r.body,
			"X-GitHub-Event", r.event, "X-GitHub-Delivery", r.delivery, "X-Hub-Signature-256", r.sig)
	})
}
