// Package docs holds hookline's documentation pages and the test that keeps
// them honest: every relative link and #anchor in README.md and docs/*.md
// resolves, every "DESIGN §N" citation in the code names a section of
// docs/design.md, and every environment variable the services read is in
// the configuration table of docs/operating.md; examples_test.go runs the
// README's examples.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/hookline/hookline/pkg/bench/report"
	"github.com/hookline/hookline/pkg/envconf/envconftest"
)

// root is the repository's root, relative to this package.
const root = ".."

// pages returns README.md and every docs/*.md, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	md, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(md) == 0 {
		t.Fatal("no docs/*.md")
	}
	return append([]string{filepath.Join(root, "README.md")}, md...)
}

// page is one markdown file as the link check reads it: its lines outside
// fenced code blocks, each with its line number.
type page struct {
	path  string
	lines []string // "" for a line inside a fence, so numbers stay right
}

func readPage(t *testing.T, path string) page {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := page{path: path}
	fence := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			p.lines = append(p.lines, "")
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
			p.lines = append(p.lines, "")
		case fence != "":
			p.lines = append(p.lines, "")
		default:
			p.lines = append(p.lines, line)
		}
	}
	return p
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlNameRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	linkRE     = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]*(?:\([^()]*\)[^()\s]*)*)(?:\s+"[^"]*")?\)`)
	tagRE      = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor for a heading's text: the text as rendered (code
// spans' contents, links' text, no HTML tags), lower-cased, every
// character but letters, digits, spaces, '-' and '_' dropped, and each
// space a '-'.
func Slug(heading string) string {
	s := linkRE.ReplaceAllString(heading, "$1")
	s = tagRE.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns the anchors of p: each heading's slug (a repeated slug
// gets -1, -2, ... as on GitHub) and every <a name> or <a id>.
func (p page) anchors() map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range p.lines {
		for _, m := range htmlNameRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// links returns the targets of p's markdown links outside code, with
// their line numbers.
func (p page) links() (targets []string, lineNos []int) {
	for i, line := range p.lines {
		line = codeSpanRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[2])
			lineNos = append(lineNos, i+1)
		}
	}
	return targets, lineNos
}

// TestLinks: every relative link of README.md and docs/*.md names a file
// or directory of the repository, and every #anchor an anchor of its page.
func TestLinks(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		path = filepath.Clean(path)
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		anchorsOf[path] = readPage(t, path).anchors()
		return anchorsOf[path]
	}
	checked := 0
	for _, path := range pages(t) {
		targets, lineNos := readPage(t, path).links()
		for i, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", path, lineNos[i], target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchors(dest)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no anchor #%s", path, lineNos[i], target, dest, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: the link reader is broken", checked)
	}
}

// TestSlug holds Slug to GitHub's anchors of headings this repository has.
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Is it healthy? `dlq status`", "is-it-healthy-dlq-status"},
		{"Alerts that reach a person: `make observe`", "alerts-that-reach-a-person-make-observe"},
		{"Contract changes (DESIGN §2, §6 and the schemas)", "contract-changes-design-2-6-and-the-schemas"},
		{"Routes (issue 22): the operators' side", "routes-issue-22-the-operators-side"},
		{"6. Processor", "6-processor"},
		{"The HTTP surfaces as OpenAPI 3.1", "the-http-surfaces-as-openapi-31"},
		{"Secure Kafka: TLS, SASL and ACLs", "secure-kafka-tls-sasl-and-acls"},
		{"HOOKLINE_STATE_DIR [docs](x.md)", "hookline_state_dir-docs"},
	} {
		if got := Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// goFiles returns the repository's .go files, skipping hidden and data
// directories; keep says which directories (relative to root) to enter.
func goFiles(t *testing.T, keep func(dir string) bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "data" || name == "testdata" || !keep(filepath.ToSlash(rel))) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// citeRE finds "DESIGN §6", "DESIGN.md §6", "DESIGN §6, §7", "(DESIGN\n// §6)".
var (
	citeRE    = regexp.MustCompile(`DESIGN(?:\.md)?(?:\s|//)*(§[0-9]+(?:\.[0-9]+)*(?:\s*(?:,|and)\s*§[0-9]+(?:\.[0-9]+)*)*)`)
	sectionRE = regexp.MustCompile(`§([0-9]+(?:\.[0-9]+)*)`)
	numberRE  = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)*)\.?\s`)
)

// TestDesignCitations: every "DESIGN §N" in the code (and in the docs)
// names a numbered section heading of docs/design.md, so a reader of a
// clone alone can follow it.
func TestDesignCitations(t *testing.T) {
	sections := map[string]bool{}
	for _, line := range readPage(t, filepath.Join(root, "docs", "design.md")).lines {
		if m := headingRE.FindStringSubmatch(line); m != nil {
			if n := numberRE.FindStringSubmatch(m[2] + " "); n != nil {
				sections[n[1]] = true
			}
		}
	}
	files := append(goFiles(t, func(string) bool { return true }), pages(t)...)
	cites := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range citeRE.FindAllStringSubmatchIndex(string(b), -1) {
			line := 1 + strings.Count(string(b[:m[0]]), "\n")
			for _, s := range sectionRE.FindAllStringSubmatch(string(b[m[2]:m[3]]), -1) {
				cites++
				if !sections[s[1]] {
					t.Errorf("%s:%d cites DESIGN §%s; docs/design.md has no section %s (it has %v)", path, line, s[1], s[1], slices.Sorted(maps.Keys(sections)))
				}
			}
		}
	}
	if cites < 30 {
		t.Errorf("only %d DESIGN § citations found: the citation reader is broken", cites)
	}
}

// envNameRE is what an environment variable's name looks like here.
var envNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$`)

