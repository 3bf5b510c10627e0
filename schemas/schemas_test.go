package schemas

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

func TestNames(t *testing.T) {
	want := []string{DLQStatus, Errors, Headers, Outcome, State}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
}

// TestExamples validates examples/<schema>/*.json (must pass) and
// examples/<schema>/invalid/*.json (must fail). Run with -v to read why each
// invalid example fails.
func TestExamples(t *testing.T) {
	dirs, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, d := range dirs {
		seen = append(seen, d.Name())
	}
	if !slices.Equal(seen, Names()) {
		t.Fatalf("example folders %v, want one per schema %v", seen, Names())
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			for _, kind := range []struct {
				dir   string
				valid bool
			}{{filepath.Join("examples", name), true}, {filepath.Join("examples", name, "invalid"), false}} {
				files, err := filepath.Glob(filepath.Join(kind.dir, "*.json"))
				if err != nil {
					t.Fatal(err)
				}
				if len(files) < 3 {
					t.Errorf("%s: %d examples, want at least 3", kind.dir, len(files))
				}
				for _, f := range files {
					t.Run(strings.TrimPrefix(f, "examples/"), func(t *testing.T) {
						doc, err := os.ReadFile(f)
						if err != nil {
							t.Fatal(err)
						}
						err = Validate(name, doc)
						switch {
						case kind.valid && err != nil:
							t.Errorf("valid example fails: %v", err)
						case !kind.valid && err == nil:
							t.Error("invalid example passes")
						case !kind.valid:
							t.Logf("fails as it should: %v", err)
						}
					})
				}
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name, schema, doc, want string
	}{
		{"unknown schema", "defs", `{}`, `unknown schema "defs"`},
		{"not JSON", State, `{"v":1,`, "state: not JSON"},
		{"trailing data", Errors, `[] []`, "errors: not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.schema, []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestHeadersFromRecord validates headers as pkg/headers writes them on a
// real record, DLQ-bound, so the schemas and the header code cannot drift.
func TestHeadersFromRecord(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	record := func() *kgo.Record {
		r := &kgo.Record{Key: []byte("stripe:evt_1")}
		headers.Set(r, headers.Provider, "stripe")
		headers.Set(r, headers.EventType, "invoice.paid")
		headers.Set(r, headers.IdempotencyKey, "stripe:evt_1")
		headers.SetTime(r, headers.ReceivedAt, at.Add(123456*time.Microsecond))
		headers.Set(r, headers.RequestID, "req-1")
		headers.Set(r, headers.ContentType, "application/json")
		headers.Set(r, headers.Origin, headers.OriginRetry)
		headers.SetAttempt(r, 3)
		headers.SetTime(r, headers.FirstSeenAt, at)
		headers.Set(r, headers.DeadReason, headers.DeadExhausted)
		headers.Set(r, headers.SourceTopic, "webhooks.retry.5m")
		headers.Set(r, headers.SourcePartition, "0")
		headers.Set(r, headers.SourceOffset, "17")
		headers.Set(r, headers.HTTPName("Stripe-Signature"), "t=1,v1=00")
		headers.SetErrors(r, []headers.ErrorEntry{
			{Attempt: 1, At: at.Add(time.Minute), Error: "timeout", Retryable: true},
			{Attempt: 2, At: at.Add(6*time.Minute + 100*time.Millisecond + 7), Error: "503", Retryable: true},
			{Attempt: 3, At: at.Add(21*time.Minute + 123*time.Millisecond), Error: strings.Repeat("€", 2000), Retryable: true},
		})
		return r
	}
	if err := ValidateHeaders(record().Headers); err != nil {
		t.Fatalf("headers as pkg/headers writes them: %v", err)
	}
	tests := []struct {
		name   string
		change func(r *kgo.Record)
		want   string
	}{
		{"repeated header", func(r *kgo.Record) {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers.Origin, Value: []byte("retry")})
		}, `header "hookline.origin" appears twice`},
		{"authorization copied", func(r *kgo.Record) { headers.Set(r, headers.HTTPName("Authorization"), "Bearer x") }, "http.authorization"},
		{"missing origin", func(r *kgo.Record) { headers.Delete(r, headers.Origin) }, "hookline.origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record()
			tt.change(r)
			err := ValidateHeaders(r.Headers)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ValidateHeaders = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}
