package timerslack

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

const supported = true

func current() (time.Duration, error) {
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("reading the timer slack: %w", err)
	}
	return time.Duration(ns), nil
}

func set(d time.Duration) error {
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the timer slack to %v: %w", d, err)
	}
	return nil
}