// envReaders returns, from pkg/envconf's source, which argument of each of
// its functions and Reader methods is a variable's name (the parameter
// called name): method name (or "envconf.Func") -> argument index.
func envReaders(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "pkg", "envconf", "envconf.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !fd.Name.IsExported() {
			continue
		}
		i := 0
		for _, field := range fd.Type.Params.List {
			for _, n := range field.Names {
				if n.Name == "name" {
					key := "envconf." + fd.Name.Name
					if fd.Recv != nil {
						key = "." + fd.Name.Name
					}
					out[key] = i
				}
				i++
			}
		}
	}
	if len(out) < 5 {
		t.Fatalf("pkg/envconf: only %v read a variable by name", out)
	}
	return out
}

// serviceEnv returns the environment variables the services read, from
// their code: the names given to pkg/envconf's getters (Reader methods,
// envconf.Parse, envconf.Override), and to os.Getenv, os.LookupEnv and
// the lookup functions passed around in their place, as string literals
// or string constants. Tests, test kits and benchmarks are not services.
func serviceEnv(t *testing.T) map[string][]string {
	t.Helper()
	readers := envReaders(t)
	files := goFiles(t, func(dir string) bool {
		return dir != "docs" && !strings.HasPrefix(dir, "pkg/testkit") && !strings.HasPrefix(dir, "pkg/bench")
	})
	fset := token.NewFileSet()
	var parsed []*ast.File
	consts := map[string]string{} // "pkg.Name" and "Name" -> value
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := stringLit(vs.Values[i]); ok {
							consts[f.Name.Name+"."+n.Name] = v
							consts[n.Name] = v
						}
					}
				}
			}
		}
	}
	value := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			return stringLit(e)
		case *ast.Ident:
			v, ok := consts[e.Name]
			return v, ok
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				v, ok := consts[x.Name+"."+e.Sel.Name]
				return v, ok
			}
		}
		return "", false
	}
	out := map[string][]string{}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			arg := -1
			switch fn := call.Fun.(type) {
			case *ast.IndexExpr: // envconf.Parse[T](...)
				if sel, ok := fn.X.(*ast.SelectorExpr); ok {
					if i, ok := readers["envconf."+sel.Sel.Name]; ok {
						arg = i
					}
				}
			case *ast.SelectorExpr:
				x, _ := fn.X.(*ast.Ident)
				switch {
				case x != nil && x.Name == "os" && (fn.Sel.Name == "Getenv" || fn.Sel.Name == "LookupEnv"):
					arg = 0
				case x != nil && x.Name == "envconf":
					if i, ok := readers["envconf."+fn.Sel.Name]; ok {
						arg = i
					}
				default:
					if i, ok := readers["."+fn.Sel.Name]; ok {
						arg = i
					}
				}
			case *ast.Ident:
				if l := strings.ToLower(fn.Name); strings.Contains(l, "lookup") || strings.Contains(l, "getenv") {
					arg = 0
				}
			}
			if arg < 0 || arg >= len(call.Args) {
				return true
			}
			if v, ok := value(call.Args[arg]); ok && envNameRE.MatchString(v) {
				pos := fset.Position(call.Pos())
				out[v] = append(out[v], fmt.Sprintf("%s:%d", pos.Filename, pos.Line))
			}
			return true
		})
	}
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(l.Value)
	return v, err == nil
}

// TestEnvDocumented: every environment variable the services read is named
// (in backquotes) in a row of the configuration table, the first table after
// "## Configuration" in docs/operating.md (as envconftest reads it).
func TestEnvDocumented(t *testing.T) {
	env := serviceEnv(t)
	if len(env) < 30 {
		t.Fatalf("only %d variables found in the services' code (%v): the reader is broken", len(env), slices.Sorted(maps.Keys(env)))
	}
	rows := envconftest.Table(t, filepath.Join(root, "docs", "operating.md"))
	for name, where := range env {
		if !slices.ContainsFunc(rows, func(r envconftest.Row) bool { return strings.Contains(r.Text, "`"+name+"`") }) {
			t.Errorf("%s (read at %s) is not in the configuration table of docs/operating.md", name, strings.Join(where, ", "))
		}
	}
}

// TestReadmeBenchSummary: the README's "Measured figures" table is what
// `make bench-readme` makes from docs/bench-report.json, the report kept
// from one full `make bench`; a figure edited by hand, or a report kept
// without its table, fails.
func TestReadmeBenchSummary(t *testing.T) {
	f, err := report.Read(filepath.Join(root, "docs", "bench-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := report.ReplaceSummary(readme, f)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(readme) {
		t.Errorf("README.md's bench summary is not docs/bench-report.json's: run `make bench-readme REPORT=docs/bench-report.json`")
	}
	names := map[string]bool{}
	for _, e := range f.Entries {
		names[e.Name] = true
	}
	for _, h := range report.Headlines {
		if !names[h.Name] {
			t.Errorf("docs/bench-report.json has no %q: is it a full make bench's report?", h.Name)
		}
	}
}
