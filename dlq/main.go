// Command dlq is the operator's view of hookline's dead letters and the
// lever that replays them (DESIGN §8): list, show, replay, stats, resolve,
// provider (pause, resume, drain a provider's deliveries) and serve (the
// admin API and console page). `dlq help` says how.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hookline/hookline/dlq/internal/cli"
	"github.com/hookline/hookline/pkg/timerslack"
)

func main() {
	// dlq serve is a service, the other commands run and end: it alone
	// takes the timer slack, first, before anything is opened, since
	// applying it starts the program again in place (package timerslack).
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if d, ok := cli.ServeTimerSlack(os.LookupEnv); ok {
			timerslack.Apply(os.Stderr, "dlq serve", d)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := cli.Run(ctx, cli.Env{
		Args:      os.Args[1:],
		Lookup:    os.LookupEnv,
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		StderrTTY: isTerminal(os.Stderr),
	})
	stop()
	if msg := cli.Message(err); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(cli.ExitCode(err))
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
