package publish

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeProducer answers each record's promise as answer says: nil error,
// an error, or never (a produce stuck in flight).
type fakeProducer struct {
	answer func(r *kgo.Record) (err error, answers bool)
}

func (f fakeProducer) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	if err, ok := f.answer(r); ok {
		go promise(r, err)
	}
}

func recs(n int) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{Topic: "raw"}
	}
	return out
}

// TestPublish: nil only when every record was acknowledged; a refusal is
// returned naming the topic; a record never acknowledged is ErrDeadline
// (the coarse deadline fires), and so is the client's own record timeout;
// a caller gone is its context's error. Calls after each outcome (the
// waiters reused or not) answer as the first did.
func TestPublish(t *testing.T) {
	acked := func(*kgo.Record) (error, bool) { return nil, true }
	cases := []struct {
		name   string
		answer func(*kgo.Record) (error, bool)
		n      int
		ctx    func() context.Context
		want   func(error) bool
	}{
		{"acked", acked, 1, context.Background, func(err error) bool { return err == nil }},
		{"batch acked", acked, 5, context.Background, func(err error) bool { return err == nil }},
		{"refused", func(*kgo.Record) (error, bool) { return kerr.MessageTooLarge, true }, 2, context.Background,
			func(err error) bool {
				return errors.Is(err, kerr.MessageTooLarge) && !errors.Is(err, ErrDeadline) && err.Error() == "produce raw: "+kerr.MessageTooLarge.Error()
			}},
		{"record timeout", func(*kgo.Record) (error, bool) { return kgo.ErrRecordTimeout, true }, 1, context.Background,
			func(err error) bool { return errors.Is(err, ErrDeadline) && errors.Is(err, kgo.ErrRecordTimeout) }},
		{"stuck", func(*kgo.Record) (error, bool) { return nil, false }, 1, context.Background,
			func(err error) bool { return err == ErrDeadline }},
		{"one of three stuck", func(r *kgo.Record) (error, bool) { return nil, r.Key == nil }, 3, context.Background,
			func(err error) bool { return err == ErrDeadline }},
		{"caller gone", func(*kgo.Record) (error, bool) { return nil, false }, 1,
			func() context.Context { ctx, cancel := context.WithCancel(context.Background()); cancel(); return ctx },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(fakeProducer{answer: tc.answer}, 100*time.Millisecond)
			for call := range 3 {
				rs := recs(tc.n)
				if tc.name == "one of three stuck" {
					rs[1].Key = []byte("stuck")
				}
				if err := p.Publish(tc.ctx(), rs); !tc.want(err) {
					t.Fatalf("call %d: Publish = %v", call, err)
				}
			}
		})
	}
}

// TestDeadlinesShared: calls whose deadlines fall in one step share one
// channel; it is closed once its instant passed, and one for an instant
// already past is closed at once.
func TestDeadlinesShared(t *testing.T) {
	d := &deadlines{step: time.Hour}
	at := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	a, b := d.by(at.Add(time.Minute)), d.by(at.Add(59*time.Minute))
	if a != b {
		t.Fatal("two deadlines in one step got two channels")
	}
	if c := d.by(at.Add(61 * time.Minute)); c == a {
		t.Fatal("deadlines a step apart share a channel")
	}
	past := d.by(time.Now().Add(-2 * time.Hour))
	select {
	case <-past:
	case <-time.After(10 * time.Second):
		t.Fatal("the channel of an instant past was not closed within 10s")
	}
	select {
	case <-a:
		t.Fatal("a channel closed a day early")
	default:
	}
}
