//go:build unix

package state

import (
	"errors"
	"os"
	"syscall"
)

// locked reports whether someone holds Badger's lock: an flock on the
// directory itself (dir/LOCK only holds the owner's pid).
func locked(dir string) bool {
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
