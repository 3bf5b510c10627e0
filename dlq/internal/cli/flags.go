package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/store"
)

// newFlags returns a flag set that reports nothing itself: parse turns its
// errors into usage errors.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("dlq "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse reads flags and positional arguments in any order (dlq replay 3:17
// --dry-run and dlq replay --dry-run 3:17 are the same); "--" ends flags.
// -h prints the command's usage to stdout and returns flag.ErrHelp.
func parse(fs *flag.FlagSet, env Env, name string, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(env.Stdout, commandHelp[name])
				printDefaults(env.Stdout, fs)
				return nil, err
			}
			return nil, usagef("%s: %v\n%s", name, err, strings.TrimSuffix(commandHelp[name], "\n"))
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumedTerminator(args, rest) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// consumedTerminator reports whether Parse stopped at a "--" (which it
// drops) rather than at a positional argument.
func consumedTerminator(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

func printDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%-28s %s\n", line, usage)
	})
}

// sinceFlag is --since: a duration back from now, or a time.
type sinceFlag struct {
	now func() time.Time
	t   time.Time
	raw string
}

func (s *sinceFlag) String() string { return s.raw }

// Set takes what store.ParseSince takes.
func (s *sinceFlag) Set(v string) error {
	t, err := store.ParseSince(v, s.now())
	if err != nil {
		return err
	}
	s.raw, s.t = v, t
	return nil
}

// rateFlag is --rate: N per second, as N, N/s, N/m or N/h
// (settings.ParseRate). 0 is refused unless zeroOK (a drain rate of 0 clears
// the cap; a replay at 0/s would never end).
type rateFlag struct {
	perSecond float64
	zeroOK    bool
	set       bool
}

func (r *rateFlag) String() string {
	if r.perSecond == 0 {
		return ""
	}
	return strconv.FormatFloat(r.perSecond, 'f', -1, 64) + "/s"
}

func (r *rateFlag) Set(v string) error {
	n, err := settings.ParseRate(v)
	if err != nil {
		return err
	}
	if n == 0 && !r.zeroOK {
		return fmt.Errorf("%q: want a positive number per second, such as 50 or 50/s or 600/m", v)
	}
	r.perSecond, r.set = n, true
	return nil
}
