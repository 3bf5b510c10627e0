package trace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/topics"
)

// listOutcome is an outcome record at partition 0, offset off.
func listOutcome(names topics.Names, key, provider, route, event, status string, at time.Time, off int64, extra string) *kgo.Record {
	return &kgo.Record{Topic: names.Outcomes, Key: []byte(key), Timestamp: at, Offset: off,
		Value: fmt.Appendf(nil, `{"key":%q,"provider":%q,"event_type":%q,"status":%q,"attempt":1,"origin":"ingest","duration_ms":1,"time":%q,"route":%q,"partition":0,"offset":%d%s}`,
			key, provider, event, status, headers.FormatTime(at), route, off, extra)}
}

// keysOf lists a page's keys with their status.
func keysOf(p ListPage) []string {
	var out []string
	for _, d := range p.Events {
		out = append(out, d.Key+"/"+d.Status)
	}
	return out
}

// TestList: rows are outcomes newest first; each filter and their
// combinations select exactly the rows a scan would, pages follow each
// other by cursor without gap or repeat, Since and Until bound the time,
// a bad cursor is ErrBadCursor, raw records make no row, and a trace id
// on the outcome is kept.
func TestList(t *testing.T) {
	names := topics.NewNames("l.", []string{"1m"})
	ix := mustIndex(t, names)
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	type row struct{ key, provider, route, event, status string }
	rows := []row{
		{"stripe:a", "stripe", "billing", "invoice.paid", "done"},
		{"stripe:b", "stripe", "crm", "invoice.paid", "dead"},
		{"github:c", "github", "default", "push", "retrying"},
		{"stripe:d", "stripe", "billing", "charge.failed", "retrying"},
		{"github:e", "github", "default", "push", "done"},
		{"stripe:f", "stripe", "", "invoice.paid", "duplicate"},
		{"github:g", "github", "default", strings.Repeat("x", 200), "dead"},
	}
	var recs []*kgo.Record
	for i, r := range rows {
		extra := ""
		if i == 2 {
			extra = `,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`
		}
		recs = append(recs, listOutcome(names, r.key, r.provider, r.route, r.event, r.status, t0.Add(time.Duration(i)*time.Second), int64(i), extra))
	}
	raw := headers.IngestRecord(names.Raw, "stripe:a", "invoice.paid", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: t0})
	raw.Timestamp = t0
	if err := ix.Apply(append(recs, raw), nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := func(f ListFilter) []string { // what a scan of rows, newest first, gives
		var out []string
		for i := len(rows) - 1; i >= 0; i-- {
			r := rows[i]
			at := t0.Add(time.Duration(i) * time.Second)
			if f.matches(Delivery{Provider: r.provider, Route: r.route, EventType: r.event, Status: r.status}) &&
				(f.Since.IsZero() || !at.Before(f.Since)) && (f.Until.IsZero() || !at.After(f.Until)) {
				out = append(out, r.key+"/"+r.status)
			}
		}
		return out
	}
	for _, f := range []ListFilter{
		{},
		{Provider: "stripe"},
		{Route: "default"},
		{EventType: "invoice.paid"},
		{EventType: strings.Repeat("x", 200)},
		{EventType: strings.Repeat("x", 199)},
		{Status: "retrying"},
		{Provider: "stripe", Status: "retrying"},
		{Provider: "stripe", Route: "billing", EventType: "invoice.paid", Status: "done"},
		{Provider: "github", Status: "dead"},
		{Provider: "stripe", Route: "default"},
		{Provider: "nobody"},
		{Since: t0.Add(2 * time.Second), Until: t0.Add(4 * time.Second)},
		{Provider: "stripe", Since: t0.Add(time.Second)},
		{Status: "done", Until: t0.Add(3 * time.Second)},
	} {
		for _, limit := range []int{1, 2, 50} {
			var got []string
			cursor := ""
			for range 20 {
				p, err := ix.List(ctx, f, cursor, limit)
				if err != nil {
					t.Fatalf("%+v: %v", f, err)
				}
				if len(p.Events) > limit {
					t.Fatalf("%+v limit %d: %d rows", f, limit, len(p.Events))
				}
				got = append(got, keysOf(p)...)
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			if w := want(f); !slices.Equal(got, w) {
				t.Errorf("filter %+v, pages of %d: %v, want %v", f, limit, got, w)
			}
		}
	}
	p, err := ix.List(ctx, ListFilter{Status: "retrying", Provider: "github"}, "", 10)
	if err != nil || len(p.Events) != 1 || p.Events[0].TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || p.Events[0].Route != "default" || p.Events[0].Offset != 2 {
		t.Fatalf("the traced outcome's row: %+v %v", p, err)
	}
	for _, c := range []string{"x", "AAAA", strings.Repeat("A", 40)} {
		if _, err := ix.List(ctx, ListFilter{}, c, 10); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", c, err)
		}
	}
}

