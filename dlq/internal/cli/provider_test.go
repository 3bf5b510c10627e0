package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/topics"
)

// providersFile names stripe and slowcrm.
const providersFile = "../settings/testdata/providers.yaml"

// controlEnv is a kfake cluster holding webhooks.control, the environment
// that points dlq at it (with a providers file of stripe and slowcrm), and
// a reader of the settings written.
func controlEnv(t *testing.T) (map[string]string, func() map[string]control.Setting) {
	t.Helper()
	addrs := kafkatest.Fake(t, kfake.SeedTopics(1, topics.NewNames("", nil).Control))
	env := map[string]string{"KAFKA_BROKERS": strings.Join(addrs, ","), "HOOKLINE_PROVIDERS": providersFile, "USER": "tester"}
	read := func() map[string]control.Setting {
		t.Helper()
		got, err := settings.Read(t.Context(), kafkatest.NewClient(addrs), "webhooks.control", func(err error) { t.Errorf("bad control record: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	return env, read
}

func with(env map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// squash puts s's words on one line, one space apart.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ls []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		ls = append(ls, m)
	}
	return ls
}

func TestProviderCommands(t *testing.T) {
	env, read := controlEnv(t)

	code, out, errs := run(env, "provider", "list")
	if code != 0 || !strings.Contains(squash(out), "slowcrm running - - stripe running - -") {
		t.Fatalf("list before any setting: %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(env, "provider", "pause", "slowcrm")
	if code != 0 || out != "slowcrm paused by tester\n" || errs != "" {
		t.Fatalf("pause: %d %q %q", code, out, errs)
	}
	if s := read()["slowcrm"]; !s.Paused || s.Rate != 0 || s.By != "tester" || s.At.IsZero() {
		t.Fatalf("setting written by pause: %+v", s)
	}
	code, out, _ = run(env, "provider", "list")
	if code != 0 || !strings.Contains(squash(out), "slowcrm paused tester 20") || !strings.Contains(squash(out), "stripe running - -") {
		t.Fatalf("list after pause: %d\n%s", code, out)
	}

	code, out, errs = run(env, "provider", "rate", "slowcrm", "--rate", "300/m", "--by", "alice", "--json")
	if code != 0 {
		t.Fatalf("rate: %d %s", code, errs)
	}
	if v := jsonLines(t, out)[0]; v["state"] != "draining" || v["rate"] != 5.0 || v["paused"] != false || v["by"] != "alice" || v["text"] != "draining at 5/s" {
		t.Fatalf("rate --json: %v", v)
	}
	if s := read()["slowcrm"]; s.Paused || s.Rate != 5 || s.By != "alice" {
		t.Fatalf("setting written by rate: %+v", s)
	}
	code, out, _ = run(env, "provider", "list", "--json")
	lines := jsonLines(t, out)
	if code != 0 || len(lines) != 2 || lines[0]["provider"] != "slowcrm" || lines[0]["state"] != "draining" ||
		lines[1]["provider"] != "stripe" || lines[1]["state"] != "running" || lines[1]["at"] != nil {
		t.Fatalf("list --json: %d %v", code, lines)
	}

	// --rate 0 and resume both clear the rate.
	if code, out, _ := run(env, "provider", "rate", "slowcrm", "--rate", "0"); code != 0 || out != "slowcrm running by tester\n" {
		t.Fatalf("rate 0: %d %q", code, out)
	}
	run(env, "provider", "rate", "stripe", "--rate", "20")
	if code, out, _ := run(env, "provider", "resume", "stripe", "--by", "bob"); code != 0 || out != "stripe running by bob\n" {
		t.Fatalf("resume: %d %q", code, out)
	}
	for name, s := range read() {
		if s.Paused || s.Rate != 0 {
			t.Errorf("%s after rate 0 / resume: %+v", name, s)
		}
	}

	// Without the providers file any valid name goes, with a warning.
	noFile := with(env, "HOOKLINE_PROVIDERS", "")
	code, out, errs = run(noFile, "provider", "pause", "newcrm")
	if code != 0 || out != "newcrm paused by tester\n" || !strings.Contains(errs, "warning: HOOKLINE_PROVIDERS is not set") {
		t.Fatalf("pause without a providers file: %d %q %q", code, out, errs)
	}
	// list shows it, with the file's providers, and skips a record it cannot read.
	cl := kafkatest.Client(t, strings.Split(env["KAFKA_BROKERS"], ","))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "webhooks.control", Key: []byte("provider:broken"), Value: []byte("{")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(env, "provider", "list")
	if code != 0 || !strings.Contains(out, "newcrm") || !strings.Contains(out, "paused") || !strings.Contains(errs, "warning: skipped: control record provider:broken") {
		t.Fatalf("list with a record of a provider outside the file and a broken one: %d\n%s%s", code, out, errs)
	}
}

func TestProviderErrors(t *testing.T) {
	env, read := controlEnv(t)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		says string
	}{
		{[]string{"provider"}, env, 2, "pause, resume, rate or list"},
		{[]string{"provider", "frob", "slowcrm"}, env, 2, `"frob"`},
		{[]string{"provider", "pause"}, env, 2, "one provider NAME"},
		{[]string{"provider", "pause", "slowcrm", "stripe"}, env, 2, "one provider NAME"},
		{[]string{"provider", "pause", "nosuch"}, env, 2, "slowcrm, stripe"},
		{[]string{"provider", "resume", "nosuch"}, env, 2, "unknown provider"},
		{[]string{"provider", "pause", "a:b"}, with(env, "HOOKLINE_PROVIDERS", ""), 2, "want a provider name"},
		{[]string{"provider", "pause", "slowcrm", "--rate", "5"}, env, 2, "not defined"},
		{[]string{"provider", "rate", "slowcrm"}, env, 2, "needs --rate"},
		{[]string{"provider", "rate", "slowcrm", "--rate", "-1"}, env, 2, "rate"},
		{[]string{"provider", "rate", "slowcrm", "--rate", "5/d"}, env, 2, "unit"},
		{[]string{"provider", "rate", "slowcrm", "--rate", "fast"}, env, 2, "rate"},
		{[]string{"provider", "pause", "slowcrm"}, with(env, "USER", ""), 2, "--by"},
		{[]string{"provider", "list", "x"}, env, 2, "no arguments"},
		{[]string{"provider", "pause", "slowcrm"}, with(env, "HOOKLINE_PROVIDERS", "/nonexistent/providers.yaml"), 2, "HOOKLINE_PROVIDERS"},
		{[]string{"provider", "pause", "slowcrm"}, with(env, "HOOKLINE_TOPIC_PREFIX", "other."), 1, "does not exist"},
		{[]string{"provider", "list"}, with(env, "HOOKLINE_TOPIC_PREFIX", "other."), 1, "does not exist"},
	} {
		code, out, errs := run(tc.env, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("dlq %s: exit %d, stderr %q; want %d saying %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.says)
		}
		if out != "" {
			t.Errorf("dlq %s printed %q", strings.Join(tc.args, " "), out)
		}
	}
	if got := read(); len(got) != 0 {
		t.Errorf("failed commands wrote %v", got)
	}
	for _, args := range [][]string{{"help", "provider"}, {"provider", "--help"}, {"provider", "rate", "-h"}} {
		code, out, _ := run(nil, args...)
		if code != 0 || !strings.Contains(out, "usage: dlq provider pause NAME") {
			t.Errorf("dlq %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if _, out, _ := run(nil, "help"); !strings.Contains(out, "dlq provider rate NAME --rate N/s") {
		t.Errorf("dlq help does not list provider:\n%s", out)
	}
}

// TestRouteCommands: dlq route sets one route with the flags, output and
// JSON of dlq provider (the same code), keyed route:PROVIDER/ROUTE; a
// route the providers file lacks is refused, any valid one goes without
// the file; dlq route list shows the routes' own settings and says which
// provider-wide setting holds them too; dlq provider list shows no route.
func TestRouteCommands(t *testing.T) {
	env, read := controlEnv(t)
	code, out, errs := run(env, "route", "list")
	if code != 0 || squash(out) != "ROUTE SETTING BY SINCE slowcrm/default running - - stripe/billing running - - stripe/crm running - -" {
		t.Fatalf("route list before any setting: %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(env, "route", "pause", "stripe/crm")
	if code != 0 || out != "stripe/crm paused by tester\n" || errs != "" {
		t.Fatalf("route pause: %d %q %q", code, out, errs)
	}
	if s := read()["stripe/crm"]; s.Provider != "stripe" || s.Route != "crm" || !s.Paused || s.By != "tester" {
		t.Fatalf("setting written by route pause: %+v", s)
	}
	if s, ok := read()["stripe"]; ok {
		t.Fatalf("a route's pause wrote a provider-wide setting: %+v", s)
	}

	noFile := with(env, "HOOKLINE_PROVIDERS", "")
	code, out, errs = run(noFile, "route", "rate", "stripe/ledger", "--rate", "600/m", "--by", "alice", "--json")
	if code != 0 || !strings.Contains(errs, `route "stripe/ledger" is not checked`) {
		t.Fatalf("route rate without a file: %d %q %q", code, out, errs)
	}
	if v := jsonLines(t, out)[0]; v["provider"] != "stripe" || v["route"] != "ledger" || v["state"] != "draining" || v["rate"] != 10.0 || v["by"] != "alice" {
		t.Fatalf("route rate --json: %v", v)
	}
	if code, out, _ := run(env, "route", "rate", "stripe/billing", "--rate", "7"); code != 0 || out != "stripe/billing draining at 7/s by tester\n" {
		t.Fatalf("route rate: %d %q", code, out)
	}
	if code, out, _ := run(env, "route", "resume", "stripe/billing"); code != 0 || out != "stripe/billing running by tester\n" {
		t.Fatalf("route resume: %d %q", code, out)
	}
	run(env, "provider", "pause", "slowcrm", "--by", "bob")
	code, out, _ = run(env, "route", "list")
	if code != 0 || !strings.Contains(squash(out), "slowcrm/default running - - stripe/billing running tester 20") ||
		!strings.Contains(squash(out), "stripe/crm paused tester 20") || !strings.Contains(squash(out), "stripe/ledger draining at 10/s alice 20") ||
		!strings.Contains(out, "slowcrm is paused provider-wide (by bob, dlq provider): every route of it is held so") {
		t.Fatalf("route list: %d\n%s", code, out)
	}
	code, out, _ = run(env, "route", "list", "--json")
	if lines := jsonLines(t, out); code != 0 || len(lines) != 4 || lines[1]["route"] != "billing" || lines[2]["route"] != "crm" || lines[2]["state"] != "paused" || lines[3]["route"] != "ledger" {
		t.Fatalf("route list --json: %d %v", code, lines)
	}
	code, out, _ = run(env, "provider", "list", "--json")
	if lines := jsonLines(t, out); code != 0 || len(lines) != 2 || lines[0]["route"] != nil || lines[1]["provider"] != "stripe" || lines[1]["state"] != "running" {
		t.Fatalf("provider list --json shows routes: %d %v", code, lines)
	}
}

func TestRouteErrors(t *testing.T) {
	env, read := controlEnv(t)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		says string
	}{
		{[]string{"route"}, env, "pause, resume, rate or list"},
		{[]string{"route", "frob", "stripe/crm"}, env, `"frob"`},
		{[]string{"route", "pause"}, env, "one PROVIDER/ROUTE"},
		{[]string{"route", "pause", "stripe"}, env, "want PROVIDER/ROUTE"},
		{[]string{"route", "pause", "stripe/"}, env, "want a route name"},
		{[]string{"route", "pause", "stripe/Billing.eu"}, env, "want a route name"},
		{[]string{"route", "pause", "stripe/billing/x"}, env, "want a route name"},
		{[]string{"route", "pause", "a:b/c"}, with(env, "HOOKLINE_PROVIDERS", ""), "want a provider name"},
		{[]string{"route", "pause", "stripe/default"}, env, `unknown route "stripe/default"`},
		{[]string{"route", "pause", "slowcrm/billing"}, env, "slowcrm has the routes default"},
		{[]string{"route", "pause", "nosuch/default"}, env, `unknown provider "nosuch"`},
		{[]string{"route", "rate", "stripe/crm"}, env, "needs --rate"},
		{[]string{"route", "rate", "stripe/crm", "--rate", "5/d"}, env, "unit"},
		{[]string{"route", "list", "x"}, env, "no arguments"},
	} {
		code, out, errs := run(tc.env, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.says) || out != "" {
			t.Errorf("dlq %s: exit %d, stdout %q, stderr %q; want 2 saying %q", strings.Join(tc.args, " "), code, out, errs, tc.says)
		}
	}
	if got := read(); len(got) != 0 {
		t.Errorf("failed commands wrote %v", got)
	}
	for _, args := range [][]string{{"help", "route"}, {"route", "--help"}, {"route", "rate", "-h"}} {
		code, out, _ := run(nil, args...)
		if code != 0 || !strings.Contains(out, "usage: dlq route pause PROVIDER/ROUTE") {
			t.Errorf("dlq %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if _, out, _ := run(nil, "help"); !strings.Contains(out, "dlq route rate PROVIDER/ROUTE --rate N/s") {
		t.Errorf("dlq help does not list route:\n%s", out)
	}
}
