package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/headers"
)

func runShow(ctx context.Context, env Env, args []string) error {
	fs := newFlags("show")
	asJSON := fs.Bool("json", false, "the entry as one JSON object")
	body := fs.Bool("body", false, "write the exact body bytes and nothing else (for kcat, diff, jq)")
	pos, err := parse(fs, env, "show", args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("show takes one <partition>:<offset>, got %d arguments", len(pos))
	}
	if *asJSON && *body {
		return usagef("show: --json and --body exclude each other")
	}
	refs, err := parseRefs(pos)
	if err != nil {
		return err
	}
	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	e, err := a.store.Get(ctx, refs[0])
	if err != nil {
		return a.kafkaErr(err)
	}
	switch {
	case *body:
		_, err := env.Stdout.Write(e.Record.Value)
		return err
	case *asJSON:
		return jsonLine(env.Stdout, e.Detail())
	}
	return printDetail(env.Stdout, a.names.DLQ, e)
}

func printDetail(w io.Writer, topic string, e *store.Entry) error {
	d := e.Detail()
	fmt.Fprintf(w, "Entry %s of %s, dead-lettered %s\n\n", d.Ref, topic, d.DeadAt)
	tw := newTable(w)
	row(tw, "Key:", d.Key)
	row(tw, "Provider:", d.Provider)
	row(tw, "Route:", d.Route)
	row(tw, "Event type:", d.EventType)
	row(tw, "Reason:", d.Reason)
	row(tw, "Origin:", d.Origin+" (attempt "+e.Header(headers.Attempt)+")")
	if d.ReplayID != "" {
		row(tw, "Replay of:", d.ReplayID)
	}
	row(tw, "First seen:", d.FirstSeenAt)
	res := "unresolved"
	if r := d.Resolution; r != nil {
		res = fmt.Sprintf("%s by %s at %s", r.Resolution, r.By, headers.FormatTime(r.At))
		if r.Note != "" {
			res += ": " + r.Note
		}
	}
	row(tw, "Resolution:", res)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nHeaders\n")
	tw = newTable(w)
	for _, h := range d.Headers {
		if h.Name == headers.Errors {
			row(tw, "  "+h.Name, "(the error history, below)")
			continue
		}
		row(tw, "  "+h.Name, h.Value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nError history\n")
	switch {
	case d.ErrorsInvalid != "":
		fmt.Fprintf(w, "  unreadable: %s\n", cell(d.ErrorsInvalid))
	case len(d.Errors) == 0:
		fmt.Fprintf(w, "  none recorded\n")
	default:
		tw = newTable(w)
		row(tw, "  ATTEMPT", "AT", "RETRYABLE", "ERROR")
		for _, x := range d.Errors {
			row(tw, fmt.Sprintf("  %d", x.Attempt), headers.FormatTime(x.At), yesNo(x.Retryable), x.Error)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	kind := "text"
	text := d.Body
	switch {
	case d.BodyJSON && d.BodyPretty != "":
		kind, text = "JSON, pretty-printed", d.BodyPretty
	case d.BodyBase64 != "":
		kind, text = "not UTF-8, base64", d.BodyBase64
	}
	fmt.Fprintf(w, "\nBody (%d bytes, %s)\n%s", d.BodyBytes, kind, block(text))
	if !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(w)
	}
	return nil
}
