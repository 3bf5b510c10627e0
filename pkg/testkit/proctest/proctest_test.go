package proctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBinaryPathFromBinDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOOKLINE_BIN_DIR", dir)
	if _, err := BinaryPath("retrier"); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("missing binary: err %v, want one saying to run make build", err)
	}
	want := filepath.Join(dir, "retrier")
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := BinaryPath("retrier"); err != nil || got != want {
		t.Fatalf("BinaryPath = %q, %v; want %q", got, err, want)
	}
}

func TestBinaryPathBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("go build ./dlq: not in -short")
	}
	t.Setenv("HOOKLINE_BIN_DIR", "")
	t.Cleanup(func() { // this test's builds only: it is the package's one caller
		built.Lock()
		defer built.Unlock()
		os.RemoveAll(built.dir)
		built.dir, built.paths = "", nil
	})
	p, err := BinaryPath("dlq")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Fatalf("built %s: mode %v; want an executable", p, fi.Mode())
	}
	if again, err := BinaryPath("dlq"); err != nil || again != p {
		t.Fatalf("second call: %q, %v; want the same build %q", again, err, p)
	}
	if _, err := BinaryPath("no-such-service"); err == nil || !strings.Contains(err.Error(), "go build ./no-such-service") {
		t.Fatalf("unknown service: err %v", err)
	}
}

// TestRepoRoot: the folder holding go.mod and compose/kafka.sh, wherever
// this package sits in the tree (the test kits moved once: a fixed
// "../.." then pointed into pkg/).
func TestRepoRoot(t *testing.T) {
	root := RepoRoot()
	for _, f := range []string{"go.mod", filepath.Join("compose", "kafka.sh")} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("RepoRoot %s: %v", root, err)
		}
	}
}
