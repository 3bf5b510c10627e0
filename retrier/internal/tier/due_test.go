package tier

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

func rec(offset int64, due string) *kgo.Record {
	r := &kgo.Record{Topic: "webhooks.retry.1m", Key: []byte("k"), Value: []byte("v"), Offset: offset,
		Timestamp: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	if due != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers.DueAt, Value: []byte(due)})
	}
	return r
}

func TestDueAt(t *testing.T) {
	ts := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		r       *kgo.Record
		want    time.Time
		wantErr bool
	}{
		{"header", rec(0, "2030-01-01T00:01:00.123Z"), ts.Add(time.Minute + 123*time.Millisecond), false},
		{"header with offset zone", rec(0, "2030-01-01T01:01:00+01:00"), ts.Add(time.Minute), false},
		{"missing: timestamp plus delay", rec(0, ""), ts.Add(time.Minute), true},
		{"garbage: timestamp plus delay", rec(0, "soon"), ts.Add(time.Minute), true},
		{"missing, no timestamp: at once", &kgo.Record{}, time.Time{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dueAt(tc.r, time.Minute)
			if !got.Equal(tc.want) || (err != nil) != tc.wantErr {
				t.Fatalf("dueAt = %s, %v; want %s, error %t", got, err, tc.want, tc.wantErr)
			}
			if tc.wantErr && tc.r.Headers == nil && !errors.Is(err, headers.ErrMissing) {
				t.Fatalf("err %v, want ErrMissing", err)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)
	at := func(d time.Duration) string { return headers.FormatTime(now.Add(d)) }
	cases := []struct {
		name  string
		dues  []string
		wantN int
		hold  time.Duration // from now; ignored when all are due
		bad   int
	}{
		{"empty", nil, 0, 0, 0},
		{"all due", []string{at(-time.Second), at(0)}, 2, 0, 0},
		{"due exactly now is due", []string{at(0)}, 1, 0, 0},
		{"one millisecond ahead is not", []string{at(time.Millisecond)}, 0, time.Millisecond, 0},
		{"stops at the first not due", []string{at(-2 * time.Second), at(5 * time.Second), at(-time.Second)}, 1, 5 * time.Second, 0},
		{"bad due-at uses timestamp plus delay", []string{"", at(0)}, 2, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recs []*kgo.Record
			for i, d := range tc.dues {
				recs = append(recs, rec(int64(i), d))
			}
			bad := 0
			s := plan(recs, time.Minute, now, func(*kgo.Record, time.Time, error) { bad++ })
			if s.n != tc.wantN || len(s.dues) != tc.wantN || bad != tc.bad {
				t.Fatalf("n=%d dues=%d bad=%d; want n=%d bad=%d", s.n, len(s.dues), bad, tc.wantN, tc.bad)
			}
			if tc.wantN < len(tc.dues) && !s.hold.Equal(now.Add(tc.hold)) {
				t.Fatalf("hold %s, want %s", s.hold, now.Add(tc.hold))
			}
			for _, d := range s.dues {
				if d.After(now) {
					t.Fatalf("a record due at %s was planned to move at %s", d, now)
				}
			}
		})
	}
}

func TestOutgoingKeepsEverything(t *testing.T) {
	r := &kgo.Record{Topic: "webhooks.retry.1m", Partition: 3, Offset: 9, Key: []byte("stripe:evt_1"), Value: []byte(`{"id":"evt_1"}`),
		Headers: []kgo.RecordHeader{
			{Key: headers.Provider, Value: []byte("stripe")},
			{Key: headers.Origin, Value: []byte(headers.OriginIngest)},
			{Key: headers.Attempt, Value: []byte("3")},
			{Key: headers.DueAt, Value: []byte("2030-01-01T00:01:00.000Z")},
			{Key: headers.Errors, Value: []byte(`[{"attempt":1}]`)},
			{Key: headers.HTTPName("Stripe-Signature"), Value: []byte("t=1,v1=ab")},
		}}
	out := outgoing(r, "webhooks.raw", 1<<20)
	if out.Topic != "webhooks.raw" || string(out.Key) != string(r.Key) || string(out.Value) != string(r.Value) {
		t.Fatalf("out %s key %q value %q", out.Topic, out.Key, out.Value)
	}
	if headers.Value(out, headers.Origin) != headers.OriginRetry || len(out.Headers) != len(r.Headers) {
		t.Fatalf("headers %v", out.Headers)
	}
	for _, h := range r.Headers {
		if h.Key == headers.Origin {
			continue
		}
		if v, ok := headers.Get(out, h.Key); !ok || v != string(h.Value) {
			t.Fatalf("header %s = %q, want %q", h.Key, v, h.Value)
		}
	}
	if headers.Value(r, headers.Origin) != headers.OriginIngest {
		t.Fatal("outgoing changed the polled record's headers")
	}
	if !out.Timestamp.IsZero() {
		t.Fatal("timestamp must be left to the producer (the move time)")
	}
}
