package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/topics"
)

const providerHelp = `usage: dlq provider pause NAME [--by NAME] [--json]
       dlq provider resume NAME [--by NAME] [--json]
       dlq provider rate NAME --rate N/s [--by NAME] [--json]
       dlq provider list [--json]

Holds or meters one provider's deliveries, every route of it (dlq route
holds one route). A setting is one record on the compacted topic
webhooks.control, keyed provider:NAME (the latest counts); every processor
follows that topic, so a setting holds across restarts.

pause   the processor calls the provider's destinations no more: its records
        wait, parked durably in the lane topics (webhooks.lane.NAME, and
        webhooks.lane.NAME.ROUTE for a route other than default), and use
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

const routeHelp = `usage: dlq route pause PROVIDER/ROUTE [--by NAME] [--json]
       dlq route resume PROVIDER/ROUTE [--by NAME] [--json]
       dlq route rate PROVIDER/ROUTE --rate N/s [--by NAME] [--json]
       dlq route list [--json]

Holds or meters one route's deliveries. A route is a named destination of a
provider in the providers file; a provider with a provider-level
destination has one, named default. A route's setting is one record on
webhooks.control keyed route:PROVIDER/ROUTE (the latest counts), beside the
provider-wide one keyed provider:PROVIDER (dlq provider). The processor
combines the two: a route is paused if either is, and drained at its own
rate if it has one, else at the provider's.

pause   the processor calls the route's destination no more: its records
        wait, parked durably in the route's lane topic
        (webhooks.lane.PROVIDER for the route default,
        webhooks.lane.PROVIDER.ROUTE for another), and use no attempt. The
        provider's other routes go on.
resume  the route's own setting back to running, no cap (a provider-wide
        pause still holds it: dlq provider resume PROVIDER).
rate    drain: at most N calls per second to the route's destination (50,
        50/s, 600/m); --rate 0 clears the cap, as resume does.
list    every route's own setting (running, paused, draining at N/s), who
        set it and when: the routes of the providers file's providers, and
        any other the topic names; then the provider-wide settings that
        hold routes too. It reads webhooks.control from its start to its end.

