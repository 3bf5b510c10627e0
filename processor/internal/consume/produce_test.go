package consume

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/outcome"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// refuseProduces makes the broker answer MESSAGE_TOO_LARGE, for every
// partition in it, to each produce request that writes to topic, while
// refuse says so; it counts the requests refused.
func refuseProduces(t *testing.T, f *fakeKafka, topic string, refuse func(n int64) bool) *atomic.Int64 {
	tds, err := kadm.NewClient(f.client(t)).ListTopics(context.Background(), topic)
	if err != nil || tds[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, tds[topic].Err)
	}
	id := tds[topic].ID // produce v13 names topics by id
	var refused atomic.Int64
	f.c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		hit := false
		for _, t := range pr.Topics {
			hit = hit || t.Topic == topic || t.TopicID == id
		}
		if !hit || !refuse(refused.Load()+1) {
			return nil, nil, false
		}
		refused.Add(1)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.MessageTooLarge.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	return &refused
}

// TestRefusedProduceAbortsAndRetries: the broker refuses the first produce
// of the outcomes (as it refuses a record over max.message.bytes). The
// transaction holding it must abort, not commit past the delivery; its
// results are produced again, with their long headers cut, in the next
// one. Every key ends done once, each destination called once.
func TestRefusedProduceAbortsAndRetries(t *testing.T) {
	f := newFakeKafka(t)
	refused := refuseProduces(t, f, f.names.Outcomes, func(n int64) bool { return n == 1 })
	fast := &counter{}
	runProcessor(t, f, "p1", map[string]deliver.Handler{"fastpay": fast})
	keys := []string{"a", "b", "c"}
	f.produce(t, "fastpay", keys...)
	waitFor(t, "every key done", func() bool { return allDoneOnce(f.outcomes(t), keys) })
	if refused.Load() != 1 {
		t.Fatalf("%d produce requests refused, want 1", refused.Load())
	}
	out := f.outcomes(t)
	for _, k := range keys {
		if n := len(out[k]); n != 1 || fast.count(k) != 1 {
			t.Errorf("%s: %d outcomes %+v, %d calls; want one done outcome and one call (an abort calls nothing again)", k, n, out[k], fast.count(k))
		}
	}
	if off, _ := f.committed(t); off != int64(len(keys)) {
		t.Errorf("committed offset %d, want %d", off, len(keys))
	}
}

// TestRefusedTwiceStops: the broker refuses every produce of the outcomes.
// The processor must not commit past the delivery: after the second
// refusal (the first retry has its headers cut) it stops with an error
// naming the record, and nothing of it is committed.
func TestRefusedTwiceStops(t *testing.T) {
	f := newFakeKafka(t)
	refused := refuseProduces(t, f, f.names.Outcomes, func(int64) bool { return true })
	exited := make(chan error, 1)
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"fastpay": &counter{}}, procOptions{exited: exited})
	f.produce(t, "fastpay", "a")
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the processor did not stop after %d refused produce requests", refused.Load())
	}
	if err == nil || !strings.Contains(err.Error(), `offset 0 (key "a")`) || !strings.Contains(err.Error(), "refused twice") || !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run = %v, want an error naming offset 0, key a, refused twice, MESSAGE_TOO_LARGE", err)
	}
	if out := f.outcomes(t); len(out) != 0 {
		t.Errorf("outcomes committed: %+v, want none", out)
	}
	if off, _ := f.committed(t); off > 0 {
		t.Errorf("committed offset %d: moved past the record it could not record", off)
	}
}

// TestOversizedHeadersAreCut: a record whose event type header (from
// before ingest checked types) makes its DLQ copy outgrow the topics' limit
// is dead-lettered with the exact body and key, the header cut and the cut
// named; its outcome's event type is cut to 256 bytes.
func TestOversizedHeadersAreCut(t *testing.T) {
	f := newFakeKafka(t)
	exited := make(chan error, 1)
	bad := deliver.HandlerFunc(func(context.Context, deliver.Delivery) error { return retry.Permanent(errors.New("400 Bad Request")) })
	runProcessorWith(t, f, "p1", map[string]deliver.Handler{"fastpay": bad}, procOptions{exited: exited, maxRecordBytes: 8 << 10})
	cl := f.client(t)
	r := &kgo.Record{Topic: f.names.Raw, Key: []byte("big"), Value: []byte(`{"id":"big"}`)}
	headers.Set(r, headers.Provider, "fastpay")
	headers.Set(r, headers.Origin, headers.OriginIngest)
	headers.Set(r, headers.EventType, strings.Repeat("t", 20_000))
	headers.SetAttempt(r, 1)
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a dead outcome", func() bool { return count(f.outcomes(t), "big", outcome.StatusDead) == 1 })
	o := f.outcomes(t)["big"][0]
	if len(o.EventType) != headers.MaxEventTypeBytes {
		t.Errorf("outcome event type of %d bytes, want it cut to %d", len(o.EventType), headers.MaxEventTypeBytes)
	}
	dlq := f.client(t, kgo.ConsumeTopics(f.names.DLQ), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := dlq.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 {
		t.Fatalf("%d DLQ records, want 1", len(recs))
	}
	d := recs[0]
	if string(d.Key) != "big" || string(d.Value) != `{"id":"big"}` || headers.Value(d, headers.HeadersCut) != headers.EventType ||
		len(headers.Value(d, headers.EventType)) != headers.CutHeaderBytes || headers.Size(d) > 8<<10 {
		t.Errorf("DLQ record: key %q, body %q, headers cut %q, event type %d bytes, size %d; want the key and body exact, the event type cut to %d and named, at most %d bytes",
			d.Key, d.Value, headers.Value(d, headers.HeadersCut), len(headers.Value(d, headers.EventType)), headers.Size(d), headers.CutHeaderBytes, 8<<10)
	}
	select {
	case err := <-exited:
		t.Fatalf("the processor stopped: %v", err)
	default:
	}
}
