package transform_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/providers/transform"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

var update = flag.Bool("update", false, "rewrite the examples' expected outputs in testdata")

// githubPush is the first push of GitHub's published examples (the
// vendored corpus), as GitHub sends it.
func githubPush(tb testing.TB) transform.Request {
	tb.Helper()
	for _, ex := range corpus.GitHub(tb) {
		if ex.Event == "push" {
			return transform.Request{Body: ex.Body, ContentType: "application/json", EventType: "push", Provider: "github", Route: "slack",
				Headers: []kgo.RecordHeader{{Key: "x-github-delivery", Value: []byte(ex.Delivery)}, {Key: "x-github-event", Value: []byte("push")}}}
		}
	}
	tb.Fatal("no push in the corpus")
	return transform.Request{}
}

func stripe(tb testing.TB, file, eventType, route string) transform.Request {
	tb.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return transform.Request{Body: bytes.TrimSpace(body), ContentType: "application/json; charset=utf-8", EventType: eventType, Provider: "stripe", Route: route,
		Headers: []kgo.RecordHeader{{Key: "stripe-signature", Value: []byte("t=1732789421,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")}}}
}

// TestExamples runs the docs' examples (docs/providers.md, README.md) on
// real payloads and compares each result, byte for byte, with the
// expected output in testdata (go test -run TestExamples -update
// rewrites them; review the diff).
func TestExamples(t *testing.T) {
	for _, tc := range []struct {
		script, want string
		in           transform.Request
	}{
		{"github-push-to-slack.js", "github-push-to-slack.out", githubPush(t)},
		{"crm-drop-personal.js", "crm-drop-personal.out", stripe(t, "stripe-customer-updated.json", "customer.updated", "crm")},
		{"rename-for-v1.js", "rename-for-v1.out", stripe(t, "stripe-invoice-paid.json", "invoice.paid", "billing-v1")},
	} {
		t.Run(tc.script, func(t *testing.T) {
			s, err := transform.Load("testdata", tc.script, transform.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Run(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			got.WriteString("content-type: " + res.Request.ContentType + "\n")
			for _, h := range res.Request.Headers {
				got.WriteString(h.Key + ": " + string(h.Value) + "\n")
			}
			got.WriteString("\n")
			got.Write(res.Request.Body)
			got.WriteString("\n")
			if !json.Valid(res.Request.Body) {
				t.Errorf("body is not JSON: %s", res.Request.Body)
			}
			path := filepath.Join("testdata", tc.want)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s on its payload:\n got %s\nwant %s", tc.script, got.Bytes(), want)
			}
		})
	}
}

// BenchmarkTransform is a typical transform's cost per event: the GitHub
// push of the corpus to a Slack message, on an engine from the pool.
// Compare with BenchmarkIdentity on the same body (a call's fixed cost:
// the watchdog, the body's parse and the result's serialisation).
func BenchmarkTransform(b *testing.B) {
	s, err := transform.Load("testdata", "github-push-to-slack.js", benchLimits)
	if err != nil {
		b.Fatal(err)
	}
	bench(b, s, githubPush(b))
}

// BenchmarkIdentity returns the body it got, on the same push.
func BenchmarkIdentity(b *testing.B) {
	s, err := transform.Compile("identity.js", `function transform(r) { return {body: r.body} }`, benchLimits)
	if err != nil {
		b.Fatal(err)
	}
	bench(b, s, githubPush(b))
}

// benchLimits are the largest time limit: on a busy machine a call can
// take longer than the default, and a benchmark measures, it does not
// bound.
var benchLimits = transform.Limits{Timeout: transform.MaxTimeout}

func bench(b *testing.B, s *transform.Script, in transform.Request) {
	b.SetBytes(int64(len(in.Body)))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	n := 0
	for b.Loop() {
		if _, err := s.Run(in); err != nil {
			b.Fatal(err)
		}
		n++
	}
	// The process's CPU time per call (the garbage collector's included):
	// on a machine shared with other work, ns/op is mostly waiting for a
	// CPU, this is what the call costs.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(n), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far, in ns.
func cpuTime(tb testing.TB) int64 {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
