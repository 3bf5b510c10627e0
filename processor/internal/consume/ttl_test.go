package consume

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/decide"
)

// TestDedupTTLPerEventType (seed 000, issue 32 item 7): the policy of a
// decision has the dedup TTL of the record's event type, for a route and
// for the key alike, so a delivered call_analyzed key is forgotten after
// 3 days and a call_ended key after 7: on day 4 a re-send of the first is
// processed again, of the second skipped as a duplicate. The clock is the
// decision's (Arrival.Now), so no test waits days.
func TestDedupTTLPerEventType(t *testing.T) {
	reg, err := providers.Parse([]byte(`
providers:
  retell:
    preset: retell
    secret_env: [S]
    dedup_ttl: {call_ended: 168h, call_analyzed: 72h}
    destination: {url: "http://retell.invalid/"}
`), func(string) (string, bool) { return "s3cret", true })
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := reg.Get("retell")
	p := &setup{cfg: Config{Providers: reg}}
	route := &target{provider: "retell", route: pr.Routes()[0].Name, policy: policyFor(p.cfg, pr, pr.Routes()[0])}
	record := func(eventType string) *kgo.Record {
		r := &kgo.Record{Key: []byte("retell:" + eventType + ":call_1")}
		headers.Set(r, headers.EventType, eventType)
		return r
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		eventType string
		ttl       time.Duration
		again     bool // a re-send on day 4 is processed
	}{
		{"call_analyzed", 3 * day, true},
		{"call_ended", 7 * day, false},
		{"call_started", providers.DefaultDedupTTL, false}, // not named: the provider's default
	} {
		r := record(tc.eventType)
		for _, tgt := range []*target{route, nil} {
			pol := p.policyOf(tgt, r, "retell")
			if pol.TTL != tc.ttl {
				t.Fatalf("%s (route %t): TTL %v, want %v", tc.eventType, tgt != nil, pol.TTL, tc.ttl)
			}
			if tgt != nil {
				if rp := routePolicy(tgt, p.policyOf(nil, r, "retell"), true); !reflect.DeepEqual(rp, pol) {
					t.Fatalf("%s: routePolicy %+v, want policyOf's %+v", tc.eventType, rp, pol)
				}
			}
			a := decide.Arrival{Origin: headers.OriginIngest, Attempt: 1, Provider: "retell", Now: t0}
			st, _ := decide.Step(nil, a, decide.Result{Kind: decide.ResultCalled}, pol) // delivered
			if got := st.ExpiresAt.Sub(t0); got != tc.ttl {
				t.Errorf("%s: the state expires after %v, want %v", tc.eventType, got, tc.ttl)
			}
			again := a
			again.Now = t0.Add(4 * day)
			process, why := decide.Admit(&st, again)
			if process != tc.again {
				t.Errorf("%s: a re-send on day 4 processed %t (%s), want %t", tc.eventType, process, why, tc.again)
			}
		}
	}
}
