package trace

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/topics"
)

// Streams of bulkLoad: the keys' entries, the list's rows, the list's
// marker, then one per field value.
const (
	streamEvents uint32 = iota + 1
	streamRows
	streamMeta
	streamFields
)

// bulkChunk is how many deliveries bulkLoad makes and hands to Badger at
// a time (the test makes it smaller).
var bulkChunk = 20_000

// bulkLoad fills ix (emptied first: StreamWriter.Prepare drops what it
// holds) with the entries Apply writes for deliveries 0..n-1 of gen (in
// time order), made by the index's own code (entries) and handed to
// Badger's StreamWriter in key order, which writes them as tables at the
// bottom level with no compaction. Key order takes two passes, run side
// by side: the keys' entries (by key, then time) ascend with j, the list's
// rows and field entries (newest first) descend. Deliveries only: a
// record that makes any other entry (a DLQ entry, a resolution) is an
// error.
func bulkLoad(ix *Index, n int, gen func(j int) (raw, out *kgo.Record)) error {
	// The StreamWriter stops and starts Badger's compactors itself.
	return ix.idle.Hold(func() error { return streamLoad(ix, n, gen) })
}

func streamLoad(ix *Index, n int, gen func(j int) (raw, out *kgo.Record)) (err error) {
	sw := ix.db.NewStreamWriter()
	if err := sw.Prepare(); err != nil {
		return err
	}
	flushed := false
	defer func() {
		if !flushed {
			sw.Cancel()
		}
	}()
	noDelete := func(k []byte) error { return fmt.Errorf("bulk load: a delete of %q", k) }
	write := func(recs []*kgo.Record, stream func(k []byte) (uint32, error)) error {
		buf := z.NewBuffer(32<<20, "trace.bulkLoad")
		defer func() { _ = buf.Release() }()
		err := ix.entries(recs, func(e *badger.Entry) error {
			id, err := stream(e.Key)
			if err != nil || id == 0 {
				return err
			}
			kv := &pb.KV{Key: e.Key, Value: e.Value, ExpiresAt: e.ExpiresAt, Version: 1, StreamId: id}
			if e.UserMeta != 0 {
				kv.UserMeta = []byte{e.UserMeta}
			}
			badger.KVToBuffer(kv, buf)
			return nil
		}, noDelete)
		if err != nil {
			return err
		}
		return sw.Write(buf)
	}
	other := func(k []byte) error { return fmt.Errorf("bulk load: entry %q is not a delivery's", k) }

	// Pass 1, j ascending: the keys' entries (the rows and field entries
	// are pass 2's).
	keys := func() error {
		recs := make([]*kgo.Record, 0, 2*bulkChunk)
		for lo := 0; lo < n; lo += bulkChunk {
			recs = deliveries(recs[:0], lo, min(n, lo+bulkChunk), gen)
			err := write(recs, func(k []byte) (uint32, error) {
				switch k[0] {
				case pEvent:
					return streamEvents, nil
				case pList, pField:
					return 0, nil
				}
				return 0, other(k)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	// Pass 2, j descending: the outcomes' rows and field entries, a
	// stream per field value.
	ids := map[string]uint32{}
	rows := func() error {
		recs := make([]*kgo.Record, 0, bulkChunk)
		for hi := n; hi > 0; hi -= bulkChunk {
			recs = recs[:0]
			for j := hi - 1; j >= max(0, hi-bulkChunk); j-- {
				_, out := gen(j)
				recs = append(recs, out)
			}
			err := write(recs, func(k []byte) (uint32, error) {
				switch k[0] {
				case pList:
					return streamRows, nil
				case pField:
					v := string(k[:len(k)-posLen])
					id, ok := ids[v]
					if !ok {
						id = streamFields + uint32(len(ids))
						ids[v] = id
					}
					return id, nil
				case pEvent:
					return 0, nil
				}
				return 0, other(k)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- keys() }()
	err = rows()
	if kerr := <-done; err == nil {
		err = kerr
	}
	if err != nil {
		return err
	}
	buf := z.NewBuffer(1<<10, "trace.bulkLoad")
	defer func() { _ = buf.Release() }()
	badger.KVToBuffer(&pb.KV{Key: listVersion, Version: 1, StreamId: streamMeta}, buf)
	if err := sw.Write(buf); err != nil {
		return err
	}
	flushed = true
	return sw.Flush()
}

// TestBulkLoadWritesWhatApplyWrites: the benchmark's bulk load gives the
// same entries as Apply (but for Apply's position), and the same pages.
func TestBulkLoadWritesWhatApplyWrites(t *testing.T) {
	names := topics.NewNames("bench.", []string{"1m"})
	defer func(c int) { bulkChunk = c }(bulkChunk)
	bulkChunk = 1000
	n := 3*bulkChunk + 123 // chunks, and one cut short
	base := time.Now().Add(-6 * 24 * time.Hour).Truncate(time.Second)
	gen := func(j int) (raw, out *kgo.Record) { return listDelivery(names, j, n, base, 5*24*time.Hour) }
	open := func() *Index {
		ix, err := Open(Options{InMemory: true, Names: names})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ix.Close() })
		return ix
	}
	applied, bulk := open(), open()
	if err := applyLoad(applied, names, n, gen); err != nil {
		t.Fatal(err)
	}
	if err := bulkLoad(bulk, n, gen); err != nil {
		t.Fatal(err)
	}
	a, b := dump(t, applied), dump(t, bulk)
	if len(a) != len(b) {
		t.Fatalf("apply wrote %d entries, the bulk load %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i].k, b[i].k) || !bytes.Equal(a[i].v, b[i].v) || a[i].expires != b[i].expires {
			t.Fatalf("entry %d: apply %q=%q (expires %d), bulk load %q=%q (expires %d)", i, a[i].k, a[i].v, a[i].expires, b[i].k, b[i].v, b[i].expires)
		}
	}
	for _, f := range []ListFilter{{}, {Provider: "github", Route: "crm", Status: "retrying"}, {EventType: benchEventType(19)}} {
		pa, err := applied.List(context.Background(), f, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := bulk.List(context.Background(), f, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(pa.Events) == 0 || !slices.Equal(pa.Events, pb.Events) || pa.NextCursor != pb.NextCursor {
			t.Fatalf("List(%+v): apply %d rows (next %q), bulk load %d (next %q)", f, len(pa.Events), pa.NextCursor, len(pb.Events), pb.NextCursor)
		}
	}
}

type dumped struct {
	k, v    []byte
	expires uint64
}

// dump is every entry of ix but the positions, in key order.
func dump(t *testing.T, ix *Index) []dumped {
	t.Helper()
	var out []dumped
	err := ix.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if item.Key()[0] == pPosition {
				continue
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, dumped{item.KeyCopy(nil), v, item.ExpiresAt()})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
