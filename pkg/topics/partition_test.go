package topics

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// A record without an entity goes where kgo's default partitioner puts
// it; one with an entity where a record keyed by the entity goes, whatever
// its own key.
func TestPartitioner(t *testing.T) {
	ours, def := Partitioner().ForTopic("webhooks.raw"), kgo.StickyKeyPartitioner(nil).ForTopic("webhooks.raw")
	for _, n := range []int{1, 12, 64} {
		for i := range 200 {
			key := []byte(fmt.Sprintf("stripe:evt_%d", i))
			if got, want := ours.Partition(&kgo.Record{Key: key}, n), def.Partition(&kgo.Record{Key: key}, n); got != want {
				t.Fatalf("n=%d key %s: partition %d, the default partitioner's %d", n, key, got, want)
			}
			entity := fmt.Sprintf("cus_%d", i%7)
			r := &kgo.Record{Key: key}
			headers.Set(r, headers.Entity, entity)
			if got, want := ours.Partition(r, n), def.Partition(&kgo.Record{Key: []byte(entity)}, n); got != want {
				t.Fatalf("n=%d entity %s: partition %d, want %d", n, entity, got, want)
			}
		}
	}
}
