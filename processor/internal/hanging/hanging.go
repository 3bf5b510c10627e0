// Package hanging finds and completes the processor's hanging transactions:
// a transaction the coordinator has finished (committed or aborted) whose
// marker never reached some partition it wrote to.
//
// Kafka leaves one behind when a broker in controlled shutdown is the only
// replica of a partition the transaction touched: the partition loses its
// leader while the coordinator is still sending markers, the coordinator
// takes the missing leader for a deleted topic and skips the partition, and
// records the transaction complete. Seen with one broker stopped with
// SIGTERM under load (Kafka 4.3.1; the broker logs "Couldn't find leader
// endpoint for partitions ... these partitions are likely deleted already").
// What it blocks:
//
//   - on __consumer_offsets, the transaction's offsets stay pending, and an
//     OffsetFetch with require_stable (how the processor learns where to
//     start) answers UNSTABLE_OFFSET_COMMIT for ever: the group never reads
//     that raw partition again;
//   - on a data partition, the last stable offset stays at the transaction's
//     start: read_committed readers (restore, analysts) stop there.
//
// Nothing in Kafka ends it (the coordinator's timeout only covers
// transactions it thinks are open). Check finds them and writes the
// missing markers with the decision the coordinator logged in
// __transaction_state, as kafka-transactions.sh abort would, but with
// the right outcome: a committed transaction is committed, not thrown away.
// When the decision can no longer be read, it reports and writes nothing.
//
// A later transaction of the same producer that writes to such a partition
// first is merged with the hanging one there (the partition still has it
// open; the later marker ends both): seen once, where an abort after the
// broker came back threw away a committed transaction's outcome. The
// caller must keep its transactions off the partitions until Check found
// nothing open; package consume does.
package hanging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Internal topics.
const (
	offsetsTopic = "__consumer_offsets"
	txnLogTopic  = "__transaction_state"
)

// Config is what Check needs.
type Config struct {
	// TransactionalID is the processor's transactional id.
	TransactionalID string
	// Topics are the topics its transactions write to; __consumer_offsets
	// is always checked too.
	Topics []string
	// NewClient builds the client that reads __transaction_state.
	NewClient func(opts ...kgo.Opt) (*kgo.Client, error)
}

// Repair is one hanging transaction found on one partition.
type Repair struct {
	Topic       string
	Partition   int32
	ProducerID  int64
	Epoch       int16 // the epoch the partition's open transaction wrote with
	StartOffset int64
	// Decided is false when the coordinator's decision could not be read
	// (the transaction log was compacted past it): nothing is written, an
	// operator must decide (kafka-transactions.sh).
	Decided bool
	Commit  bool
	Err     error // the marker write failed (Decided only)
}

func (r Repair) String() string {
	outcome := "undecided"
	if r.Decided {
		outcome = map[bool]string{true: "commit", false: "abort"}[r.Commit]
	}
	return fmt.Sprintf("%s[%d] producer %d epoch %d open since offset %d: %s", r.Topic, r.Partition, r.ProducerID, r.Epoch, r.StartOffset, outcome)
}

// Check looks for hanging transactions of cfg.TransactionalID and completes
// the ones whose outcome the coordinator logged. It returns what it found;
// an error means the check itself could not run (it is safe to retry).
func Check(ctx context.Context, adm *kadm.Client, cfg Config) ([]Repair, error) {
	// The partitions first, the coordinator second: a transaction seen
	// open that the coordinator then calls finished either hangs or had its
	// markers written in between, which the second look below tells apart.
	// (In the other order, a transaction begun between the two questions
	// would look finished.)
	open, err := openTransactions(ctx, adm, cfg, -1, nil)
	if err != nil {
		return nil, err
	}
	if len(open) == 0 {
		return nil, nil
	}
	coord, ok, err := describe(ctx, adm, cfg.TransactionalID)
	if err != nil || !ok {
		return nil, err
	}
	var found []kadm.DescribedProducer
	for _, p := range open {
		if p.ProducerID == coord.ProducerID && finished(coord, p.ProducerEpoch) {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	decisions, err := readDecisions(ctx, adm, cfg)
	if err != nil {
		return nil, fmt.Errorf("read the coordinator's decisions: %w", err)
	}
	// Ask again, now that the coordinator said it is over: an ordinary
	// transaction's markers may have landed between the two questions.
	still, err := openTransactions(ctx, adm, cfg, coord.ProducerID, found)
	if err != nil {
		return nil, err
	}
	var repairs []Repair
	for _, p := range still {
		r := Repair{Topic: p.Topic, Partition: p.Partition, ProducerID: p.ProducerID, Epoch: p.ProducerEpoch, StartOffset: p.CurrentTxnStartOffset}
		d, ok := decide(decisions, p.ProducerID, p.ProducerEpoch, p.Topic, p.Partition)
		if ok {
			r.Decided, r.Commit = true, d.commit
			r.Err = writeMarker(ctx, adm, p, d)
		}
		repairs = append(repairs, r)
	}
	return repairs, nil
}

func describe(ctx context.Context, adm *kadm.Client, txnID string) (kadm.DescribedTransaction, bool, error) {
	ds, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		return kadm.DescribedTransaction{}, false, fmt.Errorf("describe transaction %s: %w", txnID, err)
	}
	d, ok := ds[txnID]
	if !ok {
		return d, false, nil
	}
	if d.Err != nil {
		return d, false, fmt.Errorf("describe transaction %s: %w", txnID, d.Err)
	}
	return d, true, nil
}

// openTransactions returns the partitions on which producerID (-1: any
// producer) has a transaction open: on every partition of the topics, or
// (only non-nil) on those of only that are still open at the same start
// offset.
func openTransactions(ctx context.Context, adm *kadm.Client, cfg Config, producerID int64, only []kadm.DescribedProducer) ([]kadm.DescribedProducer, error) {
	set := kadm.TopicsSet{}
	if only == nil {
		for _, t := range append(slices.Clone(cfg.Topics), offsetsTopic) {
			set[t] = map[int32]struct{}{} // every partition
		}
	} else {
		for _, p := range only {
			set.Add(p.Topic, p.Partition)
		}
	}
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("describe producers: %w", err)
	}
	var open []kadm.DescribedProducer
	for _, p := range described.SortedProducers() {
		if (producerID >= 0 && p.ProducerID != producerID) || p.CurrentTxnStartOffset < 0 {
			continue
		}
		if only != nil && !slices.ContainsFunc(only, func(o kadm.DescribedProducer) bool {
			return o.Topic == p.Topic && o.Partition == p.Partition && o.CurrentTxnStartOffset == p.CurrentTxnStartOffset
		}) {
			continue
		}
		open = append(open, p)
	}
	return open, nil
}

