//go:build !linux

package timerslack

import (
	"errors"
	"time"
)

// Timer slack is a Linux setting; elsewhere Ensure changes nothing.
const supported = false

func current() (time.Duration, error) { return 0, nil }

func set(time.Duration) error { return errors.ErrUnsupported }
