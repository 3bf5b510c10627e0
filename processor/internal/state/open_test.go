package state

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hookline/hookline/pkg/badgerdb"
)

// TestOpenOrReset: a directory of garbage fails Open with an error naming
// it; OpenOrReset deletes Badger's files (only those) and opens afresh; a
// healthy directory is opened as it is; a directory in use is never reset.
func TestOpenOrReset(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"MANIFEST":    "this is not a manifest",
		"KEYREGISTRY": "nor a key registry",
		"000001.sst":  "nor a table",
		"000001.vlog": "nor a value log",
		"notes.txt":   "not Badger's: must survive a reset",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open of garbage: err = %v, want an error naming %s", err, dir)
	}

	var logs bytes.Buffer
	s, reset, err := OpenOrReset(Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open or reset: %v", err)
	}
	if !reset {
		t.Error("reset = false, want true")
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning logged: %q", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("a file that is not Badger's was deleted: %v", err)
	}
	mustApply(t, s, []Change{{Partition: 0, Key: "k", Value: []byte("v")}}, map[int32]int64{0: 1})

	// In use: not reset, the data stays.
	if _, reset, err := OpenOrReset(Options{Dir: dir}); !errors.Is(err, badgerdb.ErrHeld) || reset {
		t.Errorf("open or reset of a directory in use: reset=%t err=%v, want badgerdb.ErrHeld and no reset", reset, err)
	}
	wantValue(t, s, 0, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, reset, err = OpenOrReset(Options{Dir: dir})
	if err != nil || reset {
		t.Fatalf("open or reset of a healthy directory: reset=%t err=%v", reset, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	wantValue(t, s, 0, "k", "v")
	wantCheckpoint(t, s, 0, 1, true)
}

// recorder keeps the levels of log records (Badger logs from several
// goroutines).
type recorder struct {
	slog.Handler
	mu     *sync.Mutex
	levels *[]slog.Level
}

func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.levels = append(*r.levels, rec.Level)
	return nil
}

// TestBadgerLogs: Badger's info lines (it logs several on every open and
// close) arrive at Debug, never at Info.
func TestBadgerLogs(t *testing.T) {
	var levels []slog.Level
	h := recorder{Handler: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}), mu: new(sync.Mutex), levels: &levels}
	s, err := Open(Options{Dir: t.TempDir(), Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, []Change{{Partition: 0, Key: "k", Value: []byte("v")}}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(levels) == 0 {
		t.Fatal("no Badger log at all: the adapter is not wired")
	}
	for _, l := range levels {
		if l == slog.LevelInfo {
			t.Errorf("Badger logged at Info")
		}
	}
}
