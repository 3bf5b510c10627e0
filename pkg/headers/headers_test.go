package headers

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSetGet(t *testing.T) {
	r := &kgo.Record{}
	Set(r, Origin, OriginIngest)
	Set(r, Origin, OriginRetry) // replaces
	if v, ok := Get(r, Origin); !ok || v != OriginRetry || len(r.Headers) != 1 {
		t.Fatalf("Get(origin) = %q %t with %d headers", v, ok, len(r.Headers))
	}
	Delete(r, Origin)
	if _, ok := Get(r, Origin); ok {
		t.Fatal("header still there after Delete")
	}
	if _, err := GetAttempt(r); err == nil {
		t.Fatal("GetAttempt on a record without the header did not fail")
	}
	for _, bad := range []string{"0", "-1", "x", ""} {
		Set(r, Attempt, bad)
		if _, err := GetAttempt(r); err == nil {
			t.Errorf("attempt %q accepted", bad)
		}
	}
	SetAttempt(r, 3)
	if n, err := GetAttempt(r); n != 3 || err != nil {
		t.Fatalf("attempt %d %v", n, err)
	}
}

func TestTimeLayout(t *testing.T) {
	at := time.Date(2026, 11, 21, 13, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	r := &kgo.Record{}
	SetTime(r, DueAt, at)
	if v := Value(r, DueAt); v != "2026-11-21T12:04:05.678Z" {
		t.Fatalf("due-at %q, want RFC 3339 UTC with milliseconds", v)
	}
	got, err := GetTime(r, DueAt)
	if err != nil || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("GetTime %v %v", got, err)
	}
}

func TestErrorsHistory(t *testing.T) {
	r := &kgo.Record{}
	if es, err := GetErrors(r); err != nil || es != nil {
		t.Fatalf("absent history: %v %v", es, err)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	SetErrors(r, []ErrorEntry{{Attempt: 1, At: time.Now(), Error: "HTTP 503", Retryable: true}, {Attempt: 2, At: time.Now(), Error: long}})
	es, err := GetErrors(r)
	if err != nil || len(es) != 2 {
		t.Fatalf("history %v %v", es, err)
	}
	if len(es[1].Error) > MaxErrorBytes || !strings.HasPrefix(long, es[1].Error) {
		t.Fatalf("error of %d bytes, want cut to at most %d on a rune boundary", len(es[1].Error), MaxErrorBytes)
	}
	SetErrors(r, []ErrorEntry{{Attempt: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Error: "bad \xff" + strings.Repeat("\xff", 2000)}})
	if v := Value(r, Errors); !strings.Contains(v, `"at":"2026-01-02T03:04:05.000Z"`) {
		t.Fatalf("history %s: want at in the millisecond layout", v)
	}
	es, err = GetErrors(r)
	if err != nil || len(es[0].Error) > MaxErrorBytes || !strings.HasPrefix(es[0].Error, "bad \uFFFD") {
		t.Fatalf("invalid UTF-8 error kept as %d bytes %q...", len(es[0].Error), es[0].Error[:10])
	}
	Set(r, Errors, "{not json")
	if _, err := GetErrors(r); err == nil {
		t.Fatal("garbage history accepted")
	}
}

func TestHTTP(t *testing.T) {
	r := &kgo.Record{}
	Set(r, HTTPName("Stripe-Signature"), "t=1,v1=ab")
	Set(r, Provider, "stripe")
	hs := HTTP(r)
	if len(hs) != 1 || hs[0].Key != "stripe-signature" || string(hs[0].Value) != "t=1,v1=ab" {
		t.Fatalf("HTTP() = %v", hs)
	}
}

func TestSetInvalidPayload(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"schema a.json: at '/id': got number, want string", "schema a.json: at '/id': got number, want string"},
		{"", "invalid"},
		{strings.Repeat("é", MaxInvalidPayloadBytes), strings.Repeat("é", MaxInvalidPayloadBytes/2)}, // cut on a rune boundary
		{"bad \xff byte", "bad \uFFFD byte"},
	} {
		r := &kgo.Record{}
		SetInvalidPayload(r, tc.in)
		if got := Value(r, InvalidPayload); got != tc.want || len(got) > MaxInvalidPayloadBytes {
			t.Errorf("SetInvalidPayload(%.20q): %.40q (%d bytes), want %.40q", tc.in, got, len(got), tc.want)
		}
	}
	for _, r := range []string{DeadPermanent, DeadExhausted, DeadInvalidPayload} {
		if !IsDeadReason(r) {
			t.Errorf("IsDeadReason(%q) false", r)
		}
	}
	if IsDeadReason("") || IsDeadReason("bored") {
		t.Error("IsDeadReason takes what is no reason")
	}
}

