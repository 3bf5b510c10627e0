//go:build unix

package badgerdb

import (
	"errors"
	"os"
	"syscall"
)

// held reports whether someone holds Badger's lock: an flock on the
// directory itself (dir/LOCK only holds the owner's pid). Cost: an open and
// a non-blocking flock, released at once.
func held(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
