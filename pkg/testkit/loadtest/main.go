package loadtest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is a benchmark program's main after its flags: it runs run with a
// context that SIGINT and SIGTERM cancel (so Run.Close still deletes what
// the run made), and on an error prints "name: error" and exits 1.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
