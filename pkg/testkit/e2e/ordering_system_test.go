package e2e_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/testkit/e2e"
)

// orderedProvider is provider ord: keyed by the body's id, its entity the
// body's /entity, with the routes crm and audit (every event, HTTP).
func orderedProvider(dest, secretEnv string) string {
	return fmt.Sprintf(`  ord:
    preset: generic
    secret_env: [%s]
    signature: {header: X-Sig, algorithm: hmac-sha256, encoding: hex}
    idempotency_key: {json: /id}
    ordering: {json: /entity}
    routes:
      crm: {destination: {url: %q, timeout: 5s}}
      audit: {destination: {url: %q, timeout: 5s}}
`, secretEnv, dest+"/crm", dest+"/audit")
}

// TestOrderedEntities is issue 24's order scenario, smaller by default
// (HOOKLINE_E2E_ORDER_ENTITIES, _EVENTS: 1000 and 20 are the issue's):
// events of many entities at 200/s to two routes; the 3rd event of e0007
// fails twice on crm (tiers 1s, 2s, 3s). Every entity's calls on each
// route are in sequence order; e0007's later events are called on crm only
// after its 3rd succeeded, and on audit without waiting; every key is done
// on both routes, once.
func TestOrderedEntities(t *testing.T) {
	skipShort(t)
	entities, events := e2e.EnvCount(t, "HOOKLINE_E2E_ORDER_ENTITIES", 50, 8), e2e.EnvCount(t, "HOOKLINE_E2E_ORDER_EVENTS", 10, 4)
	const rate = 200.0
	sys := e2e.New(t, e2e.Options{Partitions: 6, Providers: orderedProvider})
	failing := "ord:e0007-03"
	sys.Dest.BehaveRoute(func(route, key string, call int) int {
		if route == "crm" && key == failing && call <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	var mu sync.Mutex
	calls := map[string][]string{} // route -> keys in call order
	sys.Dest.OnRouteCall(func(route, key string, _ time.Time) {
		mu.Lock()
		calls[route] = append(calls[route], key)
		mu.Unlock()
	})
	sys.StartIngest()
	sys.StartProcessor("p1", nil)
	sys.StartRetrier(nil)

	start := time.Now()
	n := 0
	for seq := 1; seq <= events; seq++ {
		for e := 1; e <= entities; e++ {
			time.Sleep(time.Until(start.Add(time.Duration(float64(n) / rate * float64(time.Second)))))
			body := fmt.Sprintf(`{"id":"e%04d-%02d","entity":"e%04d","seq":%d}`, e, seq, e, seq)
			ev := e2e.Event{Provider: "ord", Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
			if a, err := sys.Send(ev); err != nil || a.Status != 202 {
				t.Fatalf("post %s: %+v %v", body, a, err)
			}
			n++
		}
	}
	want := entities * events
	done := map[string]map[string]bool{"crm": {}, "audit": {}}
	sys.Read(sys.Names.Outcomes).Until(2*time.Minute, "every key done on crm and audit", func(rs []*kgo.Record) bool {
		for k := range done {
			clear(done[k])
		}
		for _, r := range rs {
			if o, err := outcome.Decode(r.Value); err == nil && o.Status == outcome.StatusDone && done[o.Route] != nil {
				done[o.Route][o.Key] = true
			}
		}
		return len(done["crm"]) == want && len(done["audit"]) == want
	})

	mu.Lock()
	defer mu.Unlock()
	inversions, twice := 0, 0
	for route, keys := range calls {
		last := map[string]int{} // entity -> highest seq called
		seen := map[string]int{}
		for _, k := range keys {
			seen[k]++
			entity, seq := splitKey(t, k)
			if seq < last[entity] {
				inversions++
				t.Errorf("%s: %s called after seq %d of its entity", route, k, last[entity])
			}
			last[entity] = max(last[entity], seq)
		}
		for k, c := range seen {
			if c > 1 && !(route == "crm" && k == failing) {
				twice++
				t.Errorf("%s: %s called %d times", route, k, c)
			}
		}
	}
	// e0007's 4th event is called on crm after its 3rd's third call, and
	// on audit with no wait behind crm's failure.
	crm := calls["crm"]
	third, fourth := lastIndex(crm, failing), slices.Index(crm, "ord:e0007-04")
	if third < 0 || fourth < third || strings.Count(strings.Join(crm, " "), failing) != 3 {
		t.Errorf("crm: %s called at %d (3 times?), e0007-04 at %d: want the 4th after the 3rd's third call", failing, third, fourth)
	}
	t.Logf("ledger: %d entities × %d events: crm %d keys done, audit %d keys done, %d calls on crm, %d on audit; inversions %d, called twice %d (bar %s's two failures); lost %d, doubled 0",
		entities, events, len(done["crm"]), len(done["audit"]), len(crm), len(calls["audit"]), inversions, twice, failing, 2*want-len(done["crm"])-len(done["audit"]))
}

// splitKey reads ord:eNNNN-SS as its entity and sequence number.
func splitKey(t *testing.T, key string) (string, int) {
	t.Helper()
	id := strings.TrimPrefix(key, "ord:")
	entity, s, ok := strings.Cut(id, "-")
	seq, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Fatalf("key %q is no ord:eNNNN-SS", key)
	}
	return entity, seq
}

func lastIndex(s []string, v string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}
