package state

import (
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Checkpoints returns the checkpoint of every partition the store holds
// one for: partition -> the next changelog offset to read. One prefix
// scan over the checkpoint keys (one per partition).
func (s *Store) Checkpoints() (map[int32]int64, error) {
	out := map[int32]int64{}
	s.touch()
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{kindCheckpoint}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if len(k) != 5 {
				continue
			}
			p := int32(binary.BigEndian.Uint32(k[1:]))
			if err := item.Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("%w: checkpoint of partition %d has %d bytes, want 8", ErrCorrupt, p, len(v))
				}
				out[p] = int64(binary.BigEndian.Uint64(v))
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: checkpoints: %w", err)
	}
	return out, nil
}