PROVIDER/ROUTE must be a route of the providers file when HOOKLINE_PROVIDERS
is set (an unknown one is a usage error); without it any valid name is
taken (a route is 1 to 40 of a-z, 0-9, _ and -), with a warning. --by says
who (default $USER). A write waits for every in-sync replica's
acknowledgement and prints the setting written; --json prints it (and each
line of list) as one JSON object:
{"provider","route","state":"running|paused|draining","paused","rate","text","by","at"}.
`

// settingNoun is what dlq provider and dlq route set: one implementation
// serves both, told apart by how the positional argument names the
// setting and which listing the list verb prints.
type settingNoun struct {
	name string // "provider", "route": the command
	arg  string // how the usage names the argument
	help string
	// target reads the argument: a provider (route "") or a route of one.
	target func(string) (provider, route string, err error)
	// views lists the settings of this noun, those of the file first.
	views func(settings.Known, map[string]control.Setting) []settings.View
}

var (
	providerNoun = settingNoun{name: "provider", arg: "provider NAME", help: providerHelp,
		target: func(s string) (string, string, error) { return s, "", nil },
		views:  settings.Known.Views}
	routeNoun = settingNoun{name: "route", arg: "PROVIDER/ROUTE", help: routeHelp,
		target: control.ParseRoute,
		views:  settings.Known.RouteViews}
)

func runProvider(ctx context.Context, env Env, args []string) error {
	return runSetting(ctx, env, providerNoun, args)
}

func runRoute(ctx context.Context, env Env, args []string) error {
	return runSetting(ctx, env, routeNoun, args)
}

// runSetting is dlq provider and dlq route: pause, resume or rate one
// provider or route, or list the settings.
func runSetting(ctx context.Context, env Env, noun settingNoun, args []string) error {
	if len(args) == 0 {
		return usagef("%s needs pause, resume, rate or list (dlq help %s)", noun.name, noun.name)
	}
	verb, args := args[0], args[1:]
	switch verb {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(env.Stdout, noun.help)
		return nil
	case "list":
		return runSettingList(ctx, env, noun, args)
	case "pause", "resume", "rate":
	default:
		return usagef("%s %q: want pause, resume, rate or list", noun.name, verb)
	}
	fs := newFlags(noun.name)
	by := fs.String("by", "", "`NAME` of who sets it (default $USER)")
	asJSON := fs.Bool("json", false, "print the setting written as one JSON object")
	rate := rateFlag{zeroOK: true}
	if verb == "rate" {
		fs.Var(&rate, "rate", "at most `N/s` calls per second to the destination (50, 50/s, 600/m; 0 clears the cap)")
	}
	pos, err := parse(fs, env, noun.name, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("%s %s needs one %s, got %d arguments", noun.name, verb, noun.arg, len(pos))
	case verb == "rate" && !rate.set:
		return usagef("%s rate needs --rate N/s (0 clears the cap)", noun.name)
	}
	provider, route, err := noun.target(pos[0])
	if err != nil {
		return usagef("%s %s: %v", noun.name, verb, err)
	}
	user, _ := env.Lookup("USER")
	who, err := whoFrom(*by, user)
	if err != nil {
		return err
	}
	s := control.Setting{Provider: provider, Route: route, Paused: verb == "pause", Rate: rate.perSecond, By: who, At: time.Now().UTC()}

	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.checkSetting(noun, s); err != nil {
		return err
	}
	if err := a.writeSetting(ctx, s); err != nil {
		return err
	}
	if *asJSON {
		return jsonLine(env.Stdout, settings.ViewOf(s))
	}
	fmt.Fprintf(env.Stdout, "%s %s by %s\n", s.Name(), s, who)
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

// checkSetting refuses a provider or route the providers file lacks (usage
// error), and warns when there is no file to check it against.
func (a *app) checkSetting(noun settingNoun, s control.Setting) error {
	known, err := a.known()
	if err != nil {
		return err
	}
	if err := known.Check(s.Provider, s.Route); err != nil {
		return usagef("%v", err)
	}
	if !known.Checked() {
		fmt.Fprintf(a.env.Stderr, "dlq: warning: HOOKLINE_PROVIDERS is not set: %s %q is not checked against the providers file\n", noun.name, s.Name())
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

// connectKnown connects, reads the providers file's names and checks
// that the topic named by topic exists; the app is closed on an error.
func connectKnown(ctx context.Context, env Env, topic func(topics.Names) string) (*app, settings.Known, error) {
	a, err := connect(env)
	if err != nil {
		return nil, settings.Known{}, err
	}
	known, err := a.known()
	if err == nil {
		err = a.checkTopic(ctx, topic(a.names))
	}
	if err != nil {
		a.close()
		return nil, settings.Known{}, err
	}
	return a, known, nil
}

// runSettingList is dlq provider list and dlq route list.
func runSettingList(ctx context.Context, env Env, noun settingNoun, args []string) error {
	fs := newFlags(noun.name)
	asJSON := fs.Bool("json", false, "one JSON object per "+noun.name)
	pos, err := parse(fs, env, noun.name, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("%s list takes no arguments, got %q", noun.name, pos[0])
	}
	a, known, err := connectKnown(ctx, env, func(n topics.Names) string { return n.Control })
	if err != nil {
		return err
	}
	defer a.close()
	rctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	got, err := settings.Read(rctx, a.newClient, a.names.Control, func(err error) {
		fmt.Fprintln(env.Stderr, "dlq: warning: skipped:", err)
	})
	if err != nil {
		return err
	}
	views := noun.views(known, got)
	if *asJSON {
		for _, v := range views {
			if err := jsonLine(env.Stdout, v); err != nil {
				return err
			}
		}
		return nil
	}
	if len(views) == 0 {
		fmt.Fprintf(env.Stdout, "no %s has a setting in %s: every %s runs\n", noun.name, a.names.Control, noun.name)
	} else {
		tw := newTable(env.Stdout)
		row(tw, strings.ToUpper(noun.name), "SETTING", "BY", "SINCE")
		for _, v := range views {
			at := "-"
			if v.At != nil {
				at = when(*v.At)
			}
			row(tw, v.Name(), v.Text, v.By, at)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, v := range views {
			if v.Why != "" {
				fmt.Fprintf(env.Stdout, "%s was paused by %s: %s\n", cell(v.Name()), cell(v.By), cell(v.Why))
			}
		}
	}
	if noun.name == routeNoun.name {
		for _, v := range known.Views(got) {
			if v.State != "running" {
				fmt.Fprintf(env.Stdout, "%s is %s provider-wide (by %s, dlq provider): every route of it is held so\n", cell(v.Provider), v.Text, cell(v.By))
			}
		}
	}
	return nil
}
