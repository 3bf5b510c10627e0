package main

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookline/hookline/ingest/internal/selftest"
)

// TestSelftestEndpoint: GET /selftest on a running ingest answers 200 with
// every provider of the file and its secret count, every topic it ensures
// with its partition count, a round trip through webhooks.selftest and the
// version; no secret value appears in the body.
func TestSelftestEndpoint(t *testing.T) {
	e := newEnv(t)
	e.vars["HOOKLINE_PRODUCE_DEADLINE"] = "20s" // the self-test's bound: the shared broker can be slow to take a first produce
	base := e.start(t)
	resp, err := http.Get(base + "/selftest")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rep selftest.Report
	if err := json.Unmarshal(body, &rep); err != nil || resp.StatusCode != 200 || rep.Status != selftest.Pass {
		t.Fatalf("GET /selftest: %d %s (%v)", resp.StatusCode, body, err)
	}
	for _, v := range append(slices.Collect(maps.Values(secrets)), "test-secret-standard-0123456789") { // the last: the standard secret decoded
		if strings.Contains(string(body), v) {
			t.Fatalf("the self-test's body holds a secret value: %s", body)
		}
	}
	secretsOf := map[string]int{}
	for _, p := range rep.Providers {
		secretsOf[p.Name] = p.Secrets
	}
	if len(rep.Providers) != len(e.reg.Names()) || secretsOf["stripe"] != 2 || secretsOf["github"] != 1 {
		t.Fatalf("providers %+v, want the file's %d with stripe's 2 secrets", rep.Providers, len(e.reg.Names()))
	}
	var raw, st bool
	for _, tp := range rep.Checks.Topics.Topics {
		raw = raw || (tp.Name == e.raw() && tp.Partitions == 3)
		st = st || (tp.Name == e.prefix+"webhooks.selftest" && tp.Partitions == 1)
	}
	if !raw || !st {
		t.Fatalf("topics %+v, want %s with 3 partitions and the selftest topic with 1", rep.Checks.Topics.Topics, e.raw())
	}
	if k := rep.Checks.Kafka; k.Topic != e.prefix+"webhooks.selftest" || k.RoundTripMS <= 0 || rep.Version == "" {
		t.Fatalf("kafka check %+v, version %q: want a round trip and a version", k, rep.Version)
	}
}
