// Command bench-report starts, finishes and compares benchmark report files
// (package report):
//
//	bench-report start FILE       a new report: the machine's description, load average now
//	bench-report end FILE         the load average now; prints the file and its figure count
//	bench-report compare [-threshold 0.1] OLD NEW
//	                              each figure's old and new value and their ratio, marking
//	                              those that moved more than the threshold
//	bench-report summary FILE     the headline figures as a markdown table, with their targets
//	bench-report readme FILE DOC  DOC's bench summary block rewritten from FILE
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hookline/hookline/pkg/bench/report"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-report:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: bench-report start FILE | end FILE | compare [-threshold 0.1] OLD NEW | summary FILE | readme FILE DOC")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "start":
		if len(rest) != 1 {
			return fmt.Errorf("usage: bench-report start FILE")
		}
		return report.File{Format: report.FormatVersion, Machine: report.Describe(), Entries: []report.Entry{}}.Write(rest[0])
	case "end":
		if len(rest) != 1 {
			return fmt.Errorf("usage: bench-report end FILE")
		}
		f, err := report.Read(rest[0])
		if err != nil {
			return err
		}
		f.Machine.LoadEnd = report.LoadAverage()
		if err := f.Write(rest[0]); err != nil {
			return err
		}
		fmt.Printf("bench report: %d figures written to %s\n", len(f.Entries), rest[0])
		return nil
	case "compare":
		fs := flag.NewFlagSet("compare", flag.ContinueOnError)
		threshold := fs.Float64("threshold", 0.10, "mark figures whose new/old ratio is further than this from 1")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() != 2 {
			return fmt.Errorf("usage: bench-report compare [-threshold 0.1] OLD NEW")
		}
		old, err := report.Read(fs.Arg(0))
		if err != nil {
			return err
		}
		cur, err := report.Read(fs.Arg(1))
		if err != nil {
			return err
		}
		report.Print(os.Stdout, old, cur, report.Compare(old, cur, *threshold), *threshold)
		return nil
	case "summary":
		if len(rest) != 1 {
			return fmt.Errorf("usage: bench-report summary FILE")
		}
		f, err := report.Read(rest[0])
		if err != nil {
			return err
		}
		return report.WriteSummary(os.Stdout, f)
	case "readme":
		if len(rest) != 2 {
			return fmt.Errorf("usage: bench-report readme FILE DOC")
		}
		f, err := report.Read(rest[0])
		if err != nil {
			return err
		}
		doc, err := os.ReadFile(rest[1])
		if err != nil {
			return err
		}
		out, err := report.ReplaceSummary(doc, f)
		if err != nil {
			return fmt.Errorf("%s: %w", rest[1], err)
		}
		if err := os.WriteFile(rest[1], out, 0o644); err != nil {
			return err
		}
		fmt.Printf("bench report: %s's summary rewritten from %s\n", rest[1], rest[0])
		return nil
	}
	return fmt.Errorf("unknown command %q: start, end, compare, summary or readme", args[0])
}
