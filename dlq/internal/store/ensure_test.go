package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// TestEnsureStatusTopicKeepsWrites: `dlq serve` ensures webhooks.dlq-status
// before every write. Against a real broker (kfake does not discard
// duplicate sequence numbers), three resolutions of one ref, each after an
// ensure, must be three records: when the ensure purged the topic from the
// producing client, the broker took the second and third as duplicates of
// the first and dropped them while acknowledging them (found by
// schemathesis against dlq serve).
func TestEnsureStatusTopicKeepsWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a broker")
	}
	brokers := kafkatest.Brokers(t)
	names := topics.NewNames(kafkatest.Prefix(t), nil)
	newClient := kafkatest.NewClient(brokers)
	cl := kafkatest.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent, as dlq's
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, spec := range names.Specs(topics.Shape{Partitions: 4}) {
		if spec.Name == names.DLQ { // created and usable (leaders elected) when Ensure returns
			if err := topics.Ensure(ctx, kafkatest.Client(t, brokers), []topics.Spec{spec}, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := New(Config{Names: names, Client: cl, NewClient: newClient})
	ref := Ref{Partition: 0, Offset: 1}
	for i := range 3 {
		if err := st.EnsureStatusTopic(ctx, -1); err != nil {
			t.Fatal(err)
		}
		rs, err := NewResolution(ref, Ignored, fmt.Sprintf("note %d", i), "test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Resolve(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	if n := kafkatest.EndOffsets(t, brokers, names.DLQStatus); n != 3 {
		t.Fatalf("%s holds %d records after 3 acknowledged resolutions, want 3", names.DLQStatus, n)
	}
}