// finished reports whether the coordinator is done with the transaction a
// partition saw written with epoch: it has moved past that epoch (every
// end of a transaction bumps the epoch under transaction.version 2, a
// fence bumps it under 1), or it holds that epoch in a completed state.
// A transaction it is still preparing to end (markers in flight) is not
// finished.
func finished(coord kadm.DescribedTransaction, epoch int16) bool {
	switch coord.State {
	case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return coord.ProducerEpoch > epoch+1
	case "Ongoing":
		return coord.ProducerEpoch > epoch
	case "CompleteCommit", "CompleteAbort", "Empty":
		return coord.ProducerEpoch >= epoch
	}
	return false
}

// decision is one "prepare to end" record of the transaction log.
type decision struct {
	producerID int64
	epoch      int16 // the epoch the markers are written with
	commit     bool
	tv2        bool // logged by a transaction.version 2 client
	partitions kadm.TopicsSet
}

// decide returns the coordinator's decision for the transaction that wrote
// to topic/partition with epoch: the last prepare record of that producer
// naming the partition, logged with the epoch the transaction's markers
// carry. Under transaction.version 2 that is the next epoch (the end of a
// transaction bumps it), so the previous transaction's prepare record, at
// the data's own epoch, is never taken for this one's.
func decide(ds []decision, producerID int64, epoch int16, topic string, partition int32) (decision, bool) {
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		markerEpoch := epoch
		if d.tv2 {
			markerEpoch = epoch + 1
		}
		if d.producerID != producerID || d.epoch != markerEpoch {
			continue
		}
		if _, ok := d.partitions[topic][partition]; ok {
			return d, true
		}
	}
	return decision{}, false
}

// readDecisions reads every prepare record of the transactional id from
// __transaction_state, in log order, up to the end the log has now.
func readDecisions(ctx context.Context, adm *kadm.Client, cfg Config) ([]decision, error) {
	ends, err := adm.ListEndOffsets(ctx, txnLogTopic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	cl, err := cfg.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnLogTopic: start}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// One transactional id lives on one partition of the log, and a
	// partition's records come in offset order: got is in log order.
	var got []decision
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", txnLogTopic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if d, ok := parseDecision(r.Key, r.Value, cfg.TransactionalID); ok {
				got = append(got, d)
			}
		})
	}
	return got, nil
}

// parseDecision decodes one transaction log record; ok is true for a
// PrepareCommit or PrepareAbort of txnID.
func parseDecision(key, value []byte, txnID string) (decision, bool) {
	var k kmsg.TxnMetadataKey
	if len(value) == 0 || k.ReadFrom(key) != nil || k.TransactionalID != txnID {
		return decision{}, false
	}
	var v kmsg.TxnMetadataValue
	if v.ReadFrom(value) != nil {
		return decision{}, false
	}
	if v.State != kmsg.TransactionStatePrepareCommit && v.State != kmsg.TransactionStatePrepareAbort {
		return decision{}, false
	}
	d := decision{producerID: v.ProducerID, epoch: v.ProducerEpoch, commit: v.State == kmsg.TransactionStatePrepareCommit,
		tv2: v.ClientTransactionVersion >= 2, partitions: kadm.TopicsSet{}}
	for _, t := range v.Topics {
		d.partitions.Add(t.Topic, t.Partitions...)
	}
	return d, true
}

// writeMarker completes the transaction on the partition the way the
// coordinator would have.
func writeMarker(ctx context.Context, adm *kadm.Client, p kadm.DescribedProducer, d decision) error {
	set := kadm.TopicsSet{}
	set.Add(p.Topic, p.Partition)
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID:       p.ProducerID,
		ProducerEpoch:    d.epoch,
		Commit:           d.commit,
		CoordinatorEpoch: p.CoordinatorEpoch,
		Topics:           set,
	})
	if err != nil {
		return err
	}
	var werr error
	for _, m := range resp {
		for _, t := range m.Topics {
			for _, pr := range t.Partitions {
				werr = errors.Join(werr, pr.Err)
			}
		}
	}
	return werr
}
