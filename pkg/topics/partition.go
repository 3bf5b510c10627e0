package topics

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// Partitioner places a record of webhooks.raw, a retry tier, a lane or the
// changelog: by its hookline.entity header when it has one (every record
// of an ordered provider's entity in one partition), else by its key, as
// kgo's default partitioner does (murmur2, Kafka's own). So one entity's
// records stay in one partition through every hop, and a record without
// an entity is placed exactly where it was before ordering existed.
// Every producer of those topics must use it.
func Partitioner() kgo.Partitioner { return entityPartitioner{kgo.StickyKeyPartitioner(nil)} }

type entityPartitioner struct{ base kgo.Partitioner }

func (p entityPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return entityTopicPartitioner{p.base.ForTopic(topic)}
}

type entityTopicPartitioner struct{ base kgo.TopicPartitioner }

// RequiresConsistency is the base's: a keyed record always is.
func (p entityTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return p.base.RequiresConsistency(r)
}

// Partition hashes the entity when there is one, else the key.
func (p entityTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if e, ok := headers.Get(r, headers.Entity); ok && e != "" {
		return p.base.Partition(&kgo.Record{Key: []byte(e)}, n)
	}
	return p.base.Partition(r, n)
}

// OnNewBatch passes the base's on (the sticky choice for records without
// a key).
func (p entityTopicPartitioner) OnNewBatch() {
	if b, ok := p.base.(kgo.TopicPartitionerOnNewBatch); ok {
		b.OnNewBatch()
	}
}

var _ kgo.TopicPartitionerOnNewBatch = entityTopicPartitioner{}
