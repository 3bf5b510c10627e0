package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

// nopPublisher accepts every record and keeps none.
type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, []*kgo.Record) error { return nil }

// BenchmarkCorpusSchemas is ingest's cost of checking real payloads against
// their provider's published schema: GitHub's example payloads (package
// corpus) that the independent validator accepts against both schemas
// below, through the HTTP surface with a publisher that does nothing, the
// github provider without schema (none), with GitHub's schema mapped per
// event type (each type's own definition: per-event) and with the one
// whole-provider file (its top-level oneOf: whole), on_invalid: reject
// (ingest checks bodies only then: with dlq the processor does). One iteration is a
// round: the whole corpus once through each, in turn, so the three see the
// same machine at the same time; the ratios of throughput to none's are
// taken per round and reported as their median, lowest and highest
// (-benchtime Nx: N rounds), by wall time and by the process's CPU time
// (the metrics ending in -cpu, medians: other work on the machine
// stretches wall time, not CPU time). Kafka is left out, so the ratios are
// the HTTP surface's alone: with the produce's round trip they are closer
// to 1.
func BenchmarkCorpusSchemas(b *testing.B) {
	var exs []corpus.GitHubExample
	invalid := [2]map[string]bool{corpus.GitHubInvalid(b, corpus.PerEvent), corpus.GitHubInvalid(b, corpus.Whole)}
	for _, e := range corpus.GitHub(b) {
		if !invalid[0][e.ID()] && !invalid[1][e.ID()] {
			exs = append(exs, e)
		}
	}
	defs, err := corpus.GitHubMapping()
	if err != nil {
		b.Fatal(err)
	}
	perEvent, err := json.Marshal(defs)
	if err != nil {
		b.Fatal(err)
	}
	whole, _ := json.Marshal(corpus.GitHubSchema())
	modes := []struct{ name, lines string }{
		{"none", ""},
		{"per-event", "\n    schema: " + string(perEvent)},
		{"whole", "\n    schema: " + string(whole)},
	}
	handlers := make([]http.Handler, len(modes))
	var reg *providers.Registry
	for i, m := range modes {
		handlers[i], reg = corpusServer(b, m.lines)
	}
	sigs := make([]string, len(exs))
	p, _ := reg.Get("github")
	for i, e := range exs {
		h := http.Header{}
		if err := p.Sign(e.Body, time.Now(), h); err != nil {
			b.Fatal(err)
		}
		sigs[i] = h.Get("X-Hub-Signature-256")
	}
	pass := func(h http.Handler) (wall, cpu time.Duration) {
		start, cpu0 := time.Now(), processCPU(b)
		for i, e := range exs {
			req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(e.Body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", e.Event)
			req.Header.Set("X-GitHub-Delivery", e.Delivery)
			req.Header.Set("X-Hub-Signature-256", sigs[i])
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusAccepted {
				b.Fatalf("%s: status %d: %s", e.ID(), w.Code, w.Body)
			}
		}
		return time.Since(start), processCPU(b) - cpu0
	}
	// Per round and mode: throughput over none's, by wall time and by the
	// process's CPU time (which other work on the machine does not
	// stretch).
	ratios, cpuRatios := make([][]float64, len(modes)), make([][]float64, len(modes))
	rounds := 0
	for b.Loop() {
		var took, cpu [3]time.Duration
		for i, h := range handlers {
			took[i], cpu[i] = pass(h)
		}
		rounds++
		line := fmt.Sprintf("round %d:", rounds)
		for i, m := range modes {
			r := float64(took[0]) / float64(took[i]) // throughput of mode i over none's
			rc := float64(cpu[0]) / float64(max(cpu[i], 1))
			ratios[i] = append(ratios[i], r)
			cpuRatios[i] = append(cpuRatios[i], rc)
			line += fmt.Sprintf(" %s %.0f/s (%.3f×), CPU %.0f µs/req (%.3f×);", m.name, float64(len(exs))/took[i].Seconds(), r,
				float64(cpu[i].Microseconds())/float64(len(exs)), rc)
		}
		b.Log(line)
	}
	for i, m := range modes[1:] {
		rs := slices.Sorted(slices.Values(ratios[i+1]))
		b.ReportMetric(rs[len(rs)/2], m.name+"/none")
		b.ReportMetric(rs[0], m.name+"/none-min")
		b.ReportMetric(rs[len(rs)-1], m.name+"/none-max")
		cs := slices.Sorted(slices.Values(cpuRatios[i+1]))
		b.ReportMetric(cs[len(cs)/2], m.name+"/none-cpu")
	}
	b.ReportMetric(float64(len(exs)*len(modes)), "requests/round")
}

// processCPU is the CPU time the process has used so far (user and
// system, every thread).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// corpusServer is ingest's handler with one provider, github, whose entry
// ends with lines (its schema, or nothing), replay recognition off (the
// corpus goes through again each round), bodies up to 1 MiB.
func corpusServer(b *testing.B, lines string) (http.Handler, *providers.Registry) {
	b.Helper()
	file := filepath.Join(b.TempDir(), "providers.yaml")
	yaml := "providers:\n  github:\n    preset: github\n    secret_env: [HL_TEST_SECRET]\n    on_invalid: reject" + lines + "\n"
	if lines == "" {
		yaml = "providers:\n  github:\n    preset: github\n    secret_env: [HL_TEST_SECRET]\n"
	}
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	reg, err := providers.Load(file, lookup)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := testServer(b, nopPublisher{}, func(c *Config) {
		c.Providers, c.ReplayCacheEntries, c.MaxBodyBytes = reg, 0, 1<<20
	})
	return s.Handler(), reg
}
