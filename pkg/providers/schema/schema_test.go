package schema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/glob"
)

// TestCheckBounded: an Error lists at most maxPayloadProblems violations,
// each at most maxPayloadProblemSize bytes.
func TestCheckBounded(t *testing.T) {
	long := strings.Repeat("a", 2*maxPayloadProblemSize)
	names := []string{long, "b", "c", "d", "e", "f", "g"}
	var props, body []string
	for _, n := range names {
		props = append(props, `"`+n+`": {"type": "integer"}`)
		body = append(body, `"`+n+`": "s"`)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "many.json"), []byte(`{"type": "object", "properties": {`+strings.Join(props, ",")+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var s Set
	if err := s.Add(glob.MustCompile("*"), dir, "many.json"); err != nil {
		t.Fatal(err)
	}
	err := s.Check("x", []byte("{"+strings.Join(body, ",")+"}"))
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %v", err)
	}
	if pe.Schema != "many.json" {
		t.Errorf("Schema = %q, want many.json", pe.Schema)
	}
	if len(pe.Problems) != maxPayloadProblems {
		t.Errorf("%d problems, want %d: %q", len(pe.Problems), maxPayloadProblems, pe.Problems)
	}
	for _, p := range pe.Problems {
		if len(p) > maxPayloadProblemSize {
			t.Errorf("problem of %d bytes: %q", len(p), p)
		}
	}
}

// TestZeroSetChecksNothing: without entries every body passes.
func TestZeroSetChecksNothing(t *testing.T) {
	var s Set
	if err := s.Check("x", []byte("not json")); err != nil || s.Len() != 0 {
		t.Fatalf("Check = %v, Len = %d", err, s.Len())
	}
}
