package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/testkit/e2e"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// place is one route of one provider, as the topics name it.
type place struct{ provider, route string }

// topicCounts is what a plain read of the topics gives, per route.
type topicCounts struct {
	retrying, parked, dead, done map[place]int
	accepted                     map[string]int
}

// routeOf is a record's route: its hookline.route header, default without.
func routeOf(r *kgo.Record) string {
	if v := headers.Value(r, headers.Route); v != "" {
		return v
	}
	return headers.DefaultRoute
}

// readTopics reads what the status report counts, straight from the
// topics with a plain consumer (what kcat -C -o <committed> -e reads): each
// retry tier from the retrier group's committed offset, each lane from the
// processor group's, the whole DLQ less the refs webhooks.dlq-status
// resolves, the whole of webhooks.outcomes (done) and webhooks.raw (origin
// ingest). The system is young, so everything falls in the window.
func readTopics(t *testing.T, sys *e2e.System) topicCounts {
	t.Helper()
	cl := kafkatest.Client(t, sys.Brokers)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lanePrefix := sys.Names.Prefix + topics.BaseLanePrefix
	retryPrefix := sys.Names.Prefix + topics.BaseRetryPrefix
	from := func(group string, ts ...string) map[string]map[int32]kgo.Offset {
		out := map[string]map[int32]kgo.Offset{}
		offs, err := adm.FetchOffsetsForTopics(ctx, sys.Names.Group(group), ts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range ts {
			out[tp] = map[int32]kgo.Offset{}
			for _, p := range td[tp].Partitions.Numbers() {
				out[tp][p] = kgo.NewOffset().AtStart()
				if o, ok := offs.Lookup(tp, p); ok && o.Err == nil && o.At >= 0 {
					out[tp][p] = kgo.NewOffset().At(o.At)
				}
			}
		}
		return out
	}
	whole := func(ts ...string) map[string]map[int32]kgo.Offset {
		out := map[string]map[int32]kgo.Offset{}
		for _, tp := range ts {
			out[tp] = map[int32]kgo.Offset{}
			for _, p := range td[tp].Partitions.Numbers() {
				out[tp][p] = kgo.NewOffset().AtStart()
			}
		}
		return out
	}
	var tiers, lanes []string
	for name := range td {
		switch {
		case strings.HasPrefix(name, retryPrefix):
			tiers = append(tiers, name)
		case strings.HasPrefix(name, lanePrefix):
			lanes = append(lanes, name)
		}
	}
	c := topicCounts{retrying: map[place]int{}, parked: map[place]int{}, dead: map[place]int{}, done: map[place]int{}, accepted: map[string]int{}}
	for _, r := range readFrom(t, sys.Brokers, from(topics.GroupRetrier, tiers...)) {
		c.retrying[place{headers.Value(r, headers.Provider), routeOf(r)}]++
	}
	for _, r := range readFrom(t, sys.Brokers, from(topics.GroupProcessor, lanes...)) {
		// A lane of the route default is webhooks.lane.<provider>.
		c.parked[place{headers.Value(r, headers.Provider), routeOf(r)}]++
	}
	resolved := map[string]bool{}
	for _, r := range readFrom(t, sys.Brokers, whole(sys.Names.DLQStatus)) {
		resolved[string(r.Key)] = true
	}
	for _, r := range readFrom(t, sys.Brokers, whole(sys.Names.DLQ)) {
		if !resolved[fmt.Sprintf("%d:%d", r.Partition, r.Offset)] {
			c.dead[place{headers.Value(r, headers.Provider), routeOf(r)}]++
		}
	}
	for _, r := range readFrom(t, sys.Brokers, whole(sys.Names.Outcomes)) {
		if o, err := outcome.Decode(r.Value); err == nil && o.Status == outcome.StatusDone {
			rt := o.Route
			if rt == "" {
				rt = headers.DefaultRoute
			}
			c.done[place{o.Provider, rt}]++
		}
	}
	for _, r := range readFrom(t, sys.Brokers, whole(sys.Names.Raw)) {
		if o := headers.Value(r, headers.Origin); o == "" || o == headers.OriginIngest {
			c.accepted[headers.Value(r, headers.Provider)]++
		}
	}
	return c
}

// readFrom reads the committed records of each partition from its offset
// to the partition's last stable offset at the start of the read, with a
// deadline that reports how far each partition got.
func readFrom(t *testing.T, brokers []string, from map[string]map[int32]kgo.Offset) []*kgo.Record {
	t.Helper()
	var ts []string
	for tp := range from {
		ts = append(ts, tp)
	}
	if len(ts) == 0 {
		return nil
	}
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	ends, err := adm.ListCommittedOffsets(t.Context(), ts...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if want[o.Topic] == nil {
			want[o.Topic] = map[int32]int64{}
		}
		want[o.Topic][o.Partition] = o.Offset
	})
	cl := kafkatest.Client(t, brokers, kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	got := map[string]map[int32]int64{} // next offset reached
	for tp, ps := range from {
		got[tp] = map[int32]int64{}
		for p, o := range ps {
			got[tp][p] = o.EpochOffset().Offset // -2 for the start: below any end
		}
	}
	done := func() bool {
		for tp, ps := range from {
			for p := range ps {
				if end := want[tp][p]; got[tp][p] < end && end > 0 {
					return false
				}
			}
		}
		return true
	}
	var out []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("reading %v: reached %v, want %v", ts, got, want)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Topic][r.Partition] {
				return
			}
			got[r.Topic][r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err == nil && len(p.Records) == 0 && p.LastStableOffset >= want[p.Topic][p.Partition] {
				got[p.Topic][p.Partition] = max(got[p.Topic][p.Partition], want[p.Topic][p.Partition])
			}
		})
	}
	return out
}