// TestListMigrates: an index written before the list (outcome entries
// without rows) gets its rows at Open, once; other entries make none.
func TestListMigrates(t *testing.T) {
	names := topics.NewNames("m.", []string{"1m"})
	dir := t.TempDir()
	ix, err := Open(Options{Dir: dir, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Add(-time.Minute)
	raw := headers.IngestRecord(names.Raw, "stripe:old", "x", nil, headers.IngestMeta{Provider: "stripe", ReceivedAt: t0})
	raw.Timestamp = t0.Add(-time.Millisecond)
	if err := ix.Apply([]*kgo.Record{raw, listOutcome(names, "stripe:old", "stripe", "default", "x", "done", t0, 4, "")}, nil); err != nil {
		t.Fatal(err)
	}
	// What an index of the version before held: no rows, no mark.
	if err := ix.idle.Hold(func() error { return ix.db.DropPrefix([]byte{pList}, []byte{pField}, listVersion) }); err != nil {
		t.Fatal(err)
	}
	if p, _ := ix.List(context.Background(), ListFilter{}, "", 10); len(p.Events) != 0 {
		t.Fatalf("rows left after the drop: %v", keysOf(p))
	}
	ix.Close()
	ix, err = Open(Options{Dir: dir, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	p, err := ix.List(context.Background(), ListFilter{}, "", 10)
	if err != nil || fmt.Sprint(keysOf(p)) != "[stripe:old/done]" {
		t.Fatalf("after Open: %v %v, want the old outcome's row", keysOf(p), err)
	}
}

// TestListBudget: a join that reads ListBudget positions without filling
// the page ends early with a cursor that carries on from where it stopped.
func TestListBudget(t *testing.T) {
	names := topics.NewNames("b.", []string{"1m"})
	ix := mustIndex(t, names)
	ix.listBudget = 1000
	t0 := time.Now().UTC().Add(-time.Hour)
	// Provider a's rows and status dead's rows alternate: the join skips
	// one of each per step and never matches.
	n := ix.listBudget + 100
	var recs []*kgo.Record
	for i := range n {
		p, s := "a", "done"
		if i%2 == 1 {
			p, s = "b", "dead"
		}
		recs = append(recs, listOutcome(names, fmt.Sprintf("k%d", i), p, "default", "x", s, t0.Add(time.Duration(i)*time.Millisecond), int64(i), ""))
	}
	recs = append(recs, listOutcome(names, "a:dead", "a", "default", "x", "dead", t0.Add(-time.Second), int64(n), ""))
	if err := ix.Apply(recs, nil); err != nil {
		t.Fatal(err)
	}
	f := ListFilter{Provider: "a", Status: "dead"}
	p, err := ix.List(context.Background(), f, "", 10)
	if err != nil || len(p.Events) != 0 || p.NextCursor == "" || p.Seeks != ix.listBudget {
		t.Fatalf("first page: %d rows, cursor %q, seeks %d, %v; want none, a cursor, %d seeks", len(p.Events), p.NextCursor, p.Seeks, err, ix.listBudget)
	}
	var got []string
	for i := 0; p.NextCursor != "" && i < 10; i++ {
		if p, err = ix.List(context.Background(), f, p.NextCursor, 10); err != nil {
			t.Fatal(err)
		}
		got = append(got, keysOf(p)...)
	}
	if fmt.Sprint(got) != "[a:dead/dead]" || p.NextCursor != "" {
		t.Fatalf("the pages after: %v (cursor %q), want a:dead and the end", got, p.NextCursor)
	}
}
