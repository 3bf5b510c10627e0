package providers

import (
	"fmt"
	"time"
)

// MaxRedrives bounds redrive.max: how many times one DLQ entry (and the
// entries its re-drives leave) may be re-driven.
const MaxRedrives = 10

// Redrive is a provider's automatic re-drive policy (redrive in the
// providers file): `dlq serve` replays its DLQ entries with reason
// exhausted once they are After old, at most Max times per entry, only
// while the destination's breaker is closed. Permanent entries are never
// re-driven.
type Redrive struct {
	After time.Duration
	Max   int
}

type redriveConfig struct {
	After string `yaml:"after"`
	Max   int    `yaml:"max"`
}

// build checks a redrive block: after a positive duration, max 1 to
// MaxRedrives.
func (c *redriveConfig) build() (*Redrive, []error) {
	var errs []error
	r := &Redrive{Max: c.Max}
	if c.After == "" {
		errs = append(errs, fmt.Errorf("redrive.after: required: how old an exhausted DLQ entry must be before it is replayed (such as 1h)"))
	} else if d, err := parseDuration(c.After); err != nil {
		errs = append(errs, fmt.Errorf("redrive.after: %w", err))
	} else {
		r.After = d
	}
	if c.Max < 1 || c.Max > MaxRedrives {
		errs = append(errs, fmt.Errorf("redrive.max: want 1 to %d re-drives per entry, got %d", MaxRedrives, c.Max))
	}
	return r, errs
}