// statusReport runs dlq status --json.
func statusReport(t *testing.T, sys *e2e.System) status.Report {
	t.Helper()
	run := sys.DLQ(nil, "status", "--json").Want(t, 0)
	var rep status.Report
	if err := json.Unmarshal([]byte(run.Stdout), &rep); err != nil {
		t.Fatalf("dlq status --json: %v\n%s", err, run.Stdout)
	}
	return rep
}

// TestStatusMatchesTopics is issue 23's acceptance of `dlq status`: on a
// running system with parked (a paused provider's lane), retrying (a
// destination answering 503, retry tier 1h, no retrier) and dead (400)
// records, and done ones, its counts per route are what a plain read of the
// topics gives; with the processor stopped and a webhook accepted, the lag
// and the oldest unprocessed record are the record at the committed offset.
func TestStatusMatchesTopics(t *testing.T) {
	skipShort(t)
	sys := e2e.New(t, e2e.Options{Tiers: "1h", Partitions: 2})
	sys.EnsureTopics()
	sys.DLQ(asTester, "provider", "pause", "github").Want(t, 0)
	sys.Dest.Behave(func(key string, _ int) int {
		switch {
		case strings.Contains(key, "dead"):
			return 400
		case strings.Contains(key, "retry"):
			return 503
		}
		return 200
	})
	sys.StartIngest()
	proc := sys.StartProcessor("p1", nil)
	outcomes := sys.Read(sys.Names.Outcomes)
	ids := []string{"evt_dead_1", "evt_dead_2", "evt_retry_1", "evt_retry_2", "evt_retry_3", "evt_ok_1", "evt_ok_2"}
	for _, id := range ids {
		if code, err := sys.Post("stripe", e2e.StripeEvent(id)); err != nil || code != 202 {
			t.Fatalf("post %s: %d %v", id, code, err)
		}
	}
	for _, id := range []string{"g1", "g2"} {
		if a, err := sys.Send(e2e.NewEvent("github", id)); err != nil || a.Status != 202 {
			t.Fatalf("send github %s: %+v %v", id, a, err)
		}
	}
	outcomes.Until(90*time.Second, "an outcome for each of 9 webhooks", func(rs []*kgo.Record) bool {
		seen := map[string]bool{}
		for _, r := range rs {
			seen[string(r.Key)] = true
		}
		return len(seen) >= 9
	})

	// The raw backlog: every record processed (committed) before the
	// comparison, so that nothing moves under it.
	waitLag(t, sys, 0)
	rep := statusReport(t, sys)
	got := readTopics(t, sys)
	if sum(got.retrying) == 0 || sum(got.parked) == 0 || sum(got.dead) == 0 || sum(got.done) == 0 {
		t.Fatalf("the system should hold retrying, parked, dead and done records: %+v", got)
	}
	t.Logf("topics: retrying %v, parked %v, dead %v, done %v, accepted %v; dlq status: %s %q, totals %+v",
		got.retrying, got.parked, got.dead, got.done, got.accepted, rep.Verdict, rep.Reasons, rep.Totals.Counts)
	routes := map[place]status.Route{}
	accepted := map[string]int{}
	for _, p := range rep.Providers {
		accepted[p.Provider] = p.Accepted
		for _, r := range p.Routes {
			routes[place{p.Provider, r.Route}] = r
		}
	}
	for _, kind := range []struct {
		name  string
		topic map[place]int
		of    func(status.Route) int
	}{
		{"retrying", got.retrying, func(r status.Route) int { return r.Retrying }},
		{"parked", got.parked, func(r status.Route) int { return r.Parked }},
		{"dlq_unresolved", got.dead, func(r status.Route) int { return r.DLQUnresolved }},
		{"done", got.done, func(r status.Route) int { return r.Done }},
	} {
		places := slices.Collect(maps.Keys(kind.topic))
		for pl, r := range routes {
			if kind.of(r) != 0 && !slices.Contains(places, pl) {
				places = append(places, pl)
			}
		}
		for _, pl := range places {
			if g, w := kind.of(routes[pl]), kind.topic[pl]; g != w {
				t.Errorf("%s/%s %s: dlq status says %d, the topics hold %d", pl.provider, pl.route, kind.name, g, w)
			}
		}
	}
	for p, n := range got.accepted {
		if accepted[p] != n {
			t.Errorf("%s accepted: dlq status says %d, webhooks.raw holds %d", p, accepted[p], n)
		}
	}
	if rep.Totals.Retrying != sum(got.retrying) || rep.Totals.Parked != sum(got.parked) || rep.Totals.DLQUnresolved != sum(got.dead) {
		t.Errorf("totals %+v, topics %+v", rep.Totals, got)
	}
	if rep.Raw.Lag != 0 || rep.Raw.OldestAt != nil {
		t.Errorf("raw backlog with every record committed: %+v", rep.Raw)
	}
	if rep.Verdict != status.Degraded || !slices.ContainsFunc(rep.Reasons, func(r string) bool { return strings.HasPrefix(r, "github/default: paused") }) {
		t.Errorf("verdict %s %q: want degraded, github paused among the reasons", rep.Verdict, rep.Reasons)
	}

	// kcat, where it is installed (.ci/run installs it), reads the same:
	// the tier and the DLQ from their start (no retrier ran, nothing was
	// resolved), the paused provider's lane (never read by the processor).
	for topic, want := range map[string]int{sys.Names.Retry[0]: sum(got.retrying), sys.Names.DLQ: sum(got.dead), sys.Names.Lane("github"): got.parked[place{"github", "default"}]} {
		if n, ok := kcatCount(t, sys.Brokers, topic); ok && n != want {
			t.Errorf("kcat reads %d records in %s, dlq status counts %d", n, topic, want)
		}
	}

	// Stop the processor and accept one more: the lag and the oldest
	// unprocessed record are the record at the committed offset.
	proc.Stop(t)
	if code, err := sys.Post("stripe", e2e.StripeEvent("evt_late")); err != nil || code != 202 {
		t.Fatalf("post evt_late: %d %v", code, err)
	}
	waitLag(t, sys, 1)
	rep = statusReport(t, sys)
	p, at := oldestUnprocessed(t, sys)
	if rep.Raw.Lag != 1 || rep.Raw.OldestAt == nil || !rep.Raw.OldestAt.Equal(at) || len(rep.Raw.Partitions) != 1 || rep.Raw.Partitions[0].Partition != p {
		t.Errorf("raw backlog %+v, want lag 1 at partition %d, oldest %s", rep.Raw, p, at)
	}
}

