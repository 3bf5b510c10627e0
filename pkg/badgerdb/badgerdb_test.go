package badgerdb

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// mustOpen opens a DB in dir, closed at the end of the test.
func mustOpen(tb testing.TB, opts badger.Options, log *slog.Logger) *badger.DB {
	tb.Helper()
	db, err := Open(opts, log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// TestHeld: a directory an open DB holds gives a *HeldError naming it,
// which is ErrHeld; once closed, it opens.
func TestHeld(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the held probe is an flock (unix)")
	}
	dir := t.TempDir()
	first, err := Open(badger.DefaultOptions(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(badger.DefaultOptions(dir), nil)
	var he *HeldError
	if !errors.Is(err, ErrHeld) || !errors.As(err, &he) || he.Dir != dir || he.Err == nil {
		t.Fatalf("second open: %v; want a *HeldError of %s", err, dir)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, badger.DefaultOptions(dir), nil)
}

// TestNotHeld: a directory Badger cannot read, that nobody holds, gives
// Badger's error, not ErrHeld.
func TestNotHeld(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(badger.DefaultOptions(dir), nil)
	if err == nil {
		db.Close()
		t.Fatal("a garbage MANIFEST opens")
	}
	if errors.Is(err, ErrHeld) {
		t.Errorf("garbage MANIFEST: %v is ErrHeld", err)
	}
}

// TestLogger: Badger's info lines arrive at Debug with component=badger;
// a logger at Info drops them.
func TestLogger(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			mustOpen(t, badger.DefaultOptions(t.TempDir()), slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
			got := strings.Contains(buf.String(), "level=DEBUG") && strings.Contains(buf.String(), "component=badger")
			if got != tc.want {
				t.Errorf("logs at %s: %q; want Badger's info lines at Debug: %v", tc.level, buf.String(), tc.want)
			}
			if strings.Contains(buf.String(), "level=INFO") {
				t.Errorf("a Badger line at Info: %q", buf.String())
			}
		})
	}
}

// TestInMemory: an in-memory DB needs no directory.
func TestInMemory(t *testing.T) {
	db := mustOpen(t, badger.DefaultOptions("").WithInMemory(true), nil)
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
}
