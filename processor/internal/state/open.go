package state

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/hookline/hookline/pkg/badgerdb"
)

// badgerOptions tunes Badger for a small footprint on a 2-core host, its
// memory sized from Options.Memory (Split). Badger's defaults aim at large
// servers: 5 memtables of 64 MiB, a 256 MiB block cache, 1 GiB value-log
// files, 4 compactors. A dedup store holds small values (about 30 bytes in
// the stored form, decide.EncodeStored, with a key of about 40) and is a
// cache of the changelog, so:
//
//   - NumMemtables 2 of Split's MemTable (16 MiB each by default): a
//     transaction may hold 15% of a memtable, which Apply handles by
//     chunking.
//   - BlockCacheSize (Snappy-compressed blocks need a cache) and
//     IndexCacheSize, which bounds the table indexes and bloom filters that
//     Badger would otherwise keep in memory for every table: an eighth and
//     a sixteenth of Memory.
//   - ValueLogFileSize 16 MiB: values below the value threshold (1 MiB, an
//     eighth of a memtable below 8 MiB: Badger refuses a threshold above
//     the 15% of a memtable one write may take) live in the LSM tree, so the
//     value log is nearly empty; small files keep its mmap and its GC small.
//   - NumCompactors 2 (Badger's minimum), NumLevelZeroTables 4 and stall at
//     10: compaction keeps up on 2 cores without bursts of goroutines.
//   - ChecksumVerificationMode OnBlockRead: a block read from disk is
//     checked (a CRC per 4 KiB block missing from the cache), so a corrupt
//     file gives read errors, not wrong states.
//   - NumVersionsToKeep 1, DetectConflicts false (one writer per partition,
//     partitions are disjoint key prefixes), MetricsEnabled false (Badger's
//     expvar metrics are process-global), SyncWrites false (the changelog is
//     the durable copy; a lost tail is re-read from the checkpoint).
//
// Table files are memory-mapped by Badger: pages it reads count in the
// process's RSS until the kernel or the store's trim drops them (trim_linux.go).
// Measured figures: docs/performance.md, make bench-state.
func badgerOptions(o Options) badger.Options {
	m := Split(o.Memory)
	opts := badger.DefaultOptions(o.Dir)
	if o.InMemory {
		opts = badger.DefaultOptions("").WithInMemory(true)
	}
	return opts.
		WithMemTableSize(m.MemTable).
		WithNumMemtables(2).
		WithBlockCacheSize(m.BlockCache).
		WithIndexCacheSize(m.IndexCache).
		WithValueLogFileSize(16 << 20).
		WithValueThreshold(min(1<<20, m.MemTable/8)).
		WithNumCompactors(2).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(10).
		WithNumGoroutines(2).
		WithNumVersionsToKeep(1).
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithSyncWrites(false).
		WithCompression(options.Snappy).
		WithChecksumVerificationMode(options.OnBlockRead)
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}

// OpenOrReset opens the store like Open; if Badger cannot open the directory
// (corrupt or unreadable files), it logs a warning, deletes Badger's files
// from it and opens an empty store: restore then rebuilds every partition
// from the changelog. reset reports that this happened.
//
// It never resets a directory another process (or another Store) has open:
// that is an error. Only Badger's own files are deleted (MANIFEST,
// KEYREGISTRY, DISCARD, LOCK (a pid file) and *.sst, *.vlog, *.mem, with their rewrite
// temporaries); anything else in the directory, such as lost+found on a
// mounted volume, stays.
func OpenOrReset(o Options) (s *Store, reset bool, err error) {
	s, err = Open(o)
	if err == nil || o.InMemory || o.Dir == "" {
		return s, false, err
	}
	if errors.Is(err, badgerdb.ErrHeld) {
		return nil, false, fmt.Errorf("%w (not resetting)", err)
	}
	logger(o.Logger).Warn("state: cannot open the Badger directory, deleting it to rebuild from the changelog", "dir", o.Dir, "err", err)
	if rmErr := removeBadgerFiles(o.Dir); rmErr != nil {
		return nil, false, errors.Join(err, fmt.Errorf("state: reset %s: %w", o.Dir, rmErr))
	}
	s, err2 := Open(o)
	if err2 != nil {
		return nil, true, errors.Join(err, fmt.Errorf("state: after reset: %w", err2))
	}
	return s, true, nil
}

func isBadgerFile(name string) bool {
	switch name {
	case "MANIFEST", "MANIFEST-REWRITE", "KEYREGISTRY", "REWRITE-KEYREGISTRY", "DISCARD", "LOCK":
		return true
	}
	for _, ext := range []string{".sst", ".vlog", ".mem"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

func removeBadgerFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if isBadgerFile(e.Name()) {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}
