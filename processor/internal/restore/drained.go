package restore

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeBytes bounds one fetch of drained.
const probeBytes = 1 << 20

// drained reports whether [from, end) of the partition holds no committed
// data record, so the restore may stop at end although the consumer
// returned nothing more.
//
// franz-go's consumer has no position getter: the restore follows it by the
// records it returns, and with KeepControlRecords every transaction marker
// is one of them. A range can still end in records the consumer drops
// silently: aborted data whose abort marker was written after another
// transaction began (the marker lies past the last stable offset), or
// batches the log cleaner emptied. drained reads the range with raw
// read_committed fetches to the partition leader, parsed by the consumer's
// own code (kgo.ProcessFetchPartition), which reports the offset it reached.
// Any doubt (an error, no progress) is a false: the caller waits and asks
// again.
func (r *restorer) drained(ctx context.Context, from, end int64) (bool, error) {
	topics, err := r.adm.ListTopics(ctx, r.cfg.Topic)
	if err != nil {
		return false, err
	}
	td, ok := topics[r.cfg.Topic]
	if !ok || td.Err != nil {
		return false, fmt.Errorf("metadata: %v", td.Err)
	}
	pd, ok := td.Partitions[r.p]
	if !ok || pd.Err != nil {
		return false, fmt.Errorf("metadata of the partition: %v", pd.Err)
	}
	for off := from; off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = probeBytes
		req.IsolationLevel = 1 // read_committed
		req.SessionEpoch = -1  // no fetch session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = r.cfg.Topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = r.p, off, probeBytes
		rp.CurrentLeaderEpoch, rp.LogStartOffset = pd.LeaderEpoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		kresp, err := r.cl.Broker(int(pd.Leader)).Request(ctx, req)
		if err != nil {
			return false, err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return false, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return false, fmt.Errorf("fetch response with %d topics", len(resp.Topics))
		}
		part := &resp.Topics[0].Partitions[0]
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         off,
			IsolationLevel: kgo.ReadCommitted(),
			Topic:          r.cfg.Topic,
			Partition:      r.p,
		}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return false, fp.Err
		}
		for _, rec := range fp.Records {
			if rec.Offset < end {
				return false, nil // committed data: the consumer will return it
			}
		}
		if next > off {
			off = next
			continue
		}
		// Nothing at or after off: if the last stable offset is past end,
		// the range holds no record at all.
		return len(part.RecordBatches) == 0 && part.LastStableOffset >= end, nil
	}
	return true, nil
}
