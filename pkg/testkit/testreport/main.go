// Command testreport runs test commands that print `go test -json`, shows
// their output as go test would, and ends with how long each package and
// each top-level test (a scenario) took, slowest ten first, and one closing
// line counting the tests:
//
//	go run ./pkg/testreport [-summary FILE] 'go test -json ./...' 'go test -json -v ./pkg/e2e/'
//
// Each argument is one command, run by sh in turn; a command that fails
// stops the rest, and testreport exits with its status. A command without
// -v shows what plain go test shows (the package lines, and the whole
// output of each failed test); one with -v shows every test's output, as
// go test -v does. -summary also writes the closing line to FILE, for
// .ci/run to print last; -times writes every package's and top-level
// test's time to FILE, slowest first, one "seconds<TAB>package[ test]" a
// line (where a run's time went, beyond the ten shown).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// took is one timed package or test.
type took struct {
	name    string
	elapsed time.Duration
}

// report is what the commands' events add up to.
type report struct {
	out                     io.Writer
	verbose                 bool
	buf                     map[string][]string // package + test -> output held until the test ends
	packages, tests         []took
	passed, failed, skipped int
	failedIn                map[string]bool // packages with a failed test
}

func main() {
	summary := flag.String("summary", "", "also write the closing line to this file")
	times := flag.String("times", "", "also write every package's and top-level test's time to this file, slowest first")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testreport [-summary FILE] [-times FILE] 'go test -json PKGS' ['go test -json -v PKGS' ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	r := &report{out: os.Stdout, buf: map[string][]string{}, failedIn: map[string]bool{}}
	start := time.Now()
	status := 0
	for _, command := range flag.Args() {
		if err := r.run(command); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %s: %v\n", command, err)
			status = 1
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() > 0 {
				status = exit.ExitCode()
			}
			break
		}
	}
	closing := r.summarize(time.Since(start))
	if *times != "" {
		if err := os.WriteFile(*times, r.times(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			status = cmp.Or(status, 1)
		}
	}
	if *summary != "" {
		if err := os.WriteFile(*summary, []byte(closing+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			status = cmp.Or(status, 1)
		}
	}
	if status == 0 && r.failed > 0 {
		status = 1
	}
	os.Exit(status)
}

// run runs one command and reads its events.
func (r *report) run(command string) error {
	r.verbose = slices.Contains(strings.Fields(command), "-v")
	cmd := exec.Command("sh", "-c", command)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	scanErr := sc.Err()
	if scanErr != nil {
		_, _ = io.Copy(io.Discard, stdout) // let the command finish
	}
	return errors.Join(cmd.Wait(), scanErr)
}

// line handles one line of a command's output.
func (r *report) line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		fmt.Fprintf(r.out, "%s\n", b) // not an event: as it is
		return
	}
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "output" && e.Test == "":
		if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
			fmt.Fprint(r.out, e.Output)
		}
	case e.Action == "output" && r.verbose:
		fmt.Fprint(r.out, e.Output)
	case e.Action == "output":
		r.buf[key] = append(r.buf[key], e.Output)
	case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		r.count(e.Action)
		if e.Action == "fail" {
			fmt.Fprint(r.out, strings.Join(r.buf[key], ""))
			r.failedIn[e.Package] = true
		}
		delete(r.buf, key)
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, took{short(e.Package) + " " + e.Test, seconds(e.Elapsed)})
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		if e.Action == "fail" {
			// Tests still running when the package failed (a timeout, a
			// panic): what they printed is the best clue.
			for k, out := range r.buf {
				if strings.HasPrefix(k, e.Package+" ") {
					fmt.Fprint(r.out, strings.Join(out, ""))
					delete(r.buf, k)
				}
			}
			if !r.failedIn[e.Package] {
				r.failed++ // no test failed: the build, a panic, a timeout
			}
		}
		r.packages = append(r.packages, took{short(e.Package), seconds(e.Elapsed)})
	}
}

func (r *report) count(action string) {
	switch action {
	case "pass":
		r.passed++
	case "fail":
		r.failed++
	case "skip":
		r.skipped++
	}
}

// summarize prints the slowest packages and tests and returns the closing
// line, which it prints last.
func (r *report) summarize(total time.Duration) string {
	for _, list := range []struct {
		what  string
		items []took
	}{{"packages", r.packages}, {"tests and scenarios", r.tests}} {
		slices.SortFunc(list.items, func(a, b took) int { return cmp.Compare(b.elapsed, a.elapsed) })
		fmt.Fprintf(r.out, "slowest %s:\n", list.what)
		for _, t := range list.items[:min(10, len(list.items))] {
			fmt.Fprintf(r.out, "  %8s  %s\n", t.elapsed.Round(100*time.Millisecond), t.name)
		}
	}
	closing := fmt.Sprintf("tests: %d passed, %d failed, %d skipped", r.passed, r.failed, r.skipped)
	fmt.Fprintf(r.out, "%d packages in %s\n%s\n", len(r.packages), total.Round(time.Second), closing)
	return closing
}

// times lists every package and top-level test, slowest first.
func (r *report) times() []byte {
	var b strings.Builder
	all := append(slices.Clone(r.packages), r.tests...)
	slices.SortStableFunc(all, func(a, b took) int { return cmp.Compare(b.elapsed, a.elapsed) })
	for _, t := range all {
		fmt.Fprintf(&b, "%.1f\t%s\n", t.elapsed.Seconds(), t.name)
	}
	return []byte(b.String())
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// short drops the module path from a package's import path.
func short(pkg string) string {
	return cmp.Or(strings.TrimPrefix(strings.TrimPrefix(pkg, "github.com/hookline/hookline"), "/"), ".")
}
