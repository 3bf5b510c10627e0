package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Saved key counts let Open skip its key-only scan of the whole store (about
// 1 s per million keys, and it reads every table block, which then counts
// in RSS through Badger's memory maps): Close writes each partition's count
// by expiry bucket under kindCounts, with the marker kindCountsValid, in
// one transaction; Open reads them and deletes the marker before any other
// write, so after a crash (no Close) the marker is gone and Open scans.
const (
	kindCounts      byte = 'n' // 'n' | partition -> saved count (saveCounts)
	kindCountsValid byte = 'N' // 'N' -> the saved counts are those of the state as closed
)

// saveCounts writes every partition's count, by expiry bucket, and the
// marker. It replaces any counts saved before.
func (c *keyCounter) saveCounts(db *badger.DB) error {
	c.recounts.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return db.Update(func(txn *badger.Txn) error {
		var stale [][]byte
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindCounts}})
		for it.Rewind(); it.Valid(); it.Next() {
			stale = append(stale, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, k := range stale {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for p, pk := range c.parts {
			b := binary.AppendVarint(nil, pk.n)
			b = binary.AppendUvarint(b, uint64(len(pk.expiring)))
			for bucket, n := range pk.expiring {
				b = binary.AppendUvarint(b, bucket)
				b = binary.AppendVarint(b, n)
			}
			if err := txn.Set(partitionPrefix(kindCounts, p), b); err != nil {
				return err
			}
		}
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(time.Now().Unix()))
		return txn.Set([]byte{kindCountsValid}, v[:])
	})
}

// loadCounts reads the counts Close saved and deletes the marker; ok is
// false when there is no marker (the caller then scans).
func (c *keyCounter) loadCounts(db *badger.DB) (ok bool, err error) {
	parts := map[int32]*partKeys{}
	err = db.View(func(txn *badger.Txn) error {
		if _, err := txn.Get([]byte{kindCountsValid}); err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindCounts}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != 5 {
				return fmt.Errorf("%w: saved count key of %d bytes", ErrCorrupt, len(k))
			}
			p := int32(binary.BigEndian.Uint32(k[1:]))
			if err := it.Item().Value(func(v []byte) error {
				pk, err := decodeCounts(v)
				parts[p] = pk
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte{kindCountsValid}) }); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.folded = uint64(time.Now().Unix())
	c.parts = map[int32]*partKeys{}
	for p, saved := range parts {
		pk := c.part(p)
		pk.n += saved.n
		for bucket, n := range saved.expiring {
			pk.n -= n
			c.add(pk, bucket, n) // drops buckets that expired meanwhile
		}
	}
	return true, nil
}

func decodeCounts(v []byte) (*partKeys, error) {
	pk := &partKeys{expiring: map[uint64]int64{}}
	bad := fmt.Errorf("%w: saved count of %d bytes", ErrCorrupt, len(v))
	n, i := binary.Varint(v)
	if i <= 0 {
		return nil, bad
	}
	pk.n, v = n, v[i:]
	m, i := binary.Uvarint(v)
	if i <= 0 || m > uint64(len(v)) {
		return nil, bad
	}
	v = v[i:]
	for range m {
		b, i := binary.Uvarint(v)
		if i <= 0 {
			return nil, bad
		}
		v = v[i:]
		n, j := binary.Varint(v)
		if j <= 0 {
			return nil, bad
		}
		v = v[j:]
		pk.expiring[b] += n
	}
	if len(v) != 0 {
		return nil, bad
	}
	return pk, nil
}
