package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstanceIDPersistsPerDir(t *testing.T) {
	a, b := t.TempDir(), filepath.Join(t.TempDir(), "nested", "state")
	idA, err := InstanceID(a)
	if err != nil {
		t.Fatal(err)
	}
	again, err := InstanceID(a)
	if err != nil || again != idA {
		t.Fatalf("second read = %q, %v; want %q (stable across restarts)", again, err, idA)
	}
	idB, err := InstanceID(b)
	if err != nil {
		t.Fatal(err)
	}
	if idB == idA {
		t.Fatalf("two state dirs got the same instance id %q", idA)
	}
	host, _ := os.Hostname()
	if host != "" && !strings.HasPrefix(idA, host+"-") {
		t.Fatalf("instance id %q does not start with the hostname %q", idA, host)
	}
	if err := os.WriteFile(filepath.Join(a, instanceFile), []byte("bad id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := InstanceID(a); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Fatalf("garbled file: err = %v, want one saying what to do", err)
	}
}