func TestTraceID(t *testing.T) {
	for _, tc := range []struct{ traceparent, want string }{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "0af7651916cd43dd8448eb211c80319c"},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "0af7651916cd43dd8448eb211c80319c"},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", ""},
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", ""},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", ""},
		{"", ""},
	} {
		r := &kgo.Record{}
		if tc.traceparent != "" {
			Set(r, Traceparent, tc.traceparent)
		}
		if got := TraceID(r); got != tc.want {
			t.Errorf("TraceID(%q) = %q, want %q", tc.traceparent, got, tc.want)
		}
	}
}

// TestIngestRecordFields: the record IngestRecord builds in one buffer has
// every header of DESIGN §3 in order with its own value, the forwarded ones
// after them (any number of them), and a value appended to does not
// overwrite the next one.
func TestIngestRecordFields(t *testing.T) {
	at := time.Date(2026, 11, 28, 22, 1, 2, 345e6, time.FixedZone("x", 3600))
	for _, n := range []int{0, 1, 4, 9} {
		var fwd []kgo.RecordHeader
		for i := range n {
			fwd = append(fwd, kgo.RecordHeader{Key: fmt.Sprintf("X-H%d", i), Value: []byte(fmt.Sprint(i))})
		}
		r := IngestRecord("raw", "stripe:evt_1", "invoice.paid", []byte("{}"), IngestMeta{
			Provider: "stripe", ReceivedAt: at, RequestID: "req-1", ContentType: "application/json", HTTP: fwd})
		want := []kgo.RecordHeader{
			{Key: Provider, Value: []byte("stripe")}, {Key: EventType, Value: []byte("invoice.paid")},
			{Key: IdempotencyKey, Value: []byte("stripe:evt_1")}, {Key: ReceivedAt, Value: []byte("2026-11-28T21:01:02.345Z")},
			{Key: RequestID, Value: []byte("req-1")}, {Key: ContentType, Value: []byte("application/json")},
			{Key: Origin, Value: []byte(OriginIngest)}, {Key: Attempt, Value: []byte("1")},
		}
		for i := range n {
			want = append(want, kgo.RecordHeader{Key: fmt.Sprintf("http.x-h%d", i), Value: []byte(fmt.Sprint(i))})
		}
		if r.Topic != "raw" || string(r.Key) != "stripe:evt_1" || string(r.Value) != "{}" || !reflect.DeepEqual(r.Headers, want) {
			t.Fatalf("%d forwarded: got %s %q %q %v, want headers %v", n, r.Topic, r.Key, r.Value, r.Headers, want)
		}
		r.Headers[0].Value = append(r.Headers[0].Value, "XXXX"...)
		if got := string(r.Headers[1].Value); got != "invoice.paid" {
			t.Fatalf("%d forwarded: appending to the provider header changed the event type to %q", n, got)
		}
		// The same headers given named for the record: the same record,
		// their values in the one buffer, each capped.
		var named []Forwarded
		for _, h := range fwd {
			named = append(named, Forwarded{Key: HTTPName(h.Key), Value: string(h.Value)})
		}
		r2 := IngestRecord("raw", "stripe:evt_1", "invoice.paid", []byte("{}"), IngestMeta{
			Provider: "stripe", ReceivedAt: at, RequestID: "req-1", ContentType: "application/json", Forwarded: named})
		if !reflect.DeepEqual(r2.Headers, want) {
			t.Fatalf("%d forwarded by name: got %v, want %v", n, r2.Headers, want)
		}
		for i := ingestHeaders; i+1 < len(r2.Headers); i++ {
			r2.Headers[i].Value = append(r2.Headers[i].Value, "XXXX"...)
			if got, want := string(r2.Headers[i+1].Value), fmt.Sprint(i+1-ingestHeaders); got != want {
				t.Fatalf("%d forwarded by name: appending to header %d changed the next to %q, want %q", n, i, got, want)
			}
		}
	}
}
