package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/pkg/control"
)

const providerHelp = `usage: dlq provider pause NAME [--by NAME] [--json]
       dlq provider resume NAME [--by NAME] [--json]
       dlq provider rate NAME --rate N/s [--by NAME] [--json]
       dlq provider list [--json]

Holds or meters one provider's deliveries. A setting is one record on the
compacted topic webhooks.control, keyed provider:NAME (the latest counts);
every processor follows that topic, so a setting holds across restarts.

pause   the processor calls the provider's destination no more: its records
        wait, parked durably in the lane topic webhooks.lane.NAME, and use
        no attempt. Ingest accepts the provider's deliveries as always.
resume  running again, with no cap (a drain rate is cleared): what waited
        is delivered.
rate    drain: at most N calls per second to the destination (50, 50/s,
        600/m); a paused provider runs again at that pace. --rate 0 clears
        the cap, as resume does.
list    every provider's setting (running, paused, draining at N/s), who
        set it and when: the providers file's providers, and any other the
        topic names. It reads webhooks.control from its start to its end.

NAME must be a provider of the providers file when HOOKLINE_PROVIDERS is set
(an unknown one is a usage error); without it any name is taken, with a
warning. --by says who (default $USER). A write waits for every in-sync
replica's acknowledgement and prints the setting written; --json prints it
(and each line of list) as one JSON object:
{"provider","state":"running|paused|draining","paused","rate","text","by","at"}.
`

func runProvider(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 {
		return usagef("provider needs pause, resume, rate or list (dlq help provider)")
	}
	verb, args := args[0], args[1:]
	switch verb {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(env.Stdout, providerHelp)
		return nil
	case "list":
		return runProviderList(ctx, env, args)
	case "pause", "resume", "rate":
	default:
		return usagef("provider %q: want pause, resume, rate or list", verb)
	}
	fs := newFlags("provider")
	by := fs.String("by", "", "`NAME` of who sets it (default $USER)")
	asJSON := fs.Bool("json", false, "print the setting written as one JSON object")
	rate := rateFlag{zeroOK: true}
	if verb == "rate" {
		fs.Var(&rate, "rate", "at most `N/s` calls per second to the destination (50, 50/s, 600/m; 0 clears the cap)")
	}
	pos, err := parse(fs, env, "provider", args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("provider %s needs one provider NAME, got %d arguments", verb, len(pos))
	case verb == "rate" && !rate.set:
		return usagef("provider rate needs --rate N/s (0 clears the cap)")
	}
	user, _ := env.Lookup("USER")
	who, err := whoFrom(*by, user)
	if err != nil {
		return err
	}
	s := control.Setting{Provider: pos[0], Paused: verb == "pause", Rate: rate.perSecond, By: who, At: time.Now().UTC()}

	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.checkProvider(s.Provider); err != nil {
		return err
	}
	if err := a.writeSetting(ctx, s); err != nil {
		return err
	}
	if *asJSON {
		return jsonLine(env.Stdout, settings.ViewOf(s))
	}
	fmt.Fprintf(env.Stdout, "%s %s by %s\n", s.Provider, s, who)
	return nil
}

// writeSetting writes s to webhooks.control, which must exist: a producer
// must not leave it to the broker to create (it would not be compacted).
func (a *app) writeSetting(ctx context.Context, s control.Setting) error {
	if err := a.checkTopic(ctx, a.names.Control); err != nil {
		return err
	}
	return control.Write(ctx, a.cl, a.names.Control, s)
}

// checkProvider refuses a name the providers file lacks (usage error), and
// warns when there is no file to check it against.
func (a *app) checkProvider(name string) error {
	known, err := a.known()
	if err != nil {
		return err
	}
	if err := known.Check(name); err != nil {
		return usagef("%v", err)
	}
	if !known.Checked() {
		fmt.Fprintf(a.env.Stderr, "dlq: warning: HOOKLINE_PROVIDERS is not set: provider %q is not checked against the providers file\n", name)
	}
	return nil
}

// known reads the providers file's names; a file that does not load is a
// usage error, as a bad variable is.
func (a *app) known() (settings.Known, error) {
	k, err := settings.LoadKnown(a.cfg.ProvidersFile)
	if err != nil {
		return k, usagef("%v", err)
	}
	return k, nil
}

func runProviderList(ctx context.Context, env Env, args []string) error {
	fs := newFlags("provider")
	asJSON := fs.Bool("json", false, "one JSON object per provider")
	pos, err := parse(fs, env, "provider", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("provider list takes no arguments, got %q", pos[0])
	}
	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	known, err := a.known()
	if err != nil {
		return err
	}
	if err := a.checkTopic(ctx, a.names.Control); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	got, err := settings.Read(rctx, a.newClient, a.names.Control, func(err error) {
		fmt.Fprintln(env.Stderr, "dlq: warning: skipped:", err)
	})
	if err != nil {
		return err
	}
	views := known.Views(got)
	if *asJSON {
		for _, v := range views {
			if err := jsonLine(env.Stdout, v); err != nil {
				return err
			}
		}
		return nil
	}
	if len(views) == 0 {
		fmt.Fprintf(env.Stdout, "no provider has a setting in %s: every provider runs\n", a.names.Control)
		return nil
	}
	tw := newTable(env.Stdout)
	row(tw, "PROVIDER", "SETTING", "BY", "SINCE")
	for _, v := range views {
		at := "-"
		if v.At != nil {
			at = when(*v.At)
		}
		row(tw, v.Provider, v.Text, v.By, at)
	}
	return tw.Flush()
}
