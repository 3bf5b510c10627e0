//go:build linux

package state

import (
	"fmt"
	"testing"
)

// TestTrimTables: after a store's tables were read through Badger's maps,
// trimTables advises every *.sst map of the store's directory (and of no
// other), the file-backed RSS does not grow from it, and every key reads
// the same afterwards.
func TestTrimTables(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	var changes []Change
	for i := range 50_000 {
		changes = append(changes, Change{Partition: int32(i % 4), Key: fmt.Sprintf("key-%06d", i), Value: fmt.Appendf(nil, "value-%d", i)})
	}
	mustApply(t, s, changes, nil)
	if err := s.Close(); err != nil { // flushes the memtable into tables
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	read := func() {
		for i := 0; i < len(changes); i += 7 {
			wantValue(t, s, changes[i].Partition, changes[i].Key, string(changes[i].Value))
		}
	}
	s.recent = newRecent(0) // read through Badger
	read()
	before, ok := rssFileBytes()
	if !ok {
		t.Skip("no RssFile in /proc/self/status")
	}
	if n := trimTables(t.TempDir()); n != 0 {
		t.Errorf("trimTables of another directory advised %d maps", n)
	}
	if n := trimTables(dir); n == 0 {
		t.Fatal("trimTables advised no map of the store's tables")
	}
	after, _ := rssFileBytes()
	t.Logf("RssFile %d kB before the trim, %d kB after", before>>10, after>>10)
	if after > before {
		t.Errorf("RssFile grew from %d to %d kB", before>>10, after>>10)
	}
	read()
}
