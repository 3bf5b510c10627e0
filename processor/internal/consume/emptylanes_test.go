package consume

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/processor/internal/deliver"
)

// A lane partition empty when taken up is not fetched until a record is
// parked there (reader.parked), but a record another producer wrote there
// is still read: the reader sees its end move (watchEmpty).
func TestRecordInAnEmptyLaneIsRead(t *testing.T) {
	f := newFakeKafka(t)
	slow, fast := &counter{}, &counter{}
	runProcessor(t, f, "p1", map[string]deliver.Handler{"slowcrm": slow, "fastpay": fast})

	f.produce(t, "fastpay", "f1")
	waitFor(t, "f1's outcome (partition 0 taken up, its lanes empty)", func() bool {
		return len(f.outcomes(t)["f1"]) == 1
	})
	cl := f.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: f.names.Lane("slowcrm"), Partition: 0, Key: []byte("s1"), Value: []byte(`{"id":"s1"}`)}
	headers.Set(r, headers.Provider, "slowcrm")
	headers.Set(r, headers.Origin, headers.OriginIngest)
	headers.SetAttempt(r, 1)
	headers.SetTime(r, headers.ReceivedAt, time.Now())
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an outcome of s1, written to the lane by another producer", func() bool {
		return len(f.outcomes(t)["s1"]) > 0
	})
}
