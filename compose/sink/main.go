// Command sink is the local destination `make run` delivers to: an HTTP
// receiver that prints one line per delivery (provider, idempotency key,
// event type, attempt, body size, the status it answered) and answers 200,
// except on a /flaky/ path, where it fails a fixed, reproducible share of
// calls so that retries and dead letters appear (see Rules).
//
//	sink [-addr 127.0.0.1:8090]
//
// Paths: POST /ok/<name> always answers 200; POST /flaky/<name> follows
// Rules; anything else is 404. The line goes to stdout; SIGINT or SIGTERM
// stops it. It keeps nothing: whether a call fails depends only on the key
// and the X-Hookline-Attempt header, so a restarted sink fails the same calls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sink:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen on `HOST:PORT`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sink takes no arguments, got %q", fs.Arg(0))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sink: listening on http://%s (POST /ok/<name>: 200; POST /flaky/<name>: %s)\n", ln.Addr(), RulesText)
	hs := &http.Server{
		Handler:           New(stdout, time.Now),
		ReadHeaderTimeout: 5 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
