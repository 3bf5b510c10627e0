package hanging

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const txnID = "hookline-processor-p1"

// logRecord encodes one __transaction_state record the way the broker does.
func logRecord(t *testing.T, id string, pid int64, epoch int16, state kmsg.TransactionState, tv int16, parts map[string][]int32) (key, value []byte) {
	t.Helper()
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	v := kmsg.NewTxnMetadataValue()
	v.Version = 1
	v.ProducerID, v.ProducerEpoch, v.State, v.ClientTransactionVersion = pid, epoch, state, tv
	v.TimeoutMillis = 60000
	for topic, ps := range parts {
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = topic, ps
		v.Topics = append(v.Topics, vt)
	}
	return k.AppendTo(nil), v.AppendTo(nil)
}

// The records around the hang this package was written for, as
// DumpLogSegments printed them from the broker's __transaction_state
// (transaction.version 2: data written at epoch E, its prepare record and
// markers at E+1): the transaction at epoch 199 wrote to changelog 2,
// outcomes 2 and __consumer_offsets 1, was prepared to commit at 200, and
// its markers were skipped; the next one, at 200, was aborted at 201.
func brokerLog(t *testing.T) []decision {
	t.Helper()
	recs := []struct {
		epoch int16
		state kmsg.TransactionState
		parts map[string][]int32
	}{
		{198, kmsg.TransactionStateOngoing, map[string][]int32{"changelog": {3, 2, 0}, "outcomes": {3, 2, 0}, offsetsTopic: {1}}},
		{199, kmsg.TransactionStatePrepareCommit, map[string][]int32{"changelog": {3, 2, 0}, "outcomes": {3, 2, 0}, offsetsTopic: {1}}},
		{199, kmsg.TransactionStateCompleteCommit, nil},
		{199, kmsg.TransactionStateOngoing, map[string][]int32{"changelog": {2}, "outcomes": {2}, offsetsTopic: {1}}},
		{200, kmsg.TransactionStatePrepareCommit, map[string][]int32{"changelog": {2}, "outcomes": {2}, offsetsTopic: {1}}},
		{200, kmsg.TransactionStateCompleteCommit, nil},
		{200, kmsg.TransactionStateOngoing, map[string][]int32{"changelog": {3, 2, 0}, "outcomes": {3, 2, 1, 0}}},
		{201, kmsg.TransactionStatePrepareAbort, map[string][]int32{"changelog": {3, 2, 0}, "outcomes": {3, 2, 1, 0}}},
		{201, kmsg.TransactionStateCompleteAbort, nil},
	}
	var ds []decision
	for _, r := range recs {
		k, v := logRecord(t, txnID, 0, r.epoch, r.state, 2, r.parts)
		if d, ok := parseDecision(k, v, txnID); ok {
			ds = append(ds, d)
		}
	}
	// Another transactional id's records and a tombstone are not ours.
	k, v := logRecord(t, "other", 0, 200, kmsg.TransactionStatePrepareAbort, 2, map[string][]int32{"changelog": {2}})
	if _, ok := parseDecision(k, v, txnID); ok {
		t.Fatal("parsed another transactional id's record as ours")
	}
	if _, ok := parseDecision(k, nil, "other"); ok {
		t.Fatal("parsed a tombstone as a decision")
	}
	if _, ok := parseDecision([]byte{0, 1}, v, txnID); ok {
		t.Fatal("parsed a malformed key")
	}
	return ds
}

func TestDecideTakesThePrepareRecordOfTheHungTransaction(t *testing.T) {
	ds := brokerLog(t)
	if len(ds) != 3 {
		t.Fatalf("%d prepare records parsed, want 3: %+v", len(ds), ds)
	}
	for _, c := range []struct {
		name      string
		epoch     int16 // the epoch the partition's open transaction wrote with
		topic     string
		partition int32
		found     bool
		commit    bool
		marker    int16
	}{
		// The hang: epoch 199 open on changelog 2, outcomes 2 and the
		// offsets; prepared to commit at 200. The prepare record at 199
		// (the transaction before) names the same partitions and must not
		// be taken for it.
		{"changelog of the hung commit", 199, "changelog", 2, true, true, 200},
		{"offsets of the hung commit", 199, offsetsTopic, 1, true, true, 200},
		{"an aborted transaction", 200, "outcomes", 1, true, false, 201},
		{"a partition the transaction did not write", 199, "changelog", 3, false, false, 0},
		{"an epoch with no prepare record (compacted away)", 150, "changelog", 2, false, false, 0},
	} {
		d, ok := decide(ds, 0, c.epoch, c.topic, c.partition)
		if ok != c.found || (ok && (d.commit != c.commit || d.epoch != c.marker)) {
			t.Errorf("%s: decide(epoch %d, %s[%d]) = %+v, %v; want found=%v commit=%v marker epoch %d",
				c.name, c.epoch, c.topic, c.partition, d, ok, c.found, c.commit, c.marker)
		}
	}
	if _, ok := decide(ds, 7, 199, "changelog", 2); ok {
		t.Error("decided for another producer id")
	}
}

func TestDecideTransactionVersion1(t *testing.T) {
	// Version 1 clients keep the epoch across transactions: the prepare
	// record carries the data's own epoch, and the last one naming the
	// partition is the transaction still open there.
	var ds []decision
	for _, r := range []struct {
		state kmsg.TransactionState
		parts map[string][]int32
	}{
		{kmsg.TransactionStatePrepareAbort, map[string][]int32{"changelog": {2}}},
		{kmsg.TransactionStatePrepareCommit, map[string][]int32{"changelog": {2}}},
	} {
		k, v := logRecord(t, txnID, 5, 3, r.state, 1, r.parts)
		d, ok := parseDecision(k, v, txnID)
		if !ok {
			t.Fatal("prepare record not parsed")
		}
		ds = append(ds, d)
	}
	d, ok := decide(ds, 5, 3, "changelog", 2)
	if !ok || !d.commit || d.epoch != 3 {
		t.Fatalf("decide = %+v, %v; want the last record (commit) at epoch 3", d, ok)
	}
}

func TestFinished(t *testing.T) {
	for _, c := range []struct {
		state string
		coord int16 // the coordinator's epoch
		epoch int16 // the epoch the partition's transaction wrote with
		want  bool
	}{
		{"Ongoing", 199, 199, false},       // the live transaction
		{"Ongoing", 200, 199, true},        // a later one began: 199 ended
		{"PrepareCommit", 200, 199, false}, // markers on their way
		{"PrepareAbort", 200, 199, false},
		{"PrepareCommit", 201, 199, true}, // ending a later one
		{"CompleteCommit", 200, 199, true},
		{"CompleteAbort", 199, 199, true}, // version 1: no bump
		{"Empty", 202, 199, true},
		{"CompleteCommit", 150, 199, false}, // older than the data: not about it
		{"Dead", 300, 199, false},
	} {
		got := finished(kadm.DescribedTransaction{State: c.state, ProducerEpoch: c.coord}, c.epoch)
		if got != c.want {
			t.Errorf("finished(coordinator %s at %d, data epoch %d) = %v, want %v", c.state, c.coord, c.epoch, got, c.want)
		}
	}
}
