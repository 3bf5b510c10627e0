package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/hookline/hookline/dlq/internal/store"
)

func runStats(ctx context.Context, env Env, args []string) error {
	fs := newFlags("stats")
	var f store.Filter
	addPlaceFlags(fs, &f.Provider, &f.Route)
	asJSON := fs.Bool("json", false, "the statistics as one JSON object")
	pos, err := parse(fs, env, "stats", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("stats takes no arguments, got %q", pos[0])
	}
	if err := checkRoute(f.Route); err != nil {
		return err
	}
	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	es, err := a.store.List(ctx, f, false)
	if err != nil {
		return a.kafkaErr(err)
	}
	st := store.Summarise(es, time.Now())
	if *asJSON {
		return jsonLine(env.Stdout, st)
	}
	printStats(env.Stdout, a.names.DLQ, st)
	return nil
}

func printStats(w io.Writer, topic string, st store.Stats) {
	var res []string
	for _, k := range sortedKeys(st.ByResolution) {
		res = append(res, fmt.Sprintf("%s %d", k, st.ByResolution[k]))
	}
	fmt.Fprintf(w, "%s: %d entries, %d unresolved, %d resolved", topic, st.Total, st.Unresolved, st.Resolved)
	if len(res) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(res, ", "))
	}
	fmt.Fprintln(w)
	if st.Total == 0 {
		return
	}
	tw := newTable(w)
	for _, o := range []struct {
		name string
		o    *store.Oldest
	}{{"Oldest:", st.Oldest}, {"Oldest unresolved:", st.OldestUnresolved}} {
		if o.o == nil {
			row(tw, o.name, "none")
			continue
		}
		row(tw, o.name, o.o.Ref, o.o.DeadAt, ago(time.Duration(o.o.AgeSeconds)*time.Second)+" ago", o.o.Provider+"/"+o.o.Route, o.o.Key)
	}
	_ = tw.Flush()
	for _, t := range []struct {
		title string
		m     map[string]store.Count
	}{{"PROVIDER", st.ByProvider}, {"ROUTE", st.ByRoute}, {"REASON", st.ByReason}} {
		fmt.Fprintln(w)
		tw := newTable(w)
		row(tw, t.title, "TOTAL", "UNRESOLVED")
		for _, k := range sortedKeys(t.m) {
			row(tw, k, fmt.Sprint(t.m[k].Total), fmt.Sprint(t.m[k].Unresolved))
		}
		_ = tw.Flush()
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
