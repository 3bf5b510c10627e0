package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/rules"
	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/pkg/providers"
)

const rulesHelp = `usage: dlq rules test PROVIDER --body FILE [--header 'K: V']... [--event TYPE] [--json]
       dlq rules test [PROVIDER] (--from-dlq PARTITION:OFFSET | --from-raw PARTITION:OFFSET) [--json]

Tries the routes of PROVIDER in HOOKLINE_PROVIDERS on one delivery before
they go live: for each route, whether the event matches and which part of
its rule decided (events, where, or filter, and for a filter the operator,
its place in the body or headers and its line:column in the file). It runs
the processor's own matching over the same file; nothing is sent.

--body FILE (- for stdin) is the request body; --header adds a request
header (repeat it); without --event the provider derives the event type
(and the key, and splits a batch) as ingest does. --from-dlq takes the DLQ
entry at that ref, --from-raw the webhooks.raw record at that partition and
offset: the event type, body and copied headers the processor saw (these
two read Kafka; --body does not).

Exit codes: 0 whatever matched; 2 a bad flag, an unknown provider, a ref
that does not exist, or a body the provider derives no event from.
`

// headerList is --header 'K: V', repeatable.
type headerList struct{ h http.Header }

func (l *headerList) String() string { return "" }

func (l *headerList) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q: want 'Name: value'", v)
	}
	l.h.Add(strings.TrimSpace(k), strings.TrimSpace(val))
	return nil
}

func runRules(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 || args[0] != "test" {
		return usagef("rules: want rules test\n%s", strings.TrimSuffix(rulesHelp, "\n"))
	}
	fs := newFlags("rules")
	bodyFile := fs.String("body", "", "the request body's `FILE` (- for stdin)")
	hdr := &headerList{h: http.Header{}}
	fs.Var(hdr, "header", "a request header, `'Name: value'` (repeat it)")
	event := fs.String("event", "", "the event `TYPE` (default: the provider derives it)")
	fromDLQ := fs.String("from-dlq", "", "the DLQ entry at `PARTITION:OFFSET`")
	fromRaw := fs.String("from-raw", "", "the webhooks.raw record at `PARTITION:OFFSET`")
	asJSON := fs.Bool("json", false, "the answer as one JSON object")
	pos, err := parse(fs, env, "rules", args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("rules test takes one PROVIDER, got %q", pos)
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
	}
	sources := 0
	for _, s := range []string{*bodyFile, *fromDLQ, *fromRaw} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return usagef("rules test: give one of --body, --from-dlq, --from-raw")
	}
	if *bodyFile == "" && (len(hdr.h) > 0 || *event != "") {
		return usagef("rules test: --header and --event go with --body (a stored delivery has its own)")
	}
	cfg, err := loadConfig(env.Lookup)
	if err != nil {
		return usagef("%v", err)
	}
	if cfg.ProvidersFile == "" {
		return usagef("rules test needs HOOKLINE_PROVIDERS, the providers file whose routes it tries")
	}
	reg, err := providers.LoadWithoutSecrets(cfg.ProvidersFile)
	if err != nil {
		return usagef("%v", err)
	}
	var in rules.Input
	if *bodyFile != "" {
		if name == "" {
			return usagef("rules test --body: name the PROVIDER")
		}
		b, err := readBody(env, *bodyFile)
		if err != nil {
			return usagef("rules test: --body: %v", err)
		}
		in = rules.Input{Body: b, Header: hdr.h, EventType: *event, Source: "body " + *bodyFile}
	} else {
		r, source, err := storedRecord(ctx, env, *fromDLQ, *fromRaw)
		if err != nil {
			return err
		}
		of := rules.ProviderOf(r)
		switch {
		case name == "":
			name = of
		case of != name:
			return usagef("rules test: %s is of provider %q, not %q", source, of, name)
		}
		in = rules.FromRecord(r, source)
	}
	p, ok := reg.Get(name)
	if !ok {
		return usagef("rules test: provider %q is not in %s", name, cfg.ProvidersFile)
	}
	res, err := rules.Test(p, in, rules.Transform)
	if err != nil {
		return usagef("rules test: %v", err)
	}
	if *asJSON {
		return jsonLine(env.Stdout, res)
	}
	return printRules(env.Stdout, res)
}

// readBody reads --body: a file, or stdin for "-".
func readBody(env Env, path string) ([]byte, error) {
	if path == "-" {
		if env.Stdin == nil {
			return nil, fmt.Errorf("no stdin")
		}
		return io.ReadAll(env.Stdin)
	}
	return os.ReadFile(path)
}

// storedRecord reads the record --from-dlq or --from-raw names.
func storedRecord(ctx context.Context, env Env, dlqRef, rawRef string) (*kgo.Record, string, error) {
	ref, source := dlqRef, "dlq "+dlqRef
	if rawRef != "" {
		ref, source = rawRef, "raw "+rawRef
	}
	rf, err := store.ParseRef(ref)
	if err != nil {
		return nil, "", err
	}
	a, err := connect(env)
	if err != nil {
		return nil, "", err
	}
	defer a.close()
	if dlqRef != "" {
		e, err := a.store.Get(ctx, rf)
		if err != nil {
			return nil, "", a.kafkaErr(err)
		}
		return e.Record, source, nil
	}
	r, err := a.store.RawRecord(ctx, rf)
	if err != nil {
		return nil, "", a.kafkaErr(err)
	}
	return r, source, nil
}

// printRules writes the answer as a table per event.
func printRules(w io.Writer, res rules.Result) error {
	for _, ev := range res.Events {
		fmt.Fprintf(w, "provider %s, event %s", res.Provider, cell(ev.EventType))
		if ev.Key != "" {
			fmt.Fprintf(w, ", key %s", ev.Key)
		}
		fmt.Fprintf(w, " (%s)\n", res.Source)
		tw := newTable(w)
		row(tw, "  ROUTE", "MATCH", "BY", "WHY", "DESTINATION")
		for _, r := range ev.Routes {
			row(tw, "  "+r.Route, yesNo(r.Matched), r.By, r.Reason, r.Destination)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if ev.Unrouted {
			fmt.Fprintln(w, "  no route takes it: unrouted")
		}
		for _, r := range ev.Routes {
			printTransformed(w, r)
		}
	}
	return nil
}

// printTransformed writes what a matching route's transform would send:
// its headers and body, its skip, or its error (transform_failed).
func printTransformed(w io.Writer, r rules.RouteResult) {
	t := r.Transformed
	if t == nil {
		return
	}
	sha := t.SHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	fmt.Fprintf(w, "  route %s, transform %s (sha256:%s): ", cell(r.Route), cell(t.Script), sha)
	switch {
	case t.Error != "":
		fmt.Fprintf(w, "fails, to the DLQ as transform_failed: %s\n", cell(t.Error))
	case t.Skip:
		fmt.Fprintln(w, "skips the event: nothing sent")
	default:
		fmt.Fprintln(w, "sends")
		names := slices.Sorted(maps.Keys(t.Headers))
		for _, k := range names {
			fmt.Fprintf(w, "    %s: %s\n", k, cell(t.Headers[k]))
		}
		fmt.Fprintf(w, "    %s\n", cell(t.Body))
	}
}
