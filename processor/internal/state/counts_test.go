package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestSavedCounts: Close saves the key counts and Open reads them instead of
// scanning, deleting the marker at once (a crash after Open then scans);
// counts of keys that expired while the store was closed are dropped, and a
// wiped partition's count does not come back.
func TestSavedCounts(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	var changes []Change
	for i := range 30 {
		c := Change{Partition: int32(i % 3), Key: fmt.Sprintf("k%d", i), Value: []byte("v")}
		if i%2 == 0 {
			c.ExpiresAt = time.Now().Add(time.Hour)
		}
		changes = append(changes, c)
	}
	mustApply(t, s, changes, nil)
	if err := s.WipePartition(2); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, s, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, Options{Dir: dir})
	wantKeys(t, s, 20)
	err := s.db.View(func(txn *badger.Txn) error { _, err := txn.Get([]byte{kindCountsValid}); return err })
	if !errors.Is(err, badger.ErrKeyNotFound) {
		t.Errorf("marker after Open: %v, want it deleted", err)
	}
	// Wrong saved counts: with the marker gone, Open must scan.
	wrong := binary.AppendUvarint(binary.AppendVarint(nil, 1000), 0)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(partitionPrefix(kindCounts, 0), wrong) }); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	s = mustOpen(t, Options{Dir: dir})
	wantKeys(t, s, 20)

	// Buckets that are due by the time the store opens are dropped.
	s.keys.mu.Lock()
	for _, pk := range s.keys.parts {
		for b, n := range pk.expiring {
			delete(pk.expiring, b)
			pk.expiring[1] += n // long expired
		}
	}
	s.keys.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	wantKeys(t, s, 10)
}

// crash closes s's Badger without saving the counts, as a killed process
// leaves it (Badger's own files are whole: its write-ahead log is replayed).
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.closed.Do(func() {
		close(s.stop)
		<-s.done
		if err := s.db.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
