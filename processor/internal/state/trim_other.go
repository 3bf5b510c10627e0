//go:build !linux

package state

// Trimming Badger's mapped table pages is Linux-only (trim_linux.go).
func rssFileBytes() (int64, bool) { return 0, false }

func trimTables(string) int { return 0 }

func dropCachedTables(string) {}
