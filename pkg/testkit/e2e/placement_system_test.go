package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// TestOrderingAddedUnderFlow is issue 31 item 7's first hole: `ordering`
// added to a running provider moves its keys to other partitions, so a
// key accepted before and sent again after would be delivered twice.
// Under a flow with re-sends, the providers file gets ordering for
// stripe and ingest is restarted: the new ingest refuses to start, naming
// the provider and placement_from, and accepts nothing; the operator
// undoes the change, ingest starts again and the flow ends with the
// ledger balanced. Then, the flow over, the operator makes the change
// with placement_from: ingest starts, records stripe's new placement, and
// a second flow's stripe records carry their entity; the ledger balances
// again (lost 0, doubled 0 both times).
func TestOrderingAddedUnderFlow(t *testing.T) {
	skipShort(t)
	besideParallel(t)
	sys := e2e.New(t, e2e.Options{Partitions: 6})
	file := filepath.Join(sys.Dir, "providers.yaml")
	unordered, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const stripeLine = "{preset: stripe, "
	if !strings.Contains(string(unordered), stripeLine) {
		t.Fatalf("the harness's providers file has no %q:\n%s", stripeLine, unordered)
	}
	ordered := func(extra string) []byte {
		return []byte(strings.Replace(string(unordered), stripeLine, stripeLine+"ordering: {json: /type}, "+extra, 1))
	}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ingest := sys.StartIngest()
	sys.StartProcessor("p1", nil)
	sys.StartRetrier(nil)
	placements := sys.Read(sys.Names.Control)
	placements.Until(time.Minute, "stripe's placement recorded by key", func(rs []*kgo.Record) bool {
		return lastPlacement(rs, "stripe").By == control.PlacedByKey
	})

	flow := sys.StartFlow(e2e.FlowOptions{Deliveries: 3000, Rate: 300, Duplicates: 0.3, ID: "before"})
	waitFor(t, time.Minute, "500 deliveries accepted", func() bool { return flow.Accepted() >= 500 }, func() {})

	// The operator adds ordering and restarts ingest under the flow.
	write(ordered(""))
	ingest.Stop(t)
	out := sys.RestartRefused(ingest, time.Minute)
	for _, want := range []string{`refusing to start`, `provider "stripe": ordering was added`, `by entity json /type`, `by key since`, `delivered a second time`, `placement_from: `} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused ingest does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "accepting webhooks") {
		t.Errorf("the refused ingest accepted webhooks:\n%s", out)
	}
	if p := lastPlacement(placements.Until(time.Minute, "the control topic read", func([]*kgo.Record) bool { return true }), "stripe"); p.By != control.PlacedByKey {
		t.Errorf("after the refusal stripe's placement is %+v, want by key still", p)
	}
	t.Logf("ingest refused the change after %d deliveries accepted", flow.Accepted())

	// The operator undoes it: ingest starts, the flow goes on to its end.
	write(unordered)
	ingest = sys.Restart(ingest)
	first := flow.Wait()
	if first.GaveUp > 0 || first.Refused > 0 {
		t.Errorf("the first flow: %d deliveries given up, %d refused", first.GaveUp, first.Refused)
	}
	sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	// The operator makes the change, acknowledged.
	write(ordered("placement_from: " + time.Now().UTC().Format(time.RFC3339) + ", "))
	ingest.Stop(t)
	ingest = sys.Restart(ingest)
	placements.Until(time.Minute, "stripe's placement recorded by entity, acknowledged", func(rs []*kgo.Record) bool {
		p := lastPlacement(rs, "stripe")
		return p.By == control.PlacedByEntity("json /type") && p.Acknowledged != nil
	})
	second := sys.StartFlow(e2e.FlowOptions{Deliveries: 1500, Rate: 300, Duplicates: 0.3, ID: "after"})
	second.Wait()
	tally := sys.Ledger().Settle(t, e2e.SettleOptions{AllDone: true})

	// The second flow's stripe records were placed by entity: each carries
	// its type as hookline.entity; the first flow's none.
	var before, after, wrong int
	sys.Read(sys.Names.Raw).Until(time.Minute, "the second flow's stripe records in raw", func(rs []*kgo.Record) bool {
		before, after, wrong = 0, 0, 0
		for _, r := range rs {
			k, entity := string(r.Key), headers.Value(r, headers.Entity)
			switch {
			case strings.HasPrefix(k, "stripe:before_"):
				before++
				if entity != "" {
					wrong++
				}
			case strings.HasPrefix(k, "stripe:after_"):
				after++
				if entity == "" {
					wrong++
				}
			}
		}
		return after > 0
	})
	if wrong > 0 {
		t.Errorf("%d stripe records placed otherwise than their flow's placement (%d before the change, %d after)", wrong, before, after)
	}
	t.Logf("stripe records in raw: %d by key before the change, %d by entity after; ledger lost %d, doubled %d", before, after, tally.Lost, tally.Doubled)
}

// lastPlacement is provider's last placement record among rs; zero when
// there is none.
func lastPlacement(rs []*kgo.Record, provider string) control.Placement {
	var last control.Placement
	for _, r := range rs {
		if p, ok, err := control.DecodePlacement(r); ok && err == nil && p.Provider == provider {
			last = p
		}
	}
	return last
}
