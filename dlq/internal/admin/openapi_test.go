package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/backfill"
	"github.com/hookline/hookline/dlq/internal/parked"
	"github.com/hookline/hookline/dlq/internal/replay"
	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/obs"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/schemas"
)

// traceKey is the key openAPIServer puts on webhooks.raw and in a retry
// tier: a key with "/", which GET /events/{key} takes as the rest of the
// path.
const traceKey = "github:octo/repo/7"

// traceID is the trace id of the dead letter's outcome.
const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// laneRoute is the route of github whose lane holds traceKey too.
const laneRoute = "ci"

// openAPIServer is the handler as `dlq serve` wires it (store, replayer,
// metrics, provider settings followed from webhooks.control, the providers
// checked against the test providers file, the trace index fed from the
// topics, the parked reader), over a kfake cluster holding one DLQ entry,
// whose ref it returns, and traceKey accepted and waiting in tier 5m. Setting fail makes the next writes
// (BeforeWrite, SetProvider) fail as Kafka would. With down, the cluster is
// closed before the handler is returned: every Kafka request fails; and the
// trace index is closed: every read of it fails.
func openAPIServer(t *testing.T, down bool) (h http.Handler, ref string, fail *bool) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	names := topics.NewNames("", []string{"5m"})
	lane := names.Lane("github") + "." + laneRoute
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, names.Control), kfake.SeedTopics(2, names.Raw, names.DLQ, names.DLQStatus, names.Retry[0], lane, names.Outcomes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	cl := kafkatest.Client(t, addrs)
	newClient := kafkatest.NewClient(addrs)
	r := &kgo.Record{Topic: names.DLQ, Key: []byte("stripe:evt_oa"), Value: []byte(`{"id":"evt_oa"}`)}
	headers.Set(r, headers.Provider, "stripe")
	headers.Set(r, headers.DeadReason, headers.DeadPermanent)
	headers.Set(r, headers.Attempt, "1")
	if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	accepted := &kgo.Record{Topic: names.Raw, Key: []byte(traceKey), Value: []byte(`{"ref":"main"}`), Timestamp: now.Add(-time.Minute)}
	waiting := &kgo.Record{Topic: names.Retry[0], Key: []byte(traceKey), Value: accepted.Value, Timestamp: now}
	for _, r := range []*kgo.Record{accepted, waiting} {
		headers.Set(r, headers.Provider, "github")
		headers.Set(r, headers.EventType, "push")
		headers.Set(r, headers.Origin, headers.OriginIngest)
		headers.SetAttempt(r, 1)
	}
	headers.SetAttempt(waiting, 2)
	headers.SetTime(waiting, headers.DueAt, now.Add(5*time.Minute))
	headers.SetErrors(waiting, []headers.ErrorEntry{{Attempt: 1, At: now, Error: "destination: HTTP 503", Retryable: true}})
	// The same key parked in the lane of github's route ci.
	laned := &kgo.Record{Topic: lane, Key: []byte(traceKey), Value: accepted.Value, Timestamp: now}
	headers.Set(laned, headers.Provider, "github")
	headers.Set(laned, headers.Route, laneRoute)
	headers.SetAttempt(laned, 1)
	// Two invoices of stripe accepted half an hour ago, for a backfill of
	// its route billing.
	var invoices []*kgo.Record
	for _, id := range []string{"in_1", "in_2"} {
		r := &kgo.Record{Topic: names.Raw, Key: []byte("stripe:" + id), Value: []byte(`{"id":"` + id + `"}`), Timestamp: now.Add(-30 * time.Minute)} // before GET /status's window
		headers.Set(r, headers.Provider, "stripe")
		headers.Set(r, headers.EventType, "invoice.paid")
		headers.Set(r, headers.Origin, headers.OriginIngest)
		headers.SetAttempt(r, 1)
		invoices = append(invoices, r)
	}
	// The dead letter's outcome, traced, before GET /status's window: a
	// row of GET /events.
	out := &kgo.Record{Topic: names.Outcomes, Key: []byte("stripe:evt_oa"), Timestamp: now.Add(-10 * time.Minute),
		Value: []byte(`{"key":"stripe:evt_oa","provider":"stripe","event_type":"invoice.paid","status":"dead","attempt":1,"origin":"ingest","duration_ms":12,` +
			`"error":"HTTP 400","time":"` + headers.FormatTime(now.Add(-10*time.Minute)) + `","dead_reason":"permanent","route":"default","trace_id":"` + traceID + `","partition":0,"offset":0}`)}
	invoices = append(invoices, out)
	if err := cl.ProduceSync(t.Context(), append([]*kgo.Record{accepted, waiting, laned}, invoices...)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ix, err := trace.Open(trace.Options{InMemory: true, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	adm := kadm.NewClient(cl)
	if err := trace.NewFeeder(ix, newClient, adm, slog.New(slog.NewTextHandler(io.Discard, nil))).CatchUp(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The retrier's group has committed (kfake, unlike a broker, refuses
	// an offset fetch of a group that never did): offset 0, before the
	// waiting record.
	var offs kadm.Offsets
	offs.AddOffset(names.Retry[0], waiting.Partition, 0, -1)
	if _, err := adm.CommitOffsets(t.Context(), names.Group(topics.GroupRetrier), offs); err != nil {
		t.Fatal(err)
	}
	var laneOffs kadm.Offsets
	laneOffs.AddOffset(lane, laned.Partition, 0, -1)
	if _, err := adm.CommitOffsets(t.Context(), names.Group(topics.GroupProcessor), laneOffs); err != nil {
		t.Fatal(err)
	}
	pr := &parked.Reader{Names: names, NewClient: newClient, Adm: adm, Stall: 2 * time.Second}
	known, err := settings.LoadKnown(testProviders)
	if err != nil {
		t.Fatal(err)
	}
	reg := obs.NewRegistry()
	live := settings.NewLive(known, reg)
	fail = new(bool)
	kafkaDown := errors.New("webhooks.dlq-status: broker down")
	if !down {
		go func() {
			_ = control.Follow(t.Context(), newClient, names.Control, live.Apply, live.CaughtUp, func(error) {})
		}()
	} else {
		c.Close()
		_ = ix.Close()
	}
	st := store.New(store.Config{Names: names, Client: cl, NewClient: newClient})
	file, err := providers.LoadWithoutSecrets(testProviders)
	if err != nil {
		t.Fatal(err)
	}
	prod := kafkatest.Client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	jobs := backfill.NewJobs(&backfill.Runner{Reader: pr, Producer: prod})
	t.Cleanup(jobs.Stop)
	h = New(Config{
		Store: st, Replayer: replay.New(cl), Token: token, Metrics: obs.Metrics(reg), Settings: live, Hosts: []string{"example.com"},
		BeforeWrite: func(context.Context) error {
			if *fail {
				return kafkaDown
			}
			return nil
		},
		SetProvider: func(ctx context.Context, s control.Setting) error {
			if *fail {
				return kafkaDown
			}
			return control.Write(ctx, cl, names.Control, s)
		},
		Trace:     ix.Trace,
		Events:    ix.List,
		Parked:    pr.Read,
		Backfills: jobs,
		Providers: file,
		Status: func(ctx context.Context) (status.Report, error) {
			return status.Collect(ctx, status.Sources{Reader: pr, Store: st, Known: known,
				Control: func(context.Context) (map[string]control.Setting, control.Reports, error) {
					got, _ := live.Settings()
					rs := control.NewReports()
					rs.Held.Apply(heldReport(time.Now()))
					return got, rs, nil
				}}, 5*time.Minute)
		},
	}).Handler()
	return h, store.Ref{Partition: r.Partition, Offset: r.Offset}.String(), fail
}

// heldReport is a processor's report of one entity held on github's
// route default, for 10 minutes, two records behind its head in tier 5m.
func heldReport(now time.Time) control.HeldReport {
	return control.HeldReport{Partition: 0, Instance: "p1", At: now, Routes: []control.HeldRoute{{
		Provider: "github", Route: "default", Entities: 1, Waiting: 2,
		Oldest: []control.HeldEntity{{Entity: "octo/repo", Head: traceKey, Since: now.Add(-10 * time.Minute), Waiting: 2, Tier: "5m"}},
	}}}
}

// TestOpenAPI drives the handlers through every answer that
// schemas/dlq.openapi.yaml lists and checks each against the document: its
// status is listed for the route (or under x-unrouted), its required
// headers (WWW-Authenticate, Location) are there, its Content-Type is
// listed and its JSON body validates. Each listed answer must be produced
// at least once.
func TestOpenAPI(t *testing.T) {
	doc, err := schemas.LoadAPI(schemas.DLQAPI)
	if err != nil {
		t.Fatal(err)
	}
	cov := doc.NewCoverage()
	up, ref, fail := openAPIServer(t, false)
	down, _, _ := openAPIServer(t, true)
	auth := "Bearer " + token
	type call struct {
		name         string
		h            http.Handler
		method, path string
		auth, body   string
		host         string // the Host header; "" is httptest's example.com
		status       int
		before       func() // runs before the request
	}
	failing := func() { *fail = true }
	calls := []call{
		{name: "root", h: up, method: "GET", path: "/", status: 302},
		{name: "page", h: up, method: "GET", path: "/ui/", status: 200},
		{name: "script", h: up, method: "GET", path: "/ui/app.js", status: 200},
		{name: "style", h: up, method: "GET", path: "/ui/style.css", status: 200},
		{name: "metrics", h: up, method: "GET", path: "/metrics", status: 200},
		{name: "list", h: up, method: "GET", path: "/dlq?provider=stripe&limit=10", auth: auth, status: 200},
		{name: "list bad reason", h: up, method: "GET", path: "/dlq?reason=tired", auth: auth, status: 400},
		{name: "list bad limit", h: up, method: "GET", path: "/dlq?limit=0", auth: auth, status: 400},
		{name: "list empty limit and offset", h: up, method: "GET", path: "/dlq?limit=&offset=", auth: auth, status: 200},
		{name: "list signed limit", h: up, method: "GET", path: "/dlq?limit=%2B5", auth: auth, status: 400},
		{name: "list offset with a leading zero", h: up, method: "GET", path: "/dlq?offset=01", auth: auth, status: 400},
		{name: "list no token", h: up, method: "GET", path: "/dlq", status: 401},
		{name: "list kafka down", h: down, method: "GET", path: "/dlq", auth: auth, status: 502},
		{name: "stats", h: up, method: "GET", path: "/dlq/stats", auth: auth, status: 200},
		{name: "stats of a route", h: up, method: "GET", path: "/dlq/stats?provider=stripe&route=default", auth: auth, status: 200},
		{name: "stats bad route", h: up, method: "GET", path: "/dlq/stats?route=Bill.ing", auth: auth, status: 400},
		{name: "list of a route", h: up, method: "GET", path: "/dlq?route=default&provider=stripe", auth: auth, status: 200},
		{name: "list bad route", h: up, method: "GET", path: "/dlq?route=a%2Fb", auth: auth, status: 400},
		{name: "replay of a route", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{"provider":"stripe","route":"billing","dry_run":true}`, status: 200},
		{name: "replay bad route", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{"all":true,"route":"B","dry_run":true}`, status: 400},
		{name: "stats wrong token", h: up, method: "GET", path: "/dlq/stats", auth: "Bearer nope", status: 401},
		{name: "stats kafka down", h: down, method: "GET", path: "/dlq/stats", auth: auth, status: 502},
		{name: "show", h: up, method: "GET", path: "/dlq/" + ref, auth: auth, status: 200},
		{name: "show bad ref", h: up, method: "GET", path: "/dlq/x:1", auth: auth, status: 400},
		{name: "show no token", h: up, method: "GET", path: "/dlq/" + ref, status: 401},
		{name: "show missing", h: up, method: "GET", path: "/dlq/0:999", auth: auth, status: 404},
		{name: "show kafka down", h: down, method: "GET", path: "/dlq/0:0", auth: auth, status: 502},
		{name: "replay dry run", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{"refs":["` + ref + `"],"dry_run":true}`, status: 200},
		{name: "replay", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{"provider":"stripe","by":"openapi"}`, status: 200},
		{name: "replay missing ref", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{"refs":["1:999"],"by":"m"}`, status: 404},
		{name: "replay without by", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{"refs":["` + ref + `"]}`, status: 400},
		{name: "replay not JSON", h: up, method: "POST", path: "/dlq/replay", auth: auth, body: `{`, status: 400},
		{name: "replay no token", h: up, method: "POST", path: "/dlq/replay", body: `{"all":true,"by":"m"}`, status: 401},
		{name: "replay kafka down", h: down, method: "POST", path: "/dlq/replay", auth: auth, body: `{"all":true,"by":"m"}`, status: 502},
		{name: "resolve", h: up, method: "POST", path: "/dlq/" + ref + "/resolve", auth: auth, body: `{"resolution":"manual_fix","note":"fixed by hand","by":"openapi"}`, status: 200},
		{name: "resolve as replayed", h: up, method: "POST", path: "/dlq/" + ref + "/resolve", auth: auth, body: `{"resolution":"replayed","note":"x","by":"m"}`, status: 400},
		{name: "resolve no token", h: up, method: "POST", path: "/dlq/" + ref + "/resolve", body: `{}`, status: 401},
		{name: "resolve missing", h: up, method: "POST", path: "/dlq/1:999/resolve", auth: auth, body: `{"resolution":"ignored","note":"x","by":"m"}`, status: 404},
		{name: "resolve write fails", h: up, method: "POST", path: "/dlq/" + ref + "/resolve", auth: auth, body: `{"resolution":"ignored","note":"x","by":"m"}`, status: 502, before: failing},
		{name: "providers", h: up, method: "GET", path: "/providers", auth: auth, status: 200},
		{name: "providers no token", h: up, method: "GET", path: "/providers", status: 401},
		{name: "routes", h: up, method: "GET", path: "/routes", auth: auth, status: 200},
		{name: "routes no token", h: up, method: "GET", path: "/routes", status: 401},
		{name: "trace", h: up, method: "GET", path: "/events/" + traceKey, auth: auth, status: 200},
		{name: "trace with %2F", h: up, method: "GET", path: "/events/" + strings.ReplaceAll(traceKey, "/", "%2F"), auth: auth, status: 200},
		{name: "trace of a dead letter", h: up, method: "GET", path: "/events/stripe:evt_oa", auth: auth, status: 200},
		{name: "trace empty key", h: up, method: "GET", path: "/events/", auth: auth, status: 400},
		{name: "trace no token", h: up, method: "GET", path: "/events/" + traceKey, status: 401},
		{name: "trace unknown key", h: up, method: "GET", path: "/events/stripe:evt_nope", auth: auth, status: 404},
		{name: "trace index closed", h: down, method: "GET", path: "/events/" + traceKey, auth: auth, status: 500},
		{name: "events", h: up, method: "GET", path: "/events", auth: auth, status: 200},
		{name: "events filtered", h: up, method: "GET", path: "/events?provider=stripe&route=default&event_type=invoice.paid&status=dead&since=1h&until=2099-01-01&limit=1", auth: auth, status: 200},
		{name: "events none", h: up, method: "GET", path: "/events?status=done&limit=&cursor=", auth: auth, status: 200},
		{name: "events next page", h: up, method: "GET", path: "/events?cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAA", auth: auth, status: 200},
		{name: "events bad status", h: up, method: "GET", path: "/events?status=ok", auth: auth, status: 400},
		{name: "events bad route", h: up, method: "GET", path: "/events?route=Ci.2", auth: auth, status: 400},
		{name: "events bad since", h: up, method: "GET", path: "/events?since=yesterday", auth: auth, status: 400},
		{name: "events bad until", h: up, method: "GET", path: "/events?until=-1h", auth: auth, status: 400},
		{name: "events bad limit", h: up, method: "GET", path: "/events?limit=501", auth: auth, status: 400},
		{name: "events bad cursor", h: up, method: "GET", path: "/events?cursor=nope", auth: auth, status: 400},
		{name: "events no token", h: up, method: "GET", path: "/events", status: 401},
		{name: "events index closed", h: down, method: "GET", path: "/events", auth: auth, status: 500},
		{name: "parked", h: up, method: "GET", path: "/parked", auth: auth, status: 200},
		{name: "parked filtered", h: up, method: "GET", path: "/parked?tier=5m&provider=github&limit=1&offset=0", auth: auth, status: 200},
		{name: "parked of a route", h: up, method: "GET", path: "/parked?provider=github&route=" + laneRoute, auth: auth, status: 200},
		{name: "parked bad route", h: up, method: "GET", path: "/parked?route=Ci.2", auth: auth, status: 400},
		{name: "parked none", h: up, method: "GET", path: "/parked?tier=lane", auth: auth, status: 200},
		{name: "parked bad limit", h: up, method: "GET", path: "/parked?limit=1001", auth: auth, status: 400},
		{name: "parked bad offset", h: up, method: "GET", path: "/parked?offset=-1", auth: auth, status: 400},
		{name: "parked empty limit and offset", h: up, method: "GET", path: "/parked?limit=&offset=", auth: auth, status: 200},
		{name: "parked limit with a leading zero", h: up, method: "GET", path: "/parked?limit=007", auth: auth, status: 400},
		{name: "parked offset 0", h: up, method: "GET", path: "/parked?offset=0&limit=0", auth: auth, status: 200},
		{name: "parked no token", h: up, method: "GET", path: "/parked", auth: "Bearer nope", status: 401},
		{name: "parked kafka down", h: down, method: "GET", path: "/parked", auth: auth, status: 502},
		{name: "status", h: up, method: "GET", path: "/status", auth: auth, status: 200},
		{name: "status no token", h: up, method: "GET", path: "/status", status: 401},
		{name: "status kafka down", h: down, method: "GET", path: "/status", auth: auth, status: 502},
		{name: "backfill dry run", h: up, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"crm","since":"1h","dry_run":true}`, status: 200},
		// At 0.01 a second the second invoice waits 100 s: the job runs
		// through the calls below, and a second backfill of the route is
		// refused.
		{name: "backfill", h: up, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"billing","since":"1h","id":"oa-1","rate":0.01,"by":"openapi"}`, status: 202},
		{name: "backfill of a running route", h: up, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"billing","since":"2h","by":"m"}`, status: 409},
		{name: "backfill job", h: up, method: "GET", path: "/backfills/oa-1", auth: auth, status: 200},
		{name: "backfill jobs", h: up, method: "GET", path: "/backfills", auth: auth, status: 200},
		{name: "backfill unknown job", h: up, method: "GET", path: "/backfills/nope", auth: auth, status: 404},
		{name: "backfill job no token", h: up, method: "GET", path: "/backfills/oa-1", status: 401},
		{name: "backfill jobs no token", h: up, method: "GET", path: "/backfills", status: 401},
		{name: "backfill no token", h: up, method: "POST", path: "/backfills", body: `{}`, status: 401},
		{name: "backfill without since", h: up, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"crm","by":"m"}`, status: 400},
		{name: "backfill unknown route", h: up, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"nope","since":"1h","by":"m"}`, status: 400},
		{name: "backfill without by", h: up, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"crm","since":"1h"}`, status: 400},
		{name: "backfill dry run kafka down", h: down, method: "POST", path: "/backfills", auth: auth, body: `{"provider":"stripe","route":"crm","since":"1h","dry_run":true}`, status: 502},
		{name: "rules test", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"provider":"stripe","body":"{\"id\":\"evt_1\",\"type\":\"invoice.paid\"}"}`, status: 200},
		{name: "rules test with event type", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"provider":"stripe","body_base64":"e30=","event_type":"customer.created","headers":{"X-A":"1"}}`, status: 200},
		{name: "rules test from the DLQ", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"from_dlq":"` + ref + `"}`, status: 200},
		{name: "rules test no input", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"provider":"stripe"}`, status: 400},
		{name: "rules test no event", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"provider":"stripe","body":"{}"}`, status: 400},
		{name: "rules test unknown provider", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"provider":"nope","body":"{}"}`, status: 404},
		{name: "rules test missing raw record", h: up, method: "POST", path: "/rules/test", auth: auth, body: `{"from_raw":"0:999"}`, status: 404},
		{name: "rules test no token", h: up, method: "POST", path: "/rules/test", body: `{}`, status: 401},
		{name: "rules test kafka down", h: down, method: "POST", path: "/rules/test", auth: auth, body: `{"from_dlq":"0:0"}`, status: 502},
		{name: "unrouted no token", h: up, method: "DELETE", path: "/dlq", status: 401},
		{name: "unrouted", h: up, method: "GET", path: "/nope", auth: auth, status: 404},
		{name: "misdirected host", h: up, method: "GET", path: "/nope", host: "attacker.example", status: 421}, // on listed paths too (TestHostChecked)
		{name: "trailing slash GET", h: up, method: "GET", path: "/dlq/", auth: auth, status: 301},
		{name: "trailing slash POST", h: up, method: "POST", path: "/dlq/replay/", auth: auth, body: `{}`, status: 307},
	}
	for _, verb := range []string{"pause", "resume", "rate"} {
		p := "/routes/stripe/billing/" + verb
		ok := call{name: "route " + verb, h: up, method: "POST", path: p, auth: auth, body: `{"by":"openapi"}`, status: 200}
		if verb == "rate" {
			ok.path += "?rate=2"
		}
		calls = append(calls, ok,
			call{name: "route " + verb + " bad name", h: up, method: "POST", path: "/routes/stripe/Bill.ing/" + verb, auth: auth, status: 400},
			call{name: "route " + verb + " no token", h: up, method: "POST", path: p, status: 401},
			call{name: "route " + verb + " unknown route", h: up, method: "POST", path: "/routes/stripe/default/" + verb, auth: auth, status: 404},
			call{name: "route " + verb + " write fails", h: up, method: "POST", path: p + "?rate=1", auth: auth, status: 502, before: failing},
		)
		if verb != "rate" {
			calls[len(calls)-1].path = p
		}
	}
	for _, verb := range []string{"pause", "resume", "rate"} {
		p := "/providers/stripe/" + verb
		ok := call{name: verb, h: up, method: "POST", path: p, auth: auth, status: 200}
		bad := call{name: verb + " bad rate", h: up, method: "POST", path: p + "?rate=-1", auth: auth, status: 400}
		switch verb {
		case "pause":
			ok.body = `{"by":"openapi"}`
		case "rate":
			ok.body = `{"rate":5,"by":"openapi"}`
			bad.path = p // no rate at all
		}
		calls = append(calls, ok, bad,
			call{name: verb + " no token", h: up, method: "POST", path: p, status: 401},
			call{name: verb + " unknown provider", h: up, method: "POST", path: "/providers/nope/" + verb, auth: auth, status: 404},
			call{name: verb + " write fails", h: up, method: "POST", path: p + "?rate=1", auth: auth, status: 502, before: failing},
		)
		if verb != "rate" {
			calls[len(calls)-1].path = p
		}
	}
	for _, c := range calls {
		*fail = false
		if c.before != nil {
			c.before()
		}
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second) // a closed cluster fails at the deadline at the latest
		req = req.WithContext(ctx)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.host != "" {
			req.Host = c.host
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		method, path := req.Method, req.URL.Path // gin rewrites the path of a redirect
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, req)
		cancel()
		if w.Code != c.status {
			t.Errorf("%s: %s %s answered %d %s, want %d", c.name, method, c.path, w.Code, w.Body, c.status)
			continue
		}
		if err := cov.Check(method, path, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if missing := cov.Missing(); len(missing) > 0 {
		t.Errorf("answers the document lists that no call produced: %v", missing)
	}
	t.Logf("%d answers checked against %s", cov.Seen(), schemas.DLQAPI)

	// The resolve above was written: the entry shows it.
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/dlq/"+ref, nil)
	req.Header.Set("Authorization", auth)
	up.ServeHTTP(w, req)
	var d struct {
		Resolution *struct{ Resolution string } `json:"resolution"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil || d.Resolution == nil || d.Resolution.Resolution != store.ManualFix {
		t.Errorf("GET /dlq/%s after the resolve: %d %s", ref, w.Code, w.Body)
	}
}

// TestOpenAPITraceAndParked: the answers TestOpenAPI checks against the
// document carry the key it put in tier 5m: the trace shows it accepted
// then waiting (pending still: no outcome says where it stands), /parked
// lists it.
func TestOpenAPITraceAndParked(t *testing.T) {
	h, _, _ := openAPIServer(t, false)
	get := func(path string, v any) {
		t.Helper()
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(w, req)
		if err := json.Unmarshal(w.Body.Bytes(), v); err != nil || w.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
	var tr struct {
		Key    string
		Now    struct{ State, Route string }
		Routes []struct {
			Route string
			Now   struct{ State string }
		}
		Steps []struct{ Kind, Route string }
	}
	get("/events/"+traceKey, &tr)
	if tr.Key != traceKey || tr.Now.State != "pending" || len(tr.Steps) != 2 || tr.Steps[0].Kind != "accepted" || tr.Steps[1].Kind != "waiting" {
		t.Errorf("trace of %s: %+v", traceKey, tr)
	}
	// The waiting record names no route: the route default's, per route
	// status pending (no outcome yet); the accepted delivery is the key's.
	if len(tr.Routes) != 1 || tr.Routes[0].Route != "default" || tr.Routes[0].Now.State != "pending" || tr.Now.Route != "default" ||
		tr.Steps[0].Route != "" || tr.Steps[1].Route != "default" {
		t.Errorf("routes of the trace of %s: %+v", traceKey, tr)
	}
	type report struct {
		Total  int
		Counts []struct {
			Tier, Provider, Route string
			Records               int
		}
		Records []struct {
			Key, Tier, Route, Topic string
			LastError               string `json:"last_error"`
		}
	}
	var rep report
	get("/parked?provider=github&tier=5m", &rep)
	if rep.Total != 1 || len(rep.Records) != 1 || rep.Records[0].Key != traceKey || rep.Records[0].Tier != "5m" || rep.Records[0].LastError != "destination: HTTP 503" || rep.Records[0].Route != "default" {
		t.Errorf("parked in 5m: %+v", rep)
	}
	// A route's lane, webhooks.lane.<provider>.<route>, is that route's.
	for _, path := range []string{"/parked?route=" + laneRoute, "/parked?provider=github&tier=lane"} {
		rep = report{}
		get(path, &rep)
		if rep.Total != 1 || rep.Records[0].Tier != "lane" || rep.Records[0].Route != laneRoute || rep.Records[0].Topic != "webhooks.lane.github.ci" ||
			len(rep.Counts) != 1 || rep.Counts[0].Provider != "github" || rep.Counts[0].Route != laneRoute {
			t.Errorf("%s: %+v", path, rep)
		}
	}
	rep = report{}
	get("/parked?provider=github", &rep)
	if rep.Total != 2 || len(rep.Counts) != 2 || rep.Counts[0].Tier != "5m" || rep.Counts[1].Tier != "lane" {
		t.Errorf("github's parked records: %+v", rep)
	}
	rep = report{}
	if get("/parked?route=default&tier=lane", &rep); rep.Total != 0 {
		t.Errorf("the route default's lane records: %+v, want none", rep)
	}

	// GET /events lists the dead letter's outcome, with its trace id.
	var page struct {
		Events []struct {
			Key, Provider, Route, Status string
			TraceID                      string `json:"trace_id"`
		}
		NextCursor string `json:"next_cursor"`
	}
	get("/events?provider=stripe&status=dead", &page)
	if len(page.Events) != 1 || page.Events[0].Key != "stripe:evt_oa" || page.Events[0].Route != "default" || page.Events[0].TraceID != traceID || page.NextCursor != "" {
		t.Errorf("GET /events: %+v", page)
	}

	// GET /status counts the same records per route: github's key
	// retrying in 5m (route default, scheduled) and parked in ci's lane
	// (due now), stripe's dead letter, the accepted record in the window.
	var st status.Report
	get("/status", &st)
	if st.Totals.Retrying != 1 || st.Totals.Parked != 1 || st.Totals.DLQUnresolved != 1 || st.Totals.Accepted != 1 || st.Verdict != status.Degraded {
		t.Errorf("status totals: %+v, verdict %s %q", st.Totals, st.Verdict, st.Reasons)
	}
	routes := map[string]status.Route{}
	for _, p := range st.Providers {
		for _, r := range p.Routes {
			routes[p.Provider+"/"+r.Route] = r
		}
	}
	if r := routes["github/default"]; r.Retrying != 1 || len(r.ByTier) != 1 || r.ByTier[0].Scheduled != 1 ||
		r.Held.Entities != 1 || r.Held.Waiting != 2 || len(r.Held.Oldest) != 1 || r.Held.Oldest[0].Head != traceKey {
		t.Errorf("github/default: %+v", r)
	}
	if r := routes["github/"+laneRoute]; r.Parked != 1 || len(r.ByTier) != 1 || r.ByTier[0].DueNow != 1 {
		t.Errorf("github/%s: %+v", laneRoute, r)
	}
	if r := routes["stripe/default"]; r.DLQUnresolved != 1 || r.DLQOldestUnresolved == nil {
		t.Errorf("stripe/default: %+v", r)
	}
}
