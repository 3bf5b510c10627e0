package consume

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestNoTwoWayFileReferences keeps the package's files in layers (issue
// 31): no file uses a name (a type, function, method, field, variable or
// constant) declared in a file that uses a name declared in it. The
// files are type-checked against the export data of their imports, so a
// method or a field counts where it is declared, as the compiler resolves
// it; the test files are left out.
func TestNoTwoWayFileReferences(t *testing.T) {
	refs := fileReferences(t)
	var both []string
	for a, to := range refs {
		for b, where := range to {
			if back, ok := refs[b][a]; ok && a < b {
				both = append(both, fmt.Sprintf("%s ↔ %s (%s uses %s; %s uses %s)", a, b, a, where, b, back))
			}
		}
	}
	sort.Strings(both)
	for _, s := range both {
		t.Error(s)
	}
}

// fileReferences type-checks the package's non-test files and returns,
// per file, the other files it uses names of, each with the first few
// names.
func fileReferences(t *testing.T) map[string]map[string]string {
	t.Helper()
	exports := exportData(t)
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check("consume", fset, files, info)
	if err != nil {
		t.Fatalf("type-check: %v", err)
	}
	refs := map[string]map[string]string{}
	add := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		from, to := filepath.Base(fset.Position(at).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			return
		}
		if refs[from] == nil {
			refs[from] = map[string]string{}
		}
		if w := refs[from][to]; !slices.Contains(strings.Split(w, ", "), obj.Name()) && strings.Count(w, ",") < 3 {
			refs[from][to] = strings.TrimPrefix(w+", "+obj.Name(), ", ")
		}
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	return refs
}

// exportData maps every package this one imports, directly or not, to
// its export data file, from the go command (which builds what is
// missing into its cache).
func exportData(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	m := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		m[p.ImportPath] = p.Export
	}
	return m
}
