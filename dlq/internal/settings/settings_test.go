package settings

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/pkg/control"
)

func mustKnown(t *testing.T) Known {
	t.Helper()
	k, err := LoadKnown("testdata/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "5": 5, "5/s": 5, "300/m": 5, "7200/h": 2, " 0.5 ": 0.5} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "x", "5/d", "2e6", "NaN", "+Inf"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

func TestKnown(t *testing.T) {
	k := mustKnown(t)
	if !k.Checked() || strings.Join(k.Names(), ",") != "slowcrm,stripe" {
		t.Fatalf("known %v", k.Names())
	}
	if err := k.Check("slowcrm", ""); err != nil {
		t.Errorf("Check(slowcrm) = %v", err)
	}
	if err := k.Check("nosuch", ""); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "slowcrm, stripe") {
		t.Errorf("Check(nosuch) = %v, want ErrUnknown naming slowcrm, stripe", err)
	}
	if err := (Known{}).Check("anything", ""); err != nil {
		t.Errorf("without a file, Check(anything) = %v", err)
	}
	if err := (Known{}).Check("a:b", ""); err == nil || errors.Is(err, ErrUnknown) {
		t.Errorf("Check(a:b) = %v, want a bad name", err)
	}
	if _, err := LoadKnown(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "HOOKLINE_PROVIDERS") {
		t.Errorf("LoadKnown of a missing file: %v", err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	views := k.Views(map[string]control.Setting{
		"slowcrm": {Provider: "slowcrm", Rate: 5, By: "alice", At: at},
		"old":     {Provider: "old", Paused: true, By: "bob", At: at},
	})
	var got []string
	for _, v := range views {
		got = append(got, v.Provider+"="+v.State+"/"+v.Text)
	}
	if strings.Join(got, " ") != "old=paused/paused slowcrm=draining/draining at 5/s stripe=running/running" {
		t.Errorf("views %v", got)
	}
	if views[2].At != nil || views[1].At == nil || !views[1].At.Equal(at) || views[1].Rate != 5 {
		t.Errorf("views %+v", views)
	}
}

// TestKnownRoutes: a provider of the file has its routes (those of its
// routes:, or the route default of a provider-level destination); another
// route of it, or a route of a provider the file lacks, is ErrUnknown
// naming what there is; a bad route name is refused with or without a
// file; route settings are listed apart from provider-wide ones.
func TestKnownRoutes(t *testing.T) {
	k := mustKnown(t)
	var routes []string
	for _, r := range k.Routes() {
		routes = append(routes, r.Name())
	}
	if strings.Join(routes, " ") != "slowcrm/default stripe/billing stripe/crm" {
		t.Fatalf("routes %v", routes)
	}
	for _, ok := range [][2]string{{"stripe", "billing"}, {"stripe", "crm"}, {"slowcrm", "default"}} {
		if err := k.Check(ok[0], ok[1]); err != nil {
			t.Errorf("Check(%s/%s) = %v", ok[0], ok[1], err)
		}
	}
	if err := k.Check("stripe", "default"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `unknown route "stripe/default"`) || !strings.Contains(err.Error(), "stripe has the routes billing, crm") {
		t.Errorf("Check(stripe/default) = %v, want ErrUnknown naming stripe's routes (a provider with routes has no default)", err)
	}
	if err := k.Check("nosuch", "default"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Check(nosuch/default) = %v, want ErrUnknown", err)
	}
	for _, bad := range []string{"Billing", "a.b", "a/b"} {
		if err := (Known{}).Check("stripe", bad); err == nil || errors.Is(err, ErrUnknown) {
			t.Errorf("Check(stripe, %q) = %v, want a bad name", bad, err)
		}
	}
	if err := (Known{}).Check("stripe", "billing"); err != nil {
		t.Errorf("without a file, Check(stripe/billing) = %v", err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	got := map[string]control.Setting{
		"stripe":         {Provider: "stripe", Paused: true, By: "alice", At: at},
		"stripe/billing": {Provider: "stripe", Route: "billing", Rate: 5, By: "bob", At: at},
	}
	var rv []string
	for _, v := range k.RouteViews(got) {
		rv = append(rv, v.Name()+"="+v.State)
	}
	if strings.Join(rv, " ") != "slowcrm/default=running stripe/billing=draining stripe/crm=running" {
		t.Errorf("route views %v", rv)
	}
	var pv []string
	for _, v := range k.Views(got) {
		pv = append(pv, v.Name()+"="+v.State)
	}
	if strings.Join(pv, " ") != "slowcrm=running stripe=paused" {
		t.Errorf("provider views %v", pv)
	}
}

func TestLive(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := NewLive(mustKnown(t), reg)
	if n := len(gauges(t, reg, "hookline_dlq_provider_paused")); n != 2 {
		t.Fatalf("%d paused series before any setting, want one per provider of the file", n)
	}
	if _, caught := l.Views(); caught {
		t.Fatal("caught up before CaughtUp")
	}
	at := time.Now()
	paused := control.Setting{Provider: "slowcrm", Paused: true, By: "a", At: at}
	done := make(chan bool)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- l.Await(ctx, paused)
	}()
	l.Apply(control.Setting{Provider: "slowcrm", Rate: 3, At: at})
	l.Apply(paused)
	if !<-done {
		t.Fatal("Await did not see the setting applied")
	}
	if v := gauges(t, reg, "hookline_dlq_provider_paused")["slowcrm"]; v != 1 {
		t.Errorf("paused gauge %v", v)
	}
	l.Apply(control.Setting{Provider: "slowcrm", Rate: 2.5})
	l.Apply(control.Setting{Provider: "other", Paused: true})
	if p, r := gauges(t, reg, "hookline_dlq_provider_paused")["slowcrm"], gauges(t, reg, "hookline_dlq_provider_rate")["slowcrm"]; p != 0 || r != 2.5 {
		t.Errorf("after a drain: paused %v rate %v", p, r)
	}
	if n := len(gauges(t, reg, "hookline_dlq_route_paused")); n != 3 {
		t.Errorf("%d route paused series, want one per route of the file", n)
	}
	billing := control.Setting{Provider: "stripe", Route: "billing", Paused: true, By: "b", At: at}
	l.Apply(billing)
	if v := gauges(t, reg, "hookline_dlq_route_paused")["stripe/billing"]; v != 1 {
		t.Errorf("route paused gauge %v", v)
	}
	if v := gauges(t, reg, "hookline_dlq_provider_paused")["stripe"]; v != 0 {
		t.Errorf("a route's pause set the provider's gauge: %v", v)
	}
	ctx1, cancel1 := context.WithTimeout(context.Background(), time.Second)
	defer cancel1()
	if !l.Await(ctx1, billing) {
		t.Error("Await did not see the route's setting")
	}
	if rv, _ := l.RouteViews(); len(rv) != 3 || rv[0].Name() != "slowcrm/default" || rv[1].Name() != "stripe/billing" || !rv[1].Paused || rv[2].Paused {
		t.Errorf("route views %+v", rv)
	}
	l.CaughtUp()
	views, caught := l.Views()
	if !caught || len(views) != 3 || views[0].Provider != "other" || !views[0].Paused || views[2].Provider != "stripe" || views[2].Paused {
		t.Errorf("views %+v caught %v", views, caught)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if l.Await(ctx, paused) {
		t.Error("Await saw a setting replaced since")
	}
}

// gauges reads the series of one gauge vector from reg, by provider label
// (provider/route for a route's).
func gauges(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var name []string
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" || l.GetName() == "route" {
					name = append(name, l.GetValue())
				}
			}
			out[strings.Join(name, "/")] = m.GetGauge().GetValue()
		}
	}
	return out
}