func sum(m map[place]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// lagOf is the processor group's lag on webhooks.raw, from kadm.
func lagOf(t *testing.T, sys *e2e.System) (int64, map[int32]int64) {
	t.Helper()
	adm := kadm.NewClient(kafkatest.Client(t, sys.Brokers))
	ends, err := adm.ListCommittedOffsets(t.Context(), sys.Names.Raw)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsetsForTopics(t.Context(), sys.Names.Group(topics.GroupProcessor), sys.Names.Raw)
	if err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c := int64(0)
		if r, ok := offs.Lookup(o.Topic, o.Partition); ok && r.At >= 0 {
			c = r.At
		}
		committed[o.Partition] = c
		lag += o.Offset - c
	})
	return lag, committed
}

// waitLag waits until the processor group's lag on webhooks.raw is want.
func waitLag(t *testing.T, sys *e2e.System, want int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag, committed := lagOf(t, sys)
		if lag == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag of %s on %s: %d (committed %v), want %d", sys.Names.Group(topics.GroupProcessor), sys.Names.Raw, lag, committed, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// oldestUnprocessed reads the record at the committed offset of the one
// partition with lag.
func oldestUnprocessed(t *testing.T, sys *e2e.System) (int32, time.Time) {
	t.Helper()
	_, committed := lagOf(t, sys)
	adm := kadm.NewClient(kafkatest.Client(t, sys.Brokers))
	ends, err := adm.ListCommittedOffsets(t.Context(), sys.Names.Raw)
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]map[int32]kgo.Offset{}
	var part int32 = -1
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > committed[o.Partition] {
			part = o.Partition
			from[o.Topic] = map[int32]kgo.Offset{o.Partition: kgo.NewOffset().At(committed[o.Partition])}
		}
	})
	recs := readFrom(t, sys.Brokers, from)
	if part < 0 || len(recs) == 0 {
		t.Fatalf("no unprocessed record: committed %v", committed)
	}
	return part, recs[0].Timestamp.UTC()
}

// kcatCount counts the committed records of topic with kcat -C -e; ok is
// false when kcat is not on PATH outside CI (in CI it fails the test).
func kcatCount(t *testing.T, brokers []string, topic string) (int, bool) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kcat is not installed (.ci/run installs it): %v", err)
		}
		t.Logf("kcat not on PATH: the kgo read alone checks %s", topic)
		return 0, false
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-b", strings.Join(brokers, ","), "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", "%p:%o\\n").Output()
	if err != nil {
		t.Fatalf("kcat -C -t %s: %v", topic, err)
	}
	return strings.Count(string(out), "\n"), true
}
