// Package badgerdb opens Badger databases the way hookline's services do
// (the processor's state store, dlq's trace index): Badger's own logs go to
// the service's slog logger, a panic inside badger.Open is an error, and a
// directory another process (or another open DB of this one) holds is a
// *HeldError, so callers branch with errors.Is(err, ErrHeld) rather than on
// Badger's message. The tuning stays each caller's: Open takes its options.
package badgerdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// ErrHeld is what a *HeldError is (errors.Is): the directory is open
// elsewhere.
var ErrHeld = errors.New("badger directory held by another process")

// HeldError reports that Badger could not take its directory lock: another
// process, or another DB of this process, has the directory open.
type HeldError struct {
	// Dir is the directory.
	Dir string
	// Err is Badger's error.
	Err error
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is held by another process or DB (Badger's directory lock): %v", e.Dir, e.Err)
}

// Unwrap returns Badger's error.
func (e *HeldError) Unwrap() error { return e.Err }

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Open opens (or creates) the Badger DB opts describe, with its logger
// replaced by one sending to log (nil discards): Badger's info lines (every
// compaction, every flush) and debug at Debug, its warnings at Warn, its
// errors at Error. When Badger cannot open a directory whose lock someone
// holds, the error is a *HeldError; a panic inside badger.Open (Badger
// asserts in places; a corrupt file must not take the process down) is
// returned as an error. Cost: badger.Open's, plus one flock probe of the
// directory when it fails.
func Open(opts badger.Options, log *slog.Logger) (*badger.DB, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	db, err := open(opts.WithLogger(logger{log}))
	if err != nil && !opts.InMemory {
		for i, dir := range []string{opts.Dir, opts.ValueDir} {
			if dir != "" && (i == 0 || dir != opts.Dir) && held(dir) {
				return nil, &HeldError{Dir: dir, Err: err}
			}
		}
	}
	return db, err
}

func open(opts badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("badger panicked: %v", r)
		}
	}()
	return badger.Open(opts)
}

// logger is Badger's logger on slog, with "component"="badger".
type logger struct{ l *slog.Logger }

func (b logger) log(level slog.Level, format string, args []any) {
	if !b.l.Enabled(context.Background(), level) {
		return
	}
	b.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}

func (b logger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b logger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b logger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b logger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug, f, a) }

var _ badger.Logger = logger{}
