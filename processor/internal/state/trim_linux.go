//go:build linux

package state

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Badger memory-maps its table files and reads them through the maps: every
// page it touches (a block read, a compaction, the key count's scan) stays
// in the process's RSS, up to the whole store (600 MB of tables for 10
// million keys), although the kernel can drop such clean file pages at any
// time. trimTables hands them back: madvise(MADV_PAGEOUT) on the maps of the
// store's *.sst files, which unmaps their pages and lets the kernel reclaim
// them; the next read of such a page goes to the disk (or to the page cache,
// when another mapping keeps it).
//
// PAGEOUT and not DONTNEED: the maps are found in /proc/self/maps, and
// Badger may unmap a table (a compaction deletes it) between that read and
// the madvise, letting the address be reused by other memory. PAGEOUT only
// ever reclaims (an anonymous page goes to swap, or stays without swap), so
// advice that lands on reused memory costs at most a page fault;
// DONTNEED would zero it.

// madvPageout is MADV_PAGEOUT (Linux 5.4); the syscall package lacks it.
const madvPageout = 21

// Before the pageout, each map is also advised MADV_RANDOM: without it, a
// read that faults in one page of a table gets the kernel's readahead and
// fault-around, about 64 KiB mapped for a 4 KiB block, and random reads map
// the whole store again within milliseconds. With it, a read maps the pages
// of its block. Compactions then read evicted pages without readahead.

// fadvDontneed is POSIX_FADV_DONTNEED.
const fadvDontneed = 4

// dropCachedTables asks the kernel to drop the page cache of the store's
// *.sst files (posix_fadvise DONTNEED, which leaves mapped and dirty pages
// alone), then trims their maps. Open calls it: a store written a moment
// ago (a restart, a restore) has its tables in the page cache, and a read
// fault maps up to 16 cached neighbours of the page it needs
// (fault-around), which MADV_RANDOM does not stop; the first random reads
// would map hundreds of MB before the first trim.
func dropCachedTables(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontneed, 0, 0)
		f.Close()
	}
	trimTables(dir)
}

// rssFileBytes returns the process's RssFile: file-backed pages mapped,
// which are mostly Badger's tables and write-ahead logs.
func rssFileBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("RssFile:")); ok {
			f := strings.Fields(string(v))
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10, true
				}
			}
		}
	}
	return 0, false
}

// trimTables advises MADV_PAGEOUT on every map of a *.sst file in dir and
// returns how many it advised. Errors (no /proc, an old kernel refusing the
// advice) end it quietly: trimming is an optimisation.
func trimTables(dir string) int {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		path := strings.Join(fields[5:], " ")
		if filepath.Dir(path) != abs || !strings.HasSuffix(path, ".sst") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		for _, advice := range []uintptr{syscall.MADV_RANDOM, madvPageout} {
			if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), advice); errno != 0 {
				return n
			}
		}
		n++
	}
	return n
}
