package state

import "fmt"

// DefaultMemory is Options.Memory when unset (HOOKLINE_STATE_MEMORY): with
// it, a processor whose store holds 10 million keys stays under 300 MB of
// RSS (make bench-state).
const DefaultMemory = 128 << 20

// MinMemory is the smallest Options.Memory: below it Badger's memtables get
// too small for a transaction of one transaction's worth of changes.
const MinMemory = 32 << 20

// Memory is how Options.Memory is spent.
type Memory struct {
	// MemTable is the size of each of Badger's two memtables (skiplist
	// arenas, allocated whole): an eighth each (16 MiB of 128).
	MemTable int64
	// BlockCache holds decompressed table blocks: an eighth.
	BlockCache int64
	// IndexCache holds table indexes and bloom filters: a sixteenth.
	// Indexes that do not fit are read again from the table files.
	IndexCache int64
	// Recent is the cache of states Apply wrote (Get's first stop): three
	// sixteenths, 24 MiB of 128: the latest 100,000 to 190,000 states.
	Recent int64
	// Restore is the budget that restores of several partitions reserve
	// before they read (Reserve), and bulk loads their key tracking: the
	// remaining three eighths, 48 MiB of 128 (a restore reading at full
	// speed reserves about 31 MiB). Held only while partitions restore.
	Restore int64
	// Mapped is the file-backed RSS (RssFile: Badger's memory-mapped table
	// files and write-ahead logs, the binary) above which the store hands
	// its table pages back to the kernel (trim_linux.go): half of the
	// total, checked every second. It is on top of the total.
	Mapped int64
}

// Split divides total bytes (DefaultMemory when zero or less, at least
// MinMemory) between Badger, the cache of recent states and restores.
func Split(total int64) Memory {
	if total <= 0 {
		total = DefaultMemory
	}
	total = max(total, MinMemory)
	s := total / 16
	return Memory{MemTable: 2 * s, BlockCache: 2 * s, IndexCache: s, Recent: 3 * s, Restore: total - 10*s, Mapped: total / 2}
}

func (m Memory) String() string {
	return fmt.Sprintf("memtables 2x%d MiB, block cache %d MiB, index cache %d MiB, recent states %d MiB, restore %d MiB, mapped files trimmed above %d MiB",
		m.MemTable>>20, m.BlockCache>>20, m.IndexCache>>20, m.Recent>>20, m.Restore>>20, m.Mapped>>20)
}
