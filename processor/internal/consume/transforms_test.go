package consume

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// transformsYAML is routesYAML with a transform on billing (HTTP) and on
// ledger (a topic); crm has none.
var transformsYAML = strings.NewReplacer(
	"        priority: critical\n", "        priority: critical\n        transform: billing.js\n        transform_timeout: 50ms\n",
	"        destination: {topic: shop.ledger}\n", "        destination: {topic: shop.ledger}\n        transform: ledger.js\n",
).Replace(routesYAML)

// billingJS misbehaves by the event's id: it loops, throws, returns what
// is not a request, reaches for the clock, or skips; otherwise it sends
// a body and a header of its own.
const billingJS = `function transform(request, context) {
  const id = request.body.id;
  if (id === "loop1") while (true) {}
  if (id === "boom1") throw new Error("no customer on " + id);
  if (id === "str1") return "not a request";
  if (id === "clock1") return {body: {at: Date.now()}};
  if (id === "skip1") return null;
  return {body: {invoice: id, route: context.route}, headers: {"x-team": "billing", "content-type": "application/vnd.billing+json"}};
}`

const ledgerJS = `function transform(request) { return {body: {ledger: request.body.id, type: request.event_type}} }`

// sentCalls records each call's delivery by route/key.
type sentCalls struct {
	mu    sync.Mutex
	calls map[string][]deliver.Delivery
}

func (c *sentCalls) Handle(_ context.Context, d deliver.Delivery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string][]deliver.Delivery{}
	}
	d.Body = append([]byte(nil), d.Body...)
	c.calls[d.Route+"/"+d.Key] = append(c.calls[d.Route+"/"+d.Key], d)
	return nil
}

func (c *sentCalls) of(route, key string) []deliver.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[route+"/"+key]
}

// TestTransforms: a route's transform shapes what its call sends and
// what its topic gets; a script that loops, throws, returns what is not
// a request or reaches for the clock sends that route's record to the DLQ
// as transform_failed, with the script's error and the original bytes,
// while the sibling routes of the same event are called (written) once;
// a skip is done with nothing sent. Every outcome of a route with a
// transform names the script and its hash.
func TestTransforms(t *testing.T) {
	f := newRoutesKafka(t)
	dest := &sentCalls{}
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"shop/billing": dest, "shop/crm": dest},
		procOptions{providersYAML: transformsYAML, files: map[string]string{"billing.js": billingJS, "ledger.js": ledgerJS}})

	keys := []string{"ok1", "loop1", "boom1", "str1", "clock1", "skip1"}
	for _, k := range keys {
		f.produceTyped(t, "shop", k, "invoice.paid")
	}
	waitFor(t, "three outcomes per key", func() bool {
		out := f.outcomes(t)
		for _, k := range keys {
			if len(out[k]) != 3 {
				return false
			}
		}
		return true
	})
	out := f.outcomes(t)
	failed := map[string]string{"loop1": "time limit reached (50ms)", "boom1": "threw: Error: no customer on boom1", "str1": "not a request",
		"clock1": "Date.now: reads the clock"}
	for _, k := range keys {
		for _, o := range out[k] {
			if o.Route == "crm" {
				if o.Status != outcome.StatusDone || o.Transform != "" {
					t.Errorf("%s crm: %+v; want done, no transform", k, o)
				}
				continue
			}
			script := map[string]string{"billing": "billing.js", "ledger": "ledger.js"}[o.Route]
			if o.Transform != script || len(o.TransformSHA256) != 64 {
				t.Errorf("%s %s: transform %q %q; want %s and its hash", k, o.Route, o.Transform, o.TransformSHA256, script)
			}
			want, reason := outcome.StatusDone, ""
			if o.Route == "billing" && failed[k] != "" {
				want, reason = outcome.StatusDead, headers.DeadTransformFailed
				if !strings.Contains(o.Error, failed[k]) || !strings.Contains(o.Error, "billing.js") {
					t.Errorf("%s billing: error %q; want the script's error %q", k, o.Error, failed[k])
				}
			}
			if o.Status != want || o.DeadReason != reason || o.TransformSkipped != (o.Route == "billing" && k == "skip1") {
				t.Errorf("%s %s: %+v; want %s %s", k, o.Route, o, want, reason)
			}
		}
		if n := len(dest.of("crm", k)); n != 1 {
			t.Errorf("%s: crm called %d times, want once", k, n)
		}
		if got := dest.of("crm", k); len(got) == 1 && string(got[0].Body) != `{"id":"`+k+`"}` {
			t.Errorf("%s: crm got %s, want the original bytes", k, got[0].Body)
		}
	}

	// billing: called for ok1 alone, with its script's request.
	for _, k := range keys[1:] {
		if n := len(dest.of("billing", k)); n != 0 {
			t.Errorf("%s: billing called %d times, want none", k, n)
		}
	}
	if got := dest.of("billing", "ok1"); len(got) != 1 || string(got[0].Body) != `{"invoice":"ok1","route":"billing"}` ||
		got[0].ContentType != "application/vnd.billing+json" || len(got[0].Headers) != 1 || got[0].Headers[0].Key != "x-team" {
		t.Errorf("billing calls of ok1: %+v; want one with the script's body, content type and header", got)
	}

	// The DLQ keeps the original bytes, with the reason and the error.
	dead := map[string]bool{}
	for _, r := range f.readCommitted(t, f.names.DLQ) {
		dead[string(r.Key)] = true
		if string(r.Value) != `{"id":"`+string(r.Key)+`"}` || headers.Value(r, headers.DeadReason) != headers.DeadTransformFailed || headers.Value(r, headers.Route) != "billing" {
			t.Errorf("DLQ %s: value %s, reason %q, route %q", r.Key, r.Value, headers.Value(r, headers.DeadReason), headers.Value(r, headers.Route))
		}
		if es, err := headers.GetErrors(r); err != nil || len(es) != 1 || !strings.Contains(es[0].Error, failed[string(r.Key)]) {
			t.Errorf("DLQ %s: error history %+v, %v", r.Key, es, err)
		}
	}
	if len(dead) != len(failed) {
		t.Errorf("DLQ holds %v, want %d keys", dead, len(failed))
	}

	// The topic route: its script's output, once per key.
	seen := map[string]int{}
	for _, r := range f.readCommitted(t, "shop.ledger") {
		seen[string(r.Key)]++
		if string(r.Value) != `{"ledger":"`+string(r.Key)+`","type":"invoice.paid"}` || headers.Value(r, headers.Route) != "ledger" {
			t.Errorf("ledger %s: %s", r.Key, r.Value)
		}
	}
	for _, k := range keys {
		if seen[k] != 1 {
			t.Errorf("ledger topic holds %v, want each key once", seen)
			break
		}
	}
}
